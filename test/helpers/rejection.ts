/** The error `fn` throws or rejects with (a passing call fails the test). */
export async function rejection (fn: () => unknown): Promise<unknown> {
  try {
    await fn()
  } catch (err) {
    return err
  }
  throw new Error('expected an error')
}
