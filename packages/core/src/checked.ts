import * as bag from './bag.js';
import * as crc from './checkpoint/crc32c.js';
import type { KeyDtype, Keys } from './dtypes.js';
import { InvalidTypeError, invalidParameter, OutOfRangeError } from './errors.js';
import * as init from './initializers.js';
import * as keys from './keys.js';
import * as opt from './optimizers.js';
import * as random from './random.js';
import * as shape from './shape.js';
import * as plan from './shardPlan.js';
import { checkFunction, checkInteger, checkName } from './validation.js';
import * as validation from './validation.js';
import { isTypedArrayOf, plainTypedArray } from './typed.js';

/**
 * The low-level helpers core exports (for backends, facades and tests) as the
 * public API sees them: each checks its arguments and throws a coded EmbeddingError,
 * then calls the unchecked function core itself uses on validated data (in hot loops).
 */

const uint32 = (v: unknown, argument: string) => checkInteger(v, argument, { min: 0, max: 0xffffffff });
const int32 = (v: unknown, argument: string) => checkInteger(v, argument, { min: -2147483648, max: 0xffffffff });

function checkKeysArray(v: unknown, argument: string): Keys {
  if (isTypedArrayOf(v, BigInt64Array)) return plainTypedArray(v, BigInt64Array, argument);
  if (isTypedArrayOf(v, Int32Array)) return plainTypedArray(v, Int32Array, argument);
  throw invalidParameter(argument, 'a BigInt64Array or Int32Array', v, InvalidTypeError);
}

function checkKey(v: unknown, argument: string): bigint | number {
  if (typeof v === 'bigint') {
    if (v < -(1n << 63n) || v >= 1n << 63n) throw invalidParameter(argument, 'an int64 key', v, OutOfRangeError);
    return v;
  }
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  throw invalidParameter(argument, 'an integer key (a safe integer or a bigint)', v, InvalidTypeError);
}

function checkPositions(v: unknown, n: number, argument: string): ArrayLike<number> {
  const a = v as ArrayLike<unknown> | null;
  if (typeof a !== 'object' || a === null || typeof a.length !== 'number' || ArrayBuffer.isView(a) === false && !Array.isArray(a)) {
    throw invalidParameter(argument, 'an array of positions', v, InvalidTypeError);
  }
  for (let i = 0; i < a.length; i++) {
    const p = a[i];
    if (typeof p !== 'number' || !Number.isInteger(p) || p < 0 || p >= n) throw invalidParameter(`${argument}[${i}]`, `a position in [0, ${n})`, p, validation.errorClassFor(p, 'number'));
  }
  return a as ArrayLike<number>;
}

function checkFloat(v: unknown, argument: string): number {
  if (typeof v !== 'number' || Number.isNaN(v)) throw invalidParameter(argument, 'a number', v, validation.errorClassFor(v, 'number'));
  return v;
}

function checkResolvedPlan(v: unknown, argument = 'plan'): plan.ResolvedShardPlan {
  const p = v as Partial<plan.ResolvedShardPlan> | null;
  const ok =
    typeof p === 'object' &&
    p !== null &&
    (p.placement === 'mod' || p.placement === 'range' || p.placement === 'localized') &&
    Number.isSafeInteger(p.numShards) &&
    p.numShards! >= 1 &&
    Number.isSafeInteger(p.shard) &&
    p.shard! >= 0 &&
    p.shard! < p.numShards! &&
    Number.isSafeInteger(p.start) &&
    Number.isSafeInteger(p.end) &&
    typeof p.roundRobin === 'boolean';
  if (!ok) throw invalidParameter(argument, 'a resolved shard plan (resolveShardPlan)', v, InvalidTypeError);
  return p as plan.ResolvedShardPlan;
}

function checkSlotLayout(v: unknown, argument: string): opt.SlotLayout {
  const s = v as Partial<opt.SlotLayout> | null;
  const ok = typeof s === 'object' && s !== null && Array.isArray(s.names) && Array.isArray(s.widths) && s.widths.every((w) => w === 'dim' || w === 1);
  if (!ok) throw invalidParameter(argument, 'a slot layout { names, widths, initial }', v, InvalidTypeError);
  return s as opt.SlotLayout;
}

function checkKeyDtype(v: unknown, argument = 'dtype'): KeyDtype {
  if (v !== 'int64' && v !== 'int32') throw invalidParameter(argument, "'int64' or 'int32'", v, InvalidTypeError);
  return v;
}

// ---- random.ts ---------------------------------------------------------------------

/**
 * The 32-bit integer mixer of core's counter-based random numbers (x ^= x >>> 16; x *= 0x7feb352d; x ^= x >>> 15; x *= 0x846ca68b; x ^= x >>> 16), as an unsigned 32-bit number.
 * @throws InvalidArgumentError when `x` is not an integer in [-2^31, 2^32)
 */
