import { describeValue, InvalidArgumentError, InvalidTypeError, invalidParameter } from '@embedstack/core';

/** Levenshtein distance (small strings: config keys). */
function distance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j]!;
      prev[j] = Math.min(up + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length]!;
}

/** The known key nearest to `key` (by edit distance, case-insensitive). */
export function nearestKey(key: string, known: readonly string[]): string {
  let best = known[0] ?? '';
  let bestD = Infinity;
  for (const k of known) {
    const d = distance(key.toLowerCase(), k.toLowerCase());
    if (d < bestD) {
      bestD = d;
      best = k;
    }
  }
  return best;
}

/**
 * A JSON object of the ps config whose keys are all in `known`.
 * @throws InvalidTypeError (not an object), InvalidArgumentError naming the unknown key and the nearest known one
 */
export function checkSection(value: unknown, known: readonly string[], where: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalidParameter(where, 'a JSON object', value, InvalidTypeError);
  for (const k of Object.keys(value)) {
    if (!known.includes(k)) {
      throw new InvalidArgumentError(`Unknown key ${JSON.stringify(k)} in ${where}: did you mean ${JSON.stringify(nearestKey(k, known))}? (known keys: ${known.join(', ')})`, { argument: `${where}.${k}` });
    }
  }
  return value as Record<string, unknown>;
}

/** `value` mapped through `aliases` (lower-cased); @throws InvalidArgumentError listing the accepted names */
export function checkEnum<T extends string>(value: unknown, where: string, aliases: Readonly<Record<string, T>>, fallback: NoInfer<T>): T {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'string') throw invalidParameter(where, `one of ${Object.keys(aliases).join(' | ')}`, value, InvalidTypeError);
  const v = aliases[value.toLowerCase()];
  if (v === undefined) {
    throw new InvalidArgumentError(`Expected ${where} to be one of ${Object.keys(aliases).join(' | ')} but received ${describeValue(value)} (did you mean ${JSON.stringify(nearestKey(value, Object.keys(aliases)))}?)`, { argument: where });
  }
  return v;
}

const NAME = /^[a-zA-Z0-9_-]{1,120}$/;

/** A HugeCTR name: `[a-zA-Z0-9_-]{1,120}`. @throws InvalidArgumentError / InvalidTypeError */
export function checkHpsName(value: unknown, where: string): string {
  if (typeof value !== 'string') throw invalidParameter(where, 'a name matching [a-zA-Z0-9_-]{1,120}', value, InvalidTypeError);
  if (!NAME.test(value)) throw invalidParameter(where, 'a name matching [a-zA-Z0-9_-]{1,120}', value);
  return value;
}

/** A boolean, accepting HugeCTR's "true"/"false" strings too. */
export function checkFlag(value: unknown, where: string, fallback: boolean): boolean {
  if (value === undefined || value === null) return fallback;
  if (typeof value === 'boolean') return value;
  if (value === 'true' || value === 'false') return value === 'true';
  throw invalidParameter(where, 'a boolean', value, InvalidTypeError);
}

/** A finite number in [min, max] (fallback when absent). */
export function checkNum(value: unknown, where: string, min: number, max: number, fallback?: number): number {
  if ((value === undefined || value === null) && fallback !== undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw invalidParameter(where, `a number in [${min}, ${max}]`, value, typeof value === 'number' ? InvalidArgumentError : InvalidTypeError);
  }
  return value;
}

/** An integer in [min, max] (fallback when absent). */
export function checkInt(value: unknown, where: string, min: number, max: number, fallback?: number): number {
  const v = checkNum(value, where, min, max, fallback);
  if (!Number.isSafeInteger(v)) throw invalidParameter(where, `an integer in [${min}, ${max}]`, value);
  return v;
}

/** A non-empty array (or, when `scalarOk`, one value standing for a one-element array). */
export function checkArray(value: unknown, where: string, scalarOk = false): unknown[] {
  if (scalarOk && value !== undefined && value !== null && !Array.isArray(value)) return [value];
  if (!Array.isArray(value) || value.length === 0) throw invalidParameter(where, 'a non-empty array', value, InvalidTypeError);
  return value;
}
