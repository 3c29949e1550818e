/** A mistake in what was given to the client: `input` names which input, the message how to fix it. */
export class SigningInputError extends TypeError {
  override name = 'SigningInputError'
  readonly input: string
  constructor (input: string, message: string) {
    super(`${input}: ${message}`)
    this.input = input
  }
}

/** keygate answered with an error: its status and problem+json body. */
export class KeygateResponseError extends Error {
  override name = 'KeygateResponseError'
  readonly code: string | undefined
  readonly status: number
  readonly problem: Record<string, unknown>
  constructor (status: number, problem: Record<string, unknown>) {
    const code = typeof problem.code === 'string' ? problem.code : undefined
    super(`${status}${code === undefined ? '' : ` ${code}`}: ${typeof problem.detail === 'string' ? problem.detail : JSON.stringify(problem)}`)
    this.code = code
    this.status = status
    this.problem = problem
  }
}