export function mix32(x: number): number {
  return random.mix32(int32(x, 'x'));
}
/**
 * 32-bit FNV-1a of a string's UTF-8 bytes (unsigned): the default random stream id of a table name.
 * @throws InvalidTypeError when `text` is not a string
 */
export function fnv1a32(text: string): number {
  if (typeof text !== 'string') throw invalidParameter('text', 'a string', text, InvalidTypeError);
  return random.fnv1a32(text);
}
/**
 * The random 32-bit word for (seed, stream, key words, column, draw): mix32 chained over each input in that order, starting from seed ^ 0x9e3779b9. What the backends reproduce bit for bit.
 * @throws InvalidArgumentError when an argument is not an integer in [0, 2^32)
 */
export function randomWord(seed: number, stream: number, keyLo: number, keyHi: number, column: number, draw: number): number {
  return random.randomWord(uint32(seed, 'seed'), uint32(stream, 'stream'), uint32(keyLo, 'keyLo'), uint32(keyHi, 'keyHi'), uint32(column, 'column'), uint32(draw, 'draw'));
}
/**
 * Low and high unsigned 32-bit words of a 64-bit key (a number key is sign-extended).
 * @throws InvalidTypeError / OutOfRangeError when `key` is not a safe integer or an int64 bigint
 */
export function keyWords(key: bigint | number): [number, number] {
  return random.keyWords(checkKey(key, 'key'));
}
/**
 * A uniform number in (0, 1) from a random word: ((word >>> 8) + 0.5) / 2^24 (never 0 or 1).
 * @throws InvalidArgumentError when `word` is not an integer in [0, 2^32)
 */
export function uniform01(word: number): number {
  return random.uniform01(uint32(word, 'word'));
}
/**
 * A standard normal draw from two uniforms in (0, 1) (Box-Muller, cosine branch).
 * @throws InvalidTypeError when `u1` or `u2` is not a number (NaN included)
 */
export function standardNormal(u1: number, u2: number): number {
  return random.standardNormal(checkFloat(u1, 'u1'), checkFloat(u2, 'u2'));
}

// ---- initializers.ts ------------------------------------------------------------------

/**
 * Writes the initial row of `key` into `out[offset, offset + dim)` (core's reference initializer; the backends reproduce it). `row` is the key's row index, used by `array` initializers.
 * @throws InvalidTypeError / InvalidArgumentError naming the argument (an unresolved or `function` initializer, a non-Float32Array `out`, an `out` shorter than offset + dim, ...)
 */
export function initialRow(
  initializer: init.ResolvedInitializer,
  seed: number,
  stream: number,
  key: bigint | number,
  dim: number,
  out: Float32Array,
  offset = 0,
  row = 0,
): void {
  if (!init.isInitializerSpec(initializer) || (initializer as { kind: string }).kind === 'function') {
    throw invalidParameter('initializer', 'a resolved initializer (resolveInitializer)', initializer, InvalidTypeError);
  }
  uint32(seed, 'seed');
  uint32(stream, 'stream');
  checkKey(key, 'key');
  checkInteger(dim, 'dim', { min: 1 });
  if (!(out instanceof Float32Array)) throw invalidParameter('out', 'a Float32Array', out, InvalidTypeError);
  checkInteger(offset, 'offset', { min: 0, max: Math.max(0, out.length - dim) });
  checkInteger(row, 'row', { min: 0 });
  if (offset + dim > out.length) throw invalidParameter('out', `at least offset + dim = ${offset + dim} floats`, out);
  init.initialRow(initializer, seed, stream, key, dim, out, offset, row);
}

// ---- shape.ts --------------------------------------------------------------------

/**
 * Number of elements of a shape (1 for the scalar shape `[]`).
 * @throws InvalidArgumentError when `s` is not an array of non-negative integers
 */
export function shapeSize(s: readonly number[]): number {
  return shape.shapeSize(shape.validateShape(s, 'shape'));
}
/**
 * Whether two shapes have the same rank and dimensions.
 * @throws InvalidArgumentError when `a` or `b` is not an array of non-negative integers
 */
export function shapesEqual(a: readonly number[], b: readonly number[]): boolean {
  return shape.shapesEqual(shape.validateShape(a, 'a'), shape.validateShape(b, 'b'));
}
/**
 * A shape as text for messages: `[2, 3]`.
 * @throws InvalidArgumentError when `s` is not an array of non-negative integers
 */
export function formatShape(s: readonly number[]): string {
  return shape.formatShape(shape.validateShape(s, 'shape'));
}
/**
 * Checks that `actual` equals `expected`.
 * @throws ShapeMismatchError naming `argument` when they differ; InvalidArgumentError / InvalidTypeError when an argument is malformed
 */
