import { createTable, type EmbeddingTable, type ShardPlan, type StorageDtype } from '@embedstack/core';
import { cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

/**
 * The bag kernels sum each output row in column blocks of 64, 32, ..., 1 held in
 * registers, and prefetch rows a distance ahead that depends on the row size. The
 * conformance suite runs dims 1-6 only; these tests run the dims that take every block
 * width and tail (1 to 200), on bags long enough to be split over the thread pool
 * (>= 16K entries) and with rows of every kind (empty, zero and negative weights), and
 * check every output bit against float64 sums written here: the entries of a row in bag
 * order, acc + w * e, then divided by sum w (mean) or sqrt(sum w^2) (sqrtn), a zero
 * divisor giving zeros, rounded to float32 once.
 */
const DIMS = [1, 3, 7, 8, 15, 16, 31, 33, 63, 64, 65, 100, 128, 130, 200];
const ROWS = 400;
const NROWS = 1500;

interface TestBag {
  splits: Int32Array;
  keys: BigInt64Array;
  weights: Float32Array;
}

function bagFor(seed: number, nrows: number, vocab: number): TestBag {
  let s = seed;
  const rnd = (): number => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
  const splits = new Int32Array(nrows + 1);
  const keys: bigint[] = [];
  const weights: number[] = [];
  for (let r = 0; r < nrows; r++) {
    const n = r % 13 === 0 ? 0 : 1 + Math.floor(rnd() * 30);
    const zero = r % 17 === 5; // a mean / sqrtn row whose weights are all 0: zeros
    for (let j = 0; j < n; j++) {
      keys.push(BigInt(Math.floor(rnd() * vocab)));
      weights.push(zero ? 0 : j % 3 === 0 ? 1 : Math.fround(rnd() * 2 - 0.5));
    }
    splits[r + 1] = keys.length;
  }
  return { splits, keys: BigInt64Array.from(keys), weights: Float32Array.from(weights) };
}

/** Distinct, non-trivial float32 values per (row, column). */
function rowValues(rows: number, dim: number): Float32Array {
  return Float32Array.from({ length: rows * dim }, (_, i) => Math.fround(Math.sin(i * 0.7 + 1) * 3.3 + (i % 7) * 1e-3));
}

/** The expected pooled rows (see the file comment), from the stored row values `stored`. */
function expected(bag: TestBag, stored: Float32Array, dim: number, combiner: 'sum' | 'mean' | 'sqrtn', weighted: boolean): Float32Array {
  const nrows = bag.splits.length - 1;
  const out = new Float32Array(nrows * dim);
  const acc = new Float64Array(dim);
  for (let r = 0; r < nrows; r++) {
    acc.fill(0);
    let wsum = 0;
    let wsq = 0;
    for (let j = bag.splits[r]!; j < bag.splits[r + 1]!; j++) {
      const w = weighted ? bag.weights[j]! : 1;
      wsum += w;
      wsq += w * w;
      const k = Number(bag.keys[j]!);
      for (let c = 0; c < dim; c++) acc[c] = acc[c]! + w * stored[k * dim + c]!;
    }
    const div = combiner === 'mean' ? wsum : combiner === 'sqrtn' ? Math.sqrt(wsq) : 1;
    for (let c = 0; c < dim; c++) out[r * dim + c] = div === 0 ? 0 : acc[c]! / div;
  }
  return out;
}

/** Indices of the first elements that differ (bit for bit), at most 5. */
function differing(got: Float32Array, want: Float32Array): number[] {
  const a = new Uint32Array(got.buffer, got.byteOffset, got.length);
  const b = new Uint32Array(want.buffer, want.byteOffset, want.length);
  const bad: number[] = [];
  for (let i = 0; i < a.length && bad.length < 5; i++) if (a[i] !== b[i]) bad.push(i);
  return bad;
}

function fill(t: EmbeddingTable, dim: number): Float32Array {
  const keys = t.keyDtype === 'int32' ? Int32Array.from({ length: ROWS }, (_, i) => i) : BigInt64Array.from({ length: ROWS }, (_, i) => BigInt(i));
  t.upsertSync(keys, rowValues(ROWS, dim));
  // the stored values (rounded when the storage is narrow), read back as float32
  return t.findSync(keys).values;
}

describe('cpu backend: bag kernels on wide rows', () => {
  for (const dtype of ['float32', 'bfloat16', 'float16'] as StorageDtype[]) {
    for (const kind of ['static', 'dynamic'] as const) {
      it(`${kind} ${dtype}: sum, mean and sqrtn, weighted and not, equal float64 sums bit for bit at dims ${DIMS.join(', ')}`, () => {
        for (const dim of DIMS) {
          const t =
            kind === 'static'
              ? createTable({ kind: 'static', dim, vocabularySize: ROWS, keyDtype: 'int32', storageDtype: dtype }, { backend: cpuBackend })
              : createTable({ dim, storageDtype: dtype }, { backend: cpuBackend });
          const stored = fill(t, dim);
          const bag = bagFor(dim * 31 + 7, NROWS, ROWS);
          expect(bag.keys.length).toBeGreaterThan(16384); // split over the pool
          const keys = kind === 'static' ? Int32Array.from(bag.keys, Number) : bag.keys;
          for (const combiner of ['sum', 'mean', 'sqrtn'] as const) {
            for (const weighted of [false, true]) {
              const got = t.lookupCombinedSync({ rowSplits: bag.splits, keys, weights: weighted ? bag.weights : null } as never, { combiner });
              const bad = differing(got, expected(bag, stored, dim, combiner, weighted));
              expect(bad, `dim ${dim} ${combiner}${weighted ? ' weighted' : ''}: first differing elements`).toEqual([]);
            }
          }
          t.dispose();
        }
      });
    }
  }

  it('partial sums of 2 shards (mod plan) equal (0 + s0 / d) + s1 / d in float64 at every dim', () => {
    for (const dim of DIMS) {
      const bag = bagFor(dim * 17 + 3, NROWS, ROWS);
      expect(bag.keys.length).toBeGreaterThan(16384);
      const all = rowValues(ROWS, dim);
      const nrows = NROWS;
      const got = new Float64Array(nrows * dim);
      const want = new Float64Array(nrows * dim);
      for (let shard = 0; shard < 2; shard++) {
        const plan: ShardPlan = { placement: 'mod', numShards: 2, shard };
        const t = createTable({ dim }, { backend: cpuBackend });
        const owned = Array.from({ length: ROWS }, (_, i) => i).filter((k) => k % 2 === shard);
        t.upsertSync(BigInt64Array.from(owned, BigInt), Float32Array.from(owned.flatMap((k) => Array.from(all.subarray(k * dim, (k + 1) * dim)))));
        t.lookupCombinedPartialSync({ rowSplits: bag.splits, keys: bag.keys, weights: bag.weights }, { combiner: 'mean', plan, out: got });
        t.dispose();
        for (let r = 0; r < nrows; r++) {
          let wsum = 0;
          for (let j = bag.splits[r]!; j < bag.splits[r + 1]!; j++) wsum += bag.weights[j]!;
          if (wsum === 0) continue;
          for (let c = 0; c < dim; c++) {
            let acc = 0;
            for (let j = bag.splits[r]!; j < bag.splits[r + 1]!; j++) {
              const k = Number(bag.keys[j]!);
              if (k % 2 === shard) acc = acc + bag.weights[j]! * all[k * dim + c]!;
            }
            want[r * dim + c] = want[r * dim + c]! + acc / wsum;
          }
        }
      }
      let bad = -1;
      for (let i = 0; i < got.length && bad < 0; i++) if (!Object.is(got[i], want[i])) bad = i;
      expect(bad, `dim ${dim}: first differing partial (got ${got[bad]}, want ${want[bad]})`).toBe(-1);
    }
  });
});
