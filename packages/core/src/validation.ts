import type { Keys } from './dtypes.js';
import { InvalidArgumentError, InvalidTypeError, invalidParameter, OutOfRangeError, type ErrorClass } from './errors.js';
import { isTypedArrayOf, plainTypedArray } from './typed.js';

/**
 * The argument checks every package shares (options objects, booleans, integers,
 * numbers, names, row indices). Each returns the validated value (or the default
 * for undefined / null) and throws an EmbeddingError whose message names the
 * argument, what was expected and what was received; messages are built only on
 * failure.
 */

export interface OptionsCheck {
  /** What the object is, for messages. Default 'an options object'. */
  expected?: string;
  /** undefined / null is an error instead of `{}`. Default false. */
  required?: boolean;
}

const NO_CHECK: OptionsCheck = Object.freeze({});
/** What checkOptions returns for undefined / null (frozen and shared: no object per call). */
const NO_OPTIONS: object = Object.freeze({});

/** An array of strings (a loop, not `some`: no closure per call). */
function isNameList(known: unknown): known is readonly string[] {
  if (!Array.isArray(known)) return false;
  for (let i = 0; i < known.length; i++) if (typeof known[i] !== 'string') return false;
  return true;
}

/**
 * An options object whose keys are all in `known` (undefined / null: a frozen `{}`).
 * @throws InvalidTypeError (not a plain object), InvalidArgumentError naming `argument.key` for an unknown key
 */
export function checkOptions<T extends object = Record<string, unknown>>(
  options: unknown,
  known: readonly string[],
  argument = 'options',
  check: OptionsCheck = NO_CHECK,
): Partial<T> {
  if (!isNameList(known)) throw invalidParameter('known', 'an array of option names', known, InvalidTypeError);
  if (typeof argument !== 'string') throw invalidParameter('argument', 'a string', argument, InvalidTypeError);
  if (typeof check !== 'object' || check === null) throw invalidParameter('check', 'an object', check, InvalidTypeError);
  const expected = typeof check.expected === 'string' ? check.expected : 'an options object';
  if (options === undefined || options === null) {
    if (check.required) throw invalidParameter(argument, expected, options, InvalidTypeError);
    return NO_OPTIONS as Partial<T>;
  }
  if (typeof options !== 'object' || Array.isArray(options)) throw invalidParameter(argument, expected, options, InvalidTypeError);
  unknownKeys(options, known, argument, 'options');
  return options as Partial<T>;
}

/**
 * Refuses an object with an own enumerable key `known` lacks (what {@link checkOptions} checks
 * of an options object, for the other plain objects an API takes: a spec, a plan, a bag, an
 * entry of a list). No allocation unless it throws (for...in, no key array), so hot paths use it.
 * @throws InvalidArgumentError naming `argument.key`, listing the known names (`what`: 'options', 'fields')
 */
export function checkKnownKeys(obj: object, known: readonly string[], argument: string, what = 'options'): void {
  if (typeof obj !== 'object' || obj === null) throw invalidParameter('obj', 'an object', obj, InvalidTypeError);
  if (!isNameList(known)) throw invalidParameter('known', 'an array of names', known, InvalidTypeError);
  if (typeof argument !== 'string') throw invalidParameter('argument', 'a string', argument, InvalidTypeError);
  if (typeof what !== 'string') throw invalidParameter('what', 'a string', what, InvalidTypeError);
  unknownKeys(obj, known, argument, what);
}

/** checkKnownKeys without its argument checks, for core's own callers (their arguments are constants). */
export function unknownKeys(obj: object, known: readonly string[], argument: string, what: string): void {
  for (const k in obj) {
    if (!known.includes(k) && Object.prototype.hasOwnProperty.call(obj, k)) {
      throw invalidParameter(`${argument}.${k}`, `one of the known ${what} (${known.join(', ')})`, k);
    }
  }
}

/** A boolean; `fallback` for undefined / null. @throws InvalidTypeError */
export function checkBoolean(value: unknown, argument: string, fallback: boolean): boolean {
  if (value === undefined || value === null) return fallback === true;
  if (typeof value !== 'boolean') throw invalidParameter(argument, 'a boolean', value, InvalidTypeError);
  return value;
}

/** A JS type as `typeof` names it. */
export type JsType = 'number' | 'bigint' | 'string' | 'boolean' | 'object' | 'function' | 'symbol' | 'undefined';

/**
 * The error class for a refused `value` that should have been of JS type `type`: InvalidTypeError
 * when it is of another type (a string `'8'`, a BigInt or undefined where a number goes; TF's
 * TypeError), InvalidArgumentError when it has the right type and a bad value (0, 1.5, NaN where an
 * integer >= 1 goes; TF's ValueError). Pass it as `invalidParameter`'s last argument.
 */
export function errorClassFor(value: unknown, type: JsType): ErrorClass {
  return typeof value === type ? InvalidArgumentError : InvalidTypeError;
}

/** Bounds and fallback of {@link checkInteger} / {@link checkNumber}. */
export interface RangeCheck {
  /** Smallest accepted value (inclusive). Default: none. */
  min?: number;
  /** Largest accepted value (inclusive). Default: none. */
  max?: number;
  /** Returned for undefined / null; without it they are errors. */
  fallback?: number;
}

/** A usable range (junk or null: no bounds, no fallback). */
function rangeOf(range: unknown): RangeCheck {
  if (typeof range !== 'object' || range === null) return {};
  const r = range as RangeCheck;
  const n = (v: unknown) => (typeof v === 'number' && !Number.isNaN(v) ? v : undefined);
  return { min: n(r.min), max: n(r.max), fallback: n(r.fallback) };
}