export function assertShape(actual: readonly number[], expected: readonly number[], argument: string): void {
  shape.assertShape(shape.validateShape(actual, 'actual'), shape.validateShape(expected, 'expected'), checkName(argument, 'argument'));
}

// ---- keys.ts --------------------------------------------------------------------

/**
 * Shape of a key input: an id Tensor keeps its shape, an array of n keys is `[n]`.
 * @throws InvalidTypeError when `input` is neither an array nor a Tensor
 */
export function keyShape(input: keys.KeyInput): number[] {
  const a = input as { length?: unknown } | null;
  if (!(input instanceof Object) || (typeof a?.length !== 'number' && !('shape' in (input as object)))) {
    throw invalidParameter('keys', 'a keys array or an id Tensor', input, InvalidTypeError);
  }
  return keys.keyShape(input);
}
/**
 * The key at position `i` as a bigint (for messages and oracles).
 * @throws InvalidTypeError when `k` is not a BigInt64Array or Int32Array; InvalidArgumentError when `i` is not in [0, k.length)
 */
export function keyAt(k: Keys, i: number): bigint {
  checkKeysArray(k, 'keys');
  return keys.keyAt(k, checkInteger(i, 'i', { min: 0, max: k.length - 1 }));
}
/**
 * The non-negative floor modulo TF uses to place keys on shards, `((key % n) + n) % n`, exact on 64-bit keys.
 * @throws InvalidTypeError / OutOfRangeError for a bad `key`; InvalidArgumentError when `n` is not an integer >= 1
 */
export function floorMod(key: bigint | number, n: number): number {
  return keys.floorMod(checkKey(key, 'key'), checkInteger(n, 'n', { min: 1 }));
}
/**
 * A new keys array holding `k[positions[i]]` for every i, in the dtype of `k`.
 * @throws InvalidTypeError when `k` is not a keys array or `positions` not an array; InvalidArgumentError naming `positions[i]` when a position is outside [0, k.length)
 */
export function takeKeys(k: Keys, positions: ArrayLike<number>): Keys {
  checkKeysArray(k, 'keys');
  return keys.takeKeys(k, checkPositions(positions, k.length, 'positions'));
}
/**
 * A keys array of `dtype` holding at(0), ..., at(n - 1): an Int32Array for 'int32', a BigInt64Array for 'int64'.
 * @throws InvalidTypeError / InvalidArgumentError naming the argument; naming `at(i)` when `at` returns a non-integer key
 */
export function makeKeys(dtype: KeyDtype, n: number, at: (i: number) => bigint | number): Keys {
  checkKeyDtype(dtype);
  checkInteger(n, 'n', { min: 0 });
  const f = checkFunction<(i: number) => unknown>(at, 'at', 'a function (i) => key');
  if (!f) throw invalidParameter('at', 'a function (i) => key', at, InvalidTypeError);
  const values = Array.from({ length: n }, (_, i) => checkKey(f(i), `at(${i})`));
  return keys.normalizeKeys(values as bigint[], dtype, 'at');
}

// ---- bag.ts, shardPlan.ts, validation.ts ------------------------------------------------

/**
 * A ragged bag of `nrows` rows from one segment (output row) id per entry, -1 dropping the entry; entries keep their input order within a row. `k` and `weights` ([n], or null weights) are copied.
 * @throws InvalidTypeError / InvalidArgumentError naming the argument (`segments[i]` outside [-1, nrows), lengths that differ from `k.length`)
 */
export function bagFromSegments(segments: Int32Array, k: Keys, weights: Float32Array | null, nrows: number): ReturnType<typeof bag.bagFromSegments> {
  checkKeysArray(k, 'keys');
  checkInteger(nrows, 'nrows', { min: 0 });
  if (!(segments instanceof Int32Array) || segments.length !== k.length) throw invalidParameter('segments', `an Int32Array of ${k.length} row ids`, segments, InvalidTypeError);
  for (let i = 0; i < segments.length; i++) if (segments[i]! < -1 || segments[i]! >= nrows) throw invalidParameter(`segments[${i}]`, `a row in [-1, ${nrows})`, segments[i]);
  if (weights !== null && weights !== undefined && (!(weights instanceof Float32Array) || weights.length !== k.length)) {
    throw invalidParameter('weights', `null or a Float32Array of ${k.length} weights`, weights, InvalidTypeError);
  }
  return bag.bagFromSegments(segments, k, weights ?? null, nrows);
}
/**
 * The local key of global key `key` under the resolved shard plan `p`, or null when another shard owns it. Exact on every int64 key.
 * @throws InvalidTypeError when `p` is not a resolved plan (see resolveShardPlan) or `key` not an integer key
 */
