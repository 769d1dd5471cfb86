import type { Keys } from '@embedstack/core';
import { bucketOfLow32 } from './naming.js';

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * The Redis view of one call's keys: each key's field bytes (8 raw little-endian
 * bytes for int64, 4 for int32), its bucket, and the distinct keys of the call.
 * Memory: one Buffer of n * width bytes; fields are views into it.
 */
export class KeyPlan {
  readonly keys: Keys;
  readonly n: number;
  readonly width: 4 | 8;
  readonly bytes: Buffer;
  /** [n] bucket of each key. */
  readonly bucket: Uint32Array;
  #distinct: Distinct | null = null;

  constructor(keys: Keys, storageSlice: number) {
    this.keys = keys;
    this.n = keys.length;
    this.width = keys instanceof BigInt64Array ? 8 : 4;
    const w = this.width;
    if (LITTLE_ENDIAN) {
      this.bytes = Buffer.from(keys.buffer, keys.byteOffset, keys.byteLength);
    } else {
      this.bytes = Buffer.alloc(this.n * w);
      for (let i = 0; i < this.n; i++) {
        if (w === 8) this.bytes.writeBigInt64LE((keys as BigInt64Array)[i]!, i * 8);
        else this.bytes.writeInt32LE((keys as Int32Array)[i]!, i * 4);
      }
    }
    this.bucket = new Uint32Array(this.n);
    for (let i = 0; i < this.n; i++) this.bucket[i] = bucketOfLow32(this.bytes.readUInt32LE(i * w), storageSlice);
  }

  field(i: number): Buffer {
    return this.bytes.subarray(i * this.width, (i + 1) * this.width);
  }

  key(i: number): bigint | number {
    return this.keys[i]!;
  }

  /** Distinct keys in order of first appearance, with occurrence counts. */
  get distinct(): Distinct {
    if (this.#distinct) return this.#distinct;
    const ids = new Map<bigint | number, number>();
    const of = new Int32Array(this.n);
    const first: number[] = [];
    const last: number[] = [];
    const count: number[] = [];
    for (let i = 0; i < this.n; i++) {
      const k = this.keys[i]!;
      let id = ids.get(k);
      if (id === undefined) {
        id = first.length;
        ids.set(k, id);
        first.push(i);
        last.push(i);
        count.push(0);
      }
      of[i] = id;
      last[id] = i;
      count[id]!++;
    }
    this.#distinct = { of, first, last, count };
    return this.#distinct;
  }

  /** Groups key indices by bucket (buckets ascending, indices in the given order). */
  byBucket(indices: Iterable<number>): Map<number, number[]> {
    const groups = new Map<number, number[]>();
    for (const i of indices) {
      const b = this.bucket[i]!;
      let list = groups.get(b);
      if (!list) groups.set(b, (list = []));
      list.push(i);
    }
    return new Map([...groups].sort((a, b) => a[0] - b[0]));
  }

  /** Every index 0..n-1. */
  all(): number[] {
    return Array.from({ length: this.n }, (_, i) => i);
  }
}

export interface Distinct {
  /** [n] distinct id of each key index. */
  of: Int32Array;
  /** Per distinct id: index of its first occurrence. */
  first: number[];
  /** Per distinct id: index of its last occurrence. */
  last: number[];
  /** Per distinct id: occurrences in the call. */
  count: number[];
}

/** Splits a list into pieces of at most `size`. */
export function chunks<T>(list: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size));
  return out;
}
