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

/**
 * The low-level helpers core exports (for backends, facades and tests) as the
 * public API sees them: each checks its arguments and throws a coded EmbeddingError,
 * then calls the unchecked function core itself uses on validated data (in hot loops).
 */

const uint32 = (v: unknown, argument: string) => checkInteger(v, argument, { min: 0, max: 0xffffffff });
const int32 = (v: unknown, argument: string) => checkInteger(v, argument, { min: -2147483648, max: 0xffffffff });

function checkKeysArray(v: unknown, argument: string): Keys {
  if (!(v instanceof BigInt64Array) && !(v instanceof Int32Array)) throw invalidParameter(argument, 'a BigInt64Array or Int32Array', v, InvalidTypeError);
  return v;
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
    if (typeof p !== 'number' || !Number.isInteger(p) || p < 0 || p >= n) throw invalidParameter(`${argument}[${i}]`, `a position in [0, ${n})`, p);
  }
  return a as ArrayLike<number>;
}

function checkFloat(v: unknown, argument: string): number {
  if (typeof v !== 'number' || Number.isNaN(v)) throw invalidParameter(argument, 'a number', v, InvalidTypeError);
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

export function mix32(x: number): number {
  return random.mix32(int32(x, 'x'));
}
export function fnv1a32(text: string): number {
  if (typeof text !== 'string') throw invalidParameter('text', 'a string', text, InvalidTypeError);
  return random.fnv1a32(text);
}
export function randomWord(seed: number, stream: number, keyLo: number, keyHi: number, column: number, draw: number): number {
  return random.randomWord(uint32(seed, 'seed'), uint32(stream, 'stream'), uint32(keyLo, 'keyLo'), uint32(keyHi, 'keyHi'), uint32(column, 'column'), uint32(draw, 'draw'));
}
export function keyWords(key: bigint | number): [number, number] {
  return random.keyWords(checkKey(key, 'key'));
}
export function uniform01(word: number): number {
  return random.uniform01(uint32(word, 'word'));
}
export function standardNormal(u1: number, u2: number): number {
  return random.standardNormal(checkFloat(u1, 'u1'), checkFloat(u2, 'u2'));
}

// ---- initializers.ts ------------------------------------------------------------------

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

export function shapeSize(s: readonly number[]): number {
  return shape.shapeSize(shape.validateShape(s, 'shape'));
}
export function shapesEqual(a: readonly number[], b: readonly number[]): boolean {
  return shape.shapesEqual(shape.validateShape(a, 'a'), shape.validateShape(b, 'b'));
}
export function formatShape(s: readonly number[]): string {
  return shape.formatShape(shape.validateShape(s, 'shape'));
}
export function assertShape(actual: readonly number[], expected: readonly number[], argument: string): void {
  shape.assertShape(shape.validateShape(actual, 'actual'), shape.validateShape(expected, 'expected'), checkName(argument, 'argument'));
}

// ---- keys.ts --------------------------------------------------------------------

export function keyShape(input: keys.KeyInput): number[] {
  const a = input as { length?: unknown } | null;
  if (!(input instanceof Object) || (typeof a?.length !== 'number' && !('shape' in (input as object)))) {
    throw invalidParameter('keys', 'a keys array or an id Tensor', input, InvalidTypeError);
  }
  return keys.keyShape(input);
}
export function keyAt(k: Keys, i: number): bigint {
  checkKeysArray(k, 'keys');
  return keys.keyAt(k, checkInteger(i, 'i', { min: 0, max: k.length - 1 }));
}
export function floorMod(key: bigint | number, n: number): number {
  return keys.floorMod(checkKey(key, 'key'), checkInteger(n, 'n', { min: 1 }));
}
export function takeKeys(k: Keys, positions: ArrayLike<number>): Keys {
  checkKeysArray(k, 'keys');
  return keys.takeKeys(k, checkPositions(positions, k.length, 'positions'));
}
export function makeKeys(dtype: KeyDtype, n: number, at: (i: number) => bigint | number): Keys {
  checkKeyDtype(dtype);
  checkInteger(n, 'n', { min: 0 });
  const f = checkFunction<(i: number) => unknown>(at, 'at', 'a function (i) => key');
  if (!f) throw invalidParameter('at', 'a function (i) => key', at, InvalidTypeError);
  const values = Array.from({ length: n }, (_, i) => checkKey(f(i), `at(${i})`));
  return keys.normalizeKeys(values as bigint[], dtype, 'at');
}

// ---- bag.ts, shardPlan.ts, validation.ts ------------------------------------------------

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
export function localKeyOf(key: bigint | number, p: plan.ResolvedShardPlan): bigint | number | null {
  return plan.localKeyOf(checkKey(key, 'key'), checkResolvedPlan(p));
}
export function planEntries(k: Keys, p: plan.ResolvedShardPlan): plan.PlanEntries {
  return plan.planEntries(checkKeysArray(k, 'keys'), checkResolvedPlan(p));
}
export function checkOwnedRows(k: Keys, p: plan.ResolvedShardPlan, rows: number, tableName: string, argument: string): void {
  plan.checkOwnedRows(checkKeysArray(k, 'keys'), checkResolvedPlan(p), checkInteger(rows, 'rows', { min: 0 }), checkName(tableName, 'tableName'), checkName(argument, 'argument'));
}
export function describePlan(p: plan.ResolvedShardPlan): string {
  return plan.describePlan(checkResolvedPlan(p));
}
export function firstOutOfRange(k: Keys, n: number): number {
  return validation.firstOutOfRange(checkKeysArray(k, 'keys'), checkInteger(n, 'n', { min: 0 }));
}
export function checkRowIndices(k: Keys, rows: number, argument: string, tableName: string): void {
  validation.checkRowIndices(checkKeysArray(k, 'keys'), checkInteger(rows, 'rows', { min: 0 }), checkName(argument, 'argument'), checkName(tableName, 'tableName'));
}

// ---- checkpoint/crc32c.ts, optimizers.ts ----------------------------------------------------

export function crc32c(data: Uint8Array, seed = 0): number {
  if (!(data instanceof Uint8Array)) throw invalidParameter('data', 'a Uint8Array', data, InvalidTypeError);
  return crc.crc32c(data, uint32(seed, 'seed'));
}
export function slotFloatsPerRow(slots: opt.SlotLayout, dim: number): number {
  return opt.slotFloatsPerRow(checkSlotLayout(slots, 'slots'), checkInteger(dim, 'dim', { min: 1 }));
}
export function sameSlotLayout(a: opt.SlotLayout, b: opt.SlotLayout): boolean {
  return opt.sameSlotLayout(checkSlotLayout(a, 'a'), checkSlotLayout(b, 'b'));
}
export function resolveOptimizer(spec: opt.OptimizerSpec, step: number): opt.ResolvedOptimizer {
  if (!opt.isOptimizerSpec(spec)) throw invalidParameter('spec', 'an optimizer spec (optimizers.*)', spec, InvalidTypeError);
  return opt.resolveOptimizer(spec, checkInteger(step, 'step', { min: 1 }));
}
