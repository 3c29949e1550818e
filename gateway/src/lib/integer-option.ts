/** An option that must be a whole number of at least `minimum` (and at most `maximum`, when given): returned as given, else a RangeError naming it. */
export function integerOption (name: string, value: number, minimum: number, maximum?: number): number {
  if (!Number.isSafeInteger(value) || value < minimum) throw new RangeError(`${name} must be an integer of at least ${minimum}, not ${value}`)
  if (maximum !== undefined && value > maximum) throw new RangeError(`${name} must be an integer of at most ${maximum}, not ${value}`)
  return value
}
