import { floorMod, InvalidTypeError, invalidParameter, type Keys } from '@embedstack/core';
import { takeKeys } from './keys.js';

/**
 * Places keys on shards: returns, for each key, its shard index in [0, shardNum).
 * Receives the stored keys (the int64 hash for 'string' variables).
 */
export type Partitioner = (keys: Keys, shardNum: number) => ArrayLike<number>;

/**
 * TF's default: the non-negative floor modulo `key % shardNum`, exact on 64-bit keys.
 * @throws InvalidTypeError when keys is not a BigInt64Array or Int32Array; InvalidArgumentError when shardNum is not an integer >= 1
 */
export function defaultPartitionFn(keys: Keys, shardNum: number): Int32Array {
  if (!(keys instanceof BigInt64Array) && !(keys instanceof Int32Array)) {
    throw invalidParameter('keys', 'a BigInt64Array or Int32Array (the stored keys)', keys, InvalidTypeError);
  }
  if (!Number.isSafeInteger(shardNum) || shardNum < 1) throw invalidParameter('shardNum', 'an integer >= 1', shardNum);
  const out = new Int32Array(keys.length);
  if (shardNum === 1) return out;
  if (keys instanceof Int32Array) {
    for (let i = 0; i < keys.length; i++) out[i] = floorMod(keys[i]!, shardNum);
    return out;
  }
  const m = BigInt(shardNum);
  for (let i = 0; i < keys.length; i++) {
    const r = keys[i]! % m;
    out[i] = Number(r < 0n ? r + m : r);
  }
  return out;
}

/** Keys split by shard, with their positions in the input. */
export interface Partition {
  keys: Keys[];
  positions: Int32Array[];
}

/**
 * Splits `keys` over `shardNum` shards with `fn`, keeping input order within a shard.
 * @throws InvalidArgumentError when the partitioner returns a bad shard index
 */
export function partitionKeys(keys: Keys, shardNum: number, fn: Partitioner): Partition {
  if (shardNum === 1) {
    const all = new Int32Array(keys.length);
    for (let i = 0; i < keys.length; i++) all[i] = i;
    return { keys: [keys], positions: [all] };
  }
  const ids = fn(keys, shardNum);
  if (!ids || typeof ids.length !== 'number' || ids.length !== keys.length) {
    throw invalidParameter('the result of partitioner(keys, shardNum)', `${keys.length} shard indices`, ids, InvalidTypeError);
  }
  const counts = new Int32Array(shardNum);
  for (let i = 0; i < ids.length; i++) {
    const s = ids[i]!;
    if (!Number.isInteger(s) || s < 0 || s >= shardNum) {
      throw invalidParameter(`partitioner(keys, shardNum)[${i}]`, `a shard index in [0, ${shardNum})`, s);
    }
    counts[s]!++;
  }
  const positions = Array.from(counts, (c) => new Int32Array(c));
  const cursor = new Int32Array(shardNum);
  for (let i = 0; i < ids.length; i++) {
    const s = ids[i]!;
    positions[s]![cursor[s]!++] = i;
  }
  return { keys: positions.map((p) => takeKeys(keys, p)), positions };
}

/** Rows src[positions[i]] ([n, dim] row-major). */
export function gatherRows(src: Float32Array, positions: ArrayLike<number>, dim: number): Float32Array {
  const out = new Float32Array(positions.length * dim);
  for (let i = 0; i < positions.length; i++) {
    const p = positions[i]!;
    out.set(src.subarray(p * dim, p * dim + dim), i * dim);
  }
  return out;
}

/** dst[positions[i]] = rows[i] ([n, dim] row-major). */
export function scatterRows(dst: Float32Array, positions: ArrayLike<number>, rows: Float32Array, dim: number): void {
  for (let i = 0; i < positions.length; i++) dst.set(rows.subarray(i * dim, i * dim + dim), positions[i]! * dim);
}

export function gatherFlags(src: Uint8Array, positions: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(positions.length);
  for (let i = 0; i < positions.length; i++) out[i] = src[positions[i]!]!;
  return out;
}

/** Clips each row of `rows` ([n, dim]) to L2 norm `maxNorm` in place (no-op for 0). */
export function clipRows(rows: Float32Array, dim: number, maxNorm: number): Float32Array {
  if (!(maxNorm > 0)) return rows;
  for (let r = 0; r * dim < rows.length; r++) {
    let sq = 0;
    for (let c = 0; c < dim; c++) sq += rows[r * dim + c]! ** 2;
    const norm = Math.sqrt(sq);
    if (norm > maxNorm) {
      const scale = maxNorm / norm;
      for (let c = 0; c < dim; c++) rows[r * dim + c]! *= scale;
    }
  }
  return rows;
}