function describeRange(kind: string, min: number | undefined, max: number | undefined): string {
  if (min !== undefined && max !== undefined) return `${kind} in [${min}, ${max}]`;
  if (min !== undefined) return `${kind} >= ${min}`;
  if (max !== undefined) return `${kind} <= ${max}`;
  return kind;
}

/**
 * A safe integer in [min, max]; `fallback` for undefined / null when given.
 * @throws InvalidTypeError (not a number: a string, a BigInt, undefined without fallback; TF's TypeError),
 * InvalidArgumentError (a number that is not a safe integer, or out of range; TF's ValueError)
 */
export function checkInteger(value: unknown, argument: string, range: RangeCheck = {}): number {
  range = rangeOf(range);
  if ((value === undefined || value === null) && range.fallback !== undefined) return range.fallback;
  const ok =
    typeof value === 'number' &&
    Number.isSafeInteger(value) &&
    (range.min === undefined || value >= range.min) &&
    (range.max === undefined || value <= range.max);
  if (!ok) {
    throw invalidParameter(argument, describeRange('an integer', range.min, range.max), value, errorClassFor(value, 'number'));
  }
  return value;
}

/**
 * A finite number in [min, max]; `fallback` for undefined / null when given.
 * @throws InvalidTypeError (not a number: a string, a BigInt, undefined without fallback),
 * InvalidArgumentError (NaN, ±Infinity, or out of range)
 */
export function checkNumber(value: unknown, argument: string, range: RangeCheck = {}): number {
  range = rangeOf(range);
  if ((value === undefined || value === null) && range.fallback !== undefined) return range.fallback;
  const ok =
    typeof value === 'number' &&
    Number.isFinite(value) &&
    (range.min === undefined || value >= range.min) &&
    (range.max === undefined || value <= range.max);
  if (!ok) {
    throw invalidParameter(argument, describeRange('a finite number', range.min, range.max), value, errorClassFor(value, 'number'));
  }
  return value;
}

/** A non-empty string; `fallback` for undefined / null when given. @throws InvalidTypeError (not a string), InvalidArgumentError ('') */
export function checkName(value: unknown, argument: string, fallback?: string): string {
  if ((value === undefined || value === null) && typeof fallback === 'string') return fallback;
  if (typeof value !== 'string' || value.length === 0) throw invalidParameter(argument, 'a non-empty string', value, errorClassFor(value, 'string'));
  return value;
}

/**
 * `value` when it is a function; `null` for undefined / null.
 * @typeParam F - the function type the caller expects (its signature is not checked)
 * @throws InvalidTypeError naming `argument` (with `expected`) for anything else
 */
export function checkFunction<F extends (...args: never[]) => unknown>(value: unknown, argument: string, expected: string): F | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'function') throw invalidParameter(argument, expected, value, InvalidTypeError);
  return value as F;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Index of the first key outside [0, n), or -1. Reads int64 keys as two uint32
 * words (no BigInt per key; a negative key has a high word >= 2^31 and fails).
 */
export function firstOutOfRange(keys: Keys, n: number): number {
  if (isTypedArrayOf(keys, Int32Array)) return firstInt32OutOfRange(plainTypedArray(keys, Int32Array, 'keys'), n);
  if (!LITTLE_ENDIAN) {
    const limit = BigInt(n);
    for (let i = 0; i < keys.length; i++) if (keys[i]! < 0n || keys[i]! >= limit) return i;
    return -1;
  }
  // The engine's buffer, offset and length (a subclass may override them): a plain view of the keys.
  const plain = plainTypedArray(keys, BigInt64Array, 'keys');
  const words = new Uint32Array(plain.buffer, plain.byteOffset, plain.length * 2);
  for (let i = 0; i < plain.length; i++) {
    const hi = words[2 * i + 1]!;
    const lo = words[2 * i]!;
    if (hi === 0 ? lo >= n : hi >= 0x200000 || hi * 4294967296 + lo >= n) return i;
  }
  return -1;
}

/**
 * firstOutOfRange of int32 keys: eight keys per test (each an unsigned compare, so a
 * negative key reads as >= 2^31), then the block that failed key by key. 1.5x faster
 * than a test per key on 2M keys (the static bag checks every id before the call).
 */
function firstInt32OutOfRange(keys: Int32Array, n: number): number {
  const len = keys.length;
  const m = Math.min(n, 0x80000000);
  let i = 0;
  for (; i + 8 <= len; i += 8) {
    const bad =
      +((keys[i]! >>> 0) >= m) |
      +((keys[i + 1]! >>> 0) >= m) |
      +((keys[i + 2]! >>> 0) >= m) |
      +((keys[i + 3]! >>> 0) >= m) |
      +((keys[i + 4]! >>> 0) >= m) |
      +((keys[i + 5]! >>> 0) >= m) |
      +((keys[i + 6]! >>> 0) >= m) |
      +((keys[i + 7]! >>> 0) >= m);
    if (bad !== 0) break;
  }
  for (; i < len; i++) if ((keys[i]! >>> 0) >= m) return i;
  return -1;
}

/**
 * Checks that every key is a row index in [0, rows) of `tableName`.
 * @throws OutOfRangeError naming `argument[i]`
 */
export function checkRowIndices(keys: Keys, rows: number, argument: string, tableName: string): void {
  const bad = firstOutOfRange(keys, rows);
  if (bad >= 0) {
    throw new OutOfRangeError(`Expected ${argument}[${bad}] to be a row index in [0, ${rows}) of table "${tableName}" but received ${keys[bad]}`, {
      argument,
    });
  }
}
