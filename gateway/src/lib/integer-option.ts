/** An option that must be a whole number of at least `minimum`: returned as given, else a RangeError naming it. */
export function integerOption (name: string, value: number, minimum: number): number {
  if (!Number.isSafeInteger(value) || value < minimum) throw new RangeError(`${name} must be an integer of at least ${minimum}, not ${value}`)
  return value
}
