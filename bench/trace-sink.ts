// --trace: an OTLP/HTTP sink for the gateways the bench starts. It reads each export whole and
// answers 200 as a collector does (an empty response in the export's encoding, protobuf or JSON),
// so the gateways pay the real cost of exporting their spans (serialising, sending, the batch
// processor) with no collector to install; the spans are counted, not kept.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface TraceSink {
  url: string
  /** exports received, and their bytes */
  exports: () => { requests: number; bytes: number }
  close: () => Promise<void>
}

export async function startTraceSink (): Promise<TraceSink> {
  let requests = 0
  let bytes = 0
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => { bytes += chunk.length })
    req.on('end', () => {
      requests++
      const protobuf = req.headers['content-type'] === 'application/x-protobuf'
      res.writeHead(200, { 'content-type': protobuf ? 'application/x-protobuf' : 'application/json' }).end(protobuf ? '' : '{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exports: () => ({ requests, bytes }),
    close: async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  }
}

/**
 * The gateways' OTEL_* variables for --trace: every request traced, or a share of them
 * (traceidratio); the batch processor's own (OTEL_BSP_*) as the bench was given them.
 */
export function traceEnv (trace: 'all' | number, sinkUrl: string, env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const batch = Object.entries(env).filter((entry): entry is [string, string] => entry[0].startsWith('OTEL_BSP_') && entry[1] !== undefined)
  return {
    ...Object.fromEntries(batch),
    OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
    ...(trace === 'all'
      ? { OTEL_TRACES_SAMPLER: 'always_on' }
      : { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: String(trace) })
  }
}
