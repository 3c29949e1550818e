// `tsc -p CONFIG` run in a folder, as a user runs it, for the small consumer projects that tests
// type-check (test/system/client-package.test.ts), without a process each: TypeScript's compiler
// API in the test's own process, doing what tsc's command line does (executeCommandLine's
// performCompilation): the config parsed as `-p` parses it, a program on an incremental compiler
// host (JSDoc parsed as tsc parses it), the diagnostics gathered in tsc's order with its
// short-cuts, sorted and deduplicated, written as tsc writes them to a pipe (not a terminal:
// ts.formatDiagnostic, no colour, no summary), and tsc's exit status (0, or 1 when no output was
// written, else 2). client-package.test.ts's last test compares it with the real tsc (a process)
// on a small project with errors, a config's first run and its second.
//
// What one checker shares between its runs is what TypeScript shares itself, and only that:
// - a declaration file (.d.ts: TypeScript's lib files, @types/node, a package's declarations) is
//   parsed and bound once per identical text and per the settings that shape a source file (the
//   key of TypeScript's DocumentRegistry, the language service's cache, with the file's module
//   format and JSDoc mode), as `tsc -b` and the language service reuse them between programs;
//   the files of the project are read and parsed on every run;
// - a second run of the same config is tsc --incremental's next run (a builder program on the
//   first): files the change does not reach keep the diagnostics their first check gave.
// Each run type-checks its program with a checker of its own, every file as tsc does (a config's
// skipLibCheck as it says).
import { execFile } from 'node:child_process'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const TSC = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url))

export interface TscRun {
  /** tsc's exit status */
  code: number
  /** what tsc writes to its standard output (a pipe) */
  out: string
}

interface Parsed { sourceFile: ts.SourceFile; text: string }

/** A `tsc -p` that keeps what later runs may reuse (see above); `tsc(dir, config)` runs `tsc -p config` in dir. */
export function inProcessTsc (): (dir: string, config: string) => TscRun {
  const settingsKey = ts.createDocumentRegistry(ts.sys.useCaseSensitiveFileNames).getKeyForCompilationSettings
  const declarations = new Map<string, Parsed>()
  const previous = new Map<string, ts.SemanticDiagnosticsBuilderProgram>()

  return (dir, config) => {
    const cwd = resolve(dir)
    const system: ts.System = { ...ts.sys, getCurrentDirectory: () => cwd }
    const canonical = ts.sys.useCaseSensitiveFileNames ? (name: string) => name : (name: string) => name.toLowerCase()
    const format = (diagnostics: readonly ts.Diagnostic[]): string =>
      ts.formatDiagnostics(diagnostics, { getCurrentDirectory: () => cwd, getNewLine: () => ts.sys.newLine, getCanonicalFileName: canonical })

    // tsc -p: the file, or tsconfig.json in the folder, relative to the current directory
    let configFile = resolve(cwd, config)
    if (ts.sys.directoryExists(configFile)) configFile = resolve(configFile, 'tsconfig.json')
    // (tsc says so in a message of its own, TS5057 or TS5058, which this does not reproduce)
    if (!ts.sys.fileExists(configFile)) throw new Error(`tsc -p ${config} in ${cwd}: no such config (${configFile})`)
    let unrecoverable: ts.Diagnostic | undefined
    const parsed = ts.getParsedCommandLineOfConfigFile(configFile, undefined, {
      useCaseSensitiveFileNames: ts.sys.useCaseSensitiveFileNames,
      readDirectory: ts.sys.readDirectory,
      fileExists: ts.sys.fileExists,
      readFile: ts.sys.readFile,
      getCurrentDirectory: () => cwd,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => { unrecoverable = diagnostic }
    })
    if (parsed === undefined || unrecoverable !== undefined) {
      return { code: 1, out: unrecoverable === undefined ? '' : format([unrecoverable]) }
    }
    const { options } = parsed
    if (options.pretty !== undefined || options.incremental === true || options.composite === true || options.build === true) {
      throw new Error(`${configFile}: pretty, incremental, composite and build are tsc options this in-process tsc does not reproduce`)
    }

    const host = ts.createIncrementalCompilerHost(options, system)
    host.jsDocParsingMode = ts.JSDocParsingMode.ParseForTypeErrors
    const read = host.getSourceFile.bind(host)
    const settings = settingsKey(options)
    host.getSourceFile = (fileName, languageVersionOrOptions, onError, shouldCreateNewSourceFile) => {
      if (!fileName.endsWith('.d.ts') || shouldCreateNewSourceFile === true) return read(fileName, languageVersionOrOptions, onError, shouldCreateNewSourceFile)
      const { languageVersion, impliedNodeFormat, jsDocParsingMode } = typeof languageVersionOrOptions === 'object'
        ? languageVersionOrOptions
        : { languageVersion: languageVersionOrOptions, impliedNodeFormat: undefined, jsDocParsingMode: undefined }
      const key = [settings, languageVersion, impliedNodeFormat, jsDocParsingMode, fileName].join('|')
      const known = declarations.get(key)
      if (known !== undefined && known.text === system.readFile(fileName)) return known.sourceFile
      const sourceFile = read(fileName, languageVersionOrOptions, onError, shouldCreateNewSourceFile)
      if (sourceFile !== undefined) declarations.set(key, { sourceFile, text: sourceFile.text })
      return sourceFile
    }

    const program = ts.createSemanticDiagnosticsBuilderProgram(parsed.fileNames, options, host, previous.get(configFile),
      ts.getConfigFileParsingDiagnostics(parsed), parsed.projectReferences)
    previous.set(configFile, program)

    // tsc's emitFilesAndReportErrors
    const all = [...program.getConfigFileParsingDiagnostics()]
    const configErrors = all.length
    all.push(...program.getSyntacticDiagnostics())
    if (all.length === configErrors) {
      all.push(...program.getOptionsDiagnostics())
      if (options.listFilesOnly !== true) {
        all.push(...program.getGlobalDiagnostics())
        if (all.length === configErrors) all.push(...program.getSemanticDiagnostics())
        if (options.noEmit === true && options.declaration === true && all.length === configErrors) { // (or composite: refused above)
          all.push(...program.getDeclarationDiagnostics())
        }
      }
    }
    const emitted = options.listFilesOnly === true ? { emitSkipped: true, diagnostics: [] } : program.emit()
    all.push(...emitted.diagnostics)
    const diagnostics = ts.sortAndDeduplicateDiagnostics(all)
    const code = diagnostics.length === 0 ? 0 : emitted.emitSkipped ? 1 : 2
    return { code, out: format(diagnostics) }
  }
}

/** The real tsc, `tsc -p config` in dir, for comparison: its exit status and standard output. */
export async function processTsc (dir: string, config: string): Promise<TscRun> {
  return await new Promise((resolve) => {
    execFile(process.execPath, [TSC, '-p', config], { cwd: dir }, (err, stdout) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, out: stdout })
    })
  })
}