export function localKeyOf(key: bigint | number, p: plan.ResolvedShardPlan): bigint | number | null {
  return plan.localKeyOf(checkKey(key, 'key'), checkResolvedPlan(p));
}
/**
 * Positions and local keys of the entries of `k` that the shard of `p` owns, in input order.
 * @throws InvalidTypeError when `k` is not a keys array or `p` not a resolved plan
 */
export function planEntries(k: Keys, p: plan.ResolvedShardPlan): plan.PlanEntries {
  return plan.planEntries(checkKeysArray(k, 'keys'), checkResolvedPlan(p));
}
/**
 * Checks that every key of `k` the shard of `p` owns maps to a local row in [0, rows) of `tableName` (keys other shards own are not checked).
 * @throws OutOfRangeError naming `argument[i]`; InvalidTypeError / InvalidArgumentError when an argument is malformed
 */
export function checkOwnedRows(k: Keys, p: plan.ResolvedShardPlan, rows: number, tableName: string, argument: string): void {
  plan.checkOwnedRows(checkKeysArray(k, 'keys'), checkResolvedPlan(p), checkInteger(rows, 'rows', { min: 0 }), checkName(tableName, 'tableName'), checkName(argument, 'argument'));
}
/**
 * One-line description of a resolved shard plan, for messages.
 * @throws InvalidTypeError when `p` is not a resolved plan
 */
export function describePlan(p: plan.ResolvedShardPlan): string {
  return plan.describePlan(checkResolvedPlan(p));
}
/**
 * Index of the first key of `k` outside [0, n), or -1 when every key is a row index.
 * @throws InvalidTypeError when `k` is not a keys array; InvalidArgumentError when `n` is not an integer >= 0
 */
export function firstOutOfRange(k: Keys, n: number): number {
  return validation.firstOutOfRange(checkKeysArray(k, 'keys'), checkInteger(n, 'n', { min: 0 }));
}
/**
 * Checks that every key of `k` is a row index in [0, rows) of `tableName`.
 * @throws OutOfRangeError naming `argument[i]`; InvalidTypeError / InvalidArgumentError when an argument is malformed
 */
export function checkRowIndices(k: Keys, rows: number, argument: string, tableName: string): void {
  validation.checkRowIndices(checkKeysArray(k, 'keys'), checkInteger(rows, 'rows', { min: 0 }), checkName(argument, 'argument'), checkName(tableName, 'tableName'));
}

// ---- checkpoint/crc32c.ts, optimizers.ts ----------------------------------------------------

/**
 * CRC-32C (Castagnoli) of `data` as an unsigned 32-bit number, continuing from `seed` (0 to start): `crc32c(b, crc32c(a))` equals the CRC of a followed by b, so files can be checksummed in chunks.
 * @throws InvalidTypeError when `data` is not a Uint8Array; InvalidArgumentError when `seed` is not an integer in [0, 2^32)
 */
export function crc32c(data: Uint8Array, seed = 0): number {
  if (!(data instanceof Uint8Array)) throw invalidParameter('data', 'a Uint8Array', data, InvalidTypeError);
  return crc.crc32c(data, uint32(seed, 'seed'));
}
/**
 * Floats of optimizer slot storage per row for a table of width `dim` (a `'dim'` slot counts dim floats, a `1` slot one).
 * @throws InvalidTypeError when `slots` is not a slot layout; InvalidArgumentError when `dim` is not an integer >= 1
 */
export function slotFloatsPerRow(slots: opt.SlotLayout, dim: number): number {
  return opt.slotFloatsPerRow(checkSlotLayout(slots, 'slots'), checkInteger(dim, 'dim', { min: 1 }));
}
/**
 * Whether two slot layouts have the same slot names and widths (so slots saved with one load into the other).
 * @throws InvalidTypeError when `a` or `b` is not a slot layout
 */
export function sameSlotLayout(a: opt.SlotLayout, b: opt.SlotLayout): boolean {
  return opt.sameSlotLayout(checkSlotLayout(a, 'a'), checkSlotLayout(b, 'b'));
}
/**
 * Evaluates the learning rate of `spec` for `step` (1-based) and flattens it into the resolved optimizer backends receive.
 * @throws InvalidTypeError when `spec` is not an optimizer spec (optimizers.*); InvalidArgumentError when `step` is not an integer >= 1
 */
export function resolveOptimizer(spec: opt.OptimizerSpec, step: number): opt.ResolvedOptimizer {
  if (!opt.isOptimizerSpec(spec)) throw invalidParameter('spec', 'an optimizer spec (optimizers.*)', spec, InvalidTypeError);
  return opt.resolveOptimizer(spec, checkInteger(step, 'step', { min: 1 }));
}
