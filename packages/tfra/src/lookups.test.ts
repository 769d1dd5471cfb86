import { beforeAll, describe, expect, it } from 'vitest';
import * as de from './index.js';
import { expectError, rowsOf, uniqueName, useTestBackend } from '../test/setup.js';
import { currentRecord, holdRecord } from './shadow.js';

beforeAll(async () => {
  await useTestBackend();
});

/** Variable of dim 2 whose row for key k is [k, 10k] (keys 0..9). */
async function table(options: de.VariableOptions = {}): Promise<de.AnyVariable> {
  const v = new de.Variable({ dim: 2, name: uniqueName('lk'), devices: ['a', 'b', 'c'], ...options });
  const keys = Array.from({ length: 10 }, (_, k) => BigInt(k));
  await v.upsert(keys, Float32Array.from(keys.flatMap((k) => [Number(k), 10 * Number(k)])));
  return v;
}
const row = (k: number) => [k, 10 * k];

function close(got: Float32Array, want: number[][]): void {
  const rows = rowsOf(got, 2);
  expect(rows.length).toBe(want.length);
  rows.forEach((r, i) => r.forEach((x, c) => expect(x, `[${i}][${c}]`).toBeCloseTo(want[i]![c]!, 4)));
}

describe('embeddingLookup / embeddingLookupUnique', () => {
  it('return ids.shape + [dim] in id order, also through the unique path', async () => {
    const v = await table();
    const ids = new de.Tensor(new BigInt64Array([3n, 1n, 3n, 12n, 0n, 1n]), [3, 2]);
    const a = await de.embeddingLookup(v, ids, { name: 'a' });
    const b = await de.embeddingLookupUnique(v, ids, { name: 'b' });
    expect(a.shape).toEqual([3, 2, 2]);
    expect(b.shape).toEqual([3, 2, 2]);
    const want = [row(3), row(1), row(3), [0, 0], row(0), row(1)];
    close(a.data, want);
    expect(Array.from(b.data)).toEqual(Array.from(a.data));
    // both record every id (the gradient of the output has one row per id); the shape is the output's
    const tb = v.getTrainableByName('b') as de.ShadowVariable;
    expect(Array.from(tb.ids as BigInt64Array)).toEqual([3n, 1n, 3n, 12n, 0n, 1n]);
    expect(tb.shape).toEqual([3, 2]);
    expect(await v.size()).toBe(10); // lookups never insert
  });

  it('refuse ids of another key dtype, non-Variables and bad options; nothing is registered', async () => {
    const v = await table();
    await expectError(de.embeddingLookup(v, new Int32Array([1, 2]), { name: 'x' }), 'INVALID_TYPE', 'ids', 'int32');
    await expectError(de.embeddingLookup(v, new de.Tensor(new Float32Array([1]), [1]) as never, { name: 'x' }), 'INVALID_TYPE', 'ids');
    await expectError(de.embeddingLookupUnique(v, new Int32Array([1]), { name: 'x' }), 'INVALID_TYPE', 'ids');
    await expectError(de.embeddingLookup({} as de.AnyVariable, [1n]), 'INVALID_TYPE', 'params');
    await expectError(de.embeddingLookup(v, [1n], { name: 'x', maxNorm: 0 }), 'INVALID_ARGUMENT', 'maxNorm');
    await expectError(de.embeddingLookup(v, [1n], { name: 'x', maxnorm: 1 } as never), 'INVALID_ARGUMENT', 'options.maxnorm');
    expect(v.getTrainableByName('x')).toBeNull();
    const v32 = new de.Variable({ keyDtype: 'int32', dim: 1, name: uniqueName() });
    await expectError(de.embeddingLookup(v32, new BigInt64Array([1n])), 'INVALID_TYPE', 'ids', 'int64');
    // plain JS numbers carry no dtype and are accepted for either
    expect((await de.embeddingLookup(v32, [1, 2])).shape).toEqual([2, 1]);
  });
});

describe('embeddingLookupSparse', () => {
  // TF's documented example: [0,0]: id 1 w 2; [0,1]: id 3 w 0.5; [1,0]: id 0 w 1; [2,3]: id 1 w 3; plus an empty row 3.
  const ids = () => new de.SparseTensor([[0, 0], [0, 1], [1, 0], [2, 3]], new BigInt64Array([1n, 3n, 0n, 1n]), [4, 4]);
  const weights = () => new de.SparseTensor([[0, 0], [0, 1], [1, 0], [2, 3]], new Float32Array([2, 0.5, 1, 3]), [4, 4]);

  it('combines weighted rows per first index with mean (default), sum and sqrtn; empty rows are zeros', async () => {
    const v = await table();
    const mean = await de.embeddingLookupSparse(v, ids(), weights());
    expect(mean.shape).toEqual([4, 2]);
    const r0 = [0, 1].map((c) => (row(1)[c]! * 2 + row(3)[c]! * 0.5) / 2.5);
    close(mean.data, [r0, row(0), row(1), [0, 0]]);
    const sum = await de.embeddingLookupSparse(v, ids(), weights(), { combiner: 'sum' });
    close(sum.data, [[0, 1].map((c) => row(1)[c]! * 2 + row(3)[c]! * 0.5), row(0), row(1).map((x) => 3 * x), [0, 0]]);
    const sqrtn = await de.embeddingLookupSparse(v, ids(), weights(), { combiner: 'sqrtn' });
    close(sqrtn.data, [
      [0, 1].map((c) => (row(1)[c]! * 2 + row(3)[c]! * 0.5) / Math.sqrt(4.25)),
      row(0),
      row(1).map((x) => (3 * x) / 3),
      [0, 0],
    ]);
    const unweighted = await de.embeddingLookupSparse(v, ids(), null);
    close(unweighted.data, [[0, 1].map((c) => (row(1)[c]! + row(3)[c]!) / 2), row(0), row(1), [0, 0]]);
  });

  it('clips each row to maxNorm before combining and registers the trainable on the pooled output', async () => {
    const v = await table();
    const out = await de.embeddingLookupSparse(v, ids(), null, { combiner: 'sum', maxNorm: 1, name: 'sp' });
    const clip = (k: number) => row(k).map((x) => x / Math.max(1, Math.hypot(...row(k))));
    close(out.data, [[0, 1].map((c) => clip(1)[c]! + clip(3)[c]!), clip(0), clip(1), [0, 0]]);
    const t = v.getTrainableByName('sp/embedding_lookup') as de.ShadowVariable;
    // every entry in row order; the gradient is the output's ([4, 2])
    expect(Array.from(t.ids as BigInt64Array)).toEqual([1n, 3n, 0n, 1n]);
    expect(t.shape).toEqual([4]);
  });

  for (const devices of [['a'], ['a', 'b', 'c']]) {
    it(`trains the ids as they were at the call when the caller overwrites its SparseTensor's ids before the step (${devices.length} shard(s))`, async () => {
      const v = await table({ devices });
      const values = new BigInt64Array([1n, 3n, 0n, 1n]);
      const sp = new de.SparseTensor([[0, 0], [0, 1], [1, 0], [2, 3]], values, [4, 4]);
      await de.embeddingLookupSparse(v, sp, null, { combiner: 'sum', name: 'ow' });
      values.fill(7n); // the caller reuses its buffer for the next batch
      const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 }));
      // output rows' gradients: row 0 [1, 1], row 1 [2, 2], row 2 [4, 4], row 3 [8, 8] (empty: no id)
      await opt.applyGradients([[Float32Array.from([1, 1, 2, 2, 4, 4, 8, 8]), v.getTrainableByName('ow/embedding_lookup') as de.ShadowVariable]]);
      // sum: each id gets its row's gradient; key 1 is in rows 0 and 2 (1 + 4), key 3 in row 0, key 0 in row 1; key 7 untouched
      const got = await v.lookup([0n, 1n, 3n, 7n]);
      close(got.data, [[0 - 2, 0 - 2], [1 - 5, 10 - 5], [3 - 1, 30 - 1], [7, 70]]);
    });
  }

  for (const devices of [['a'], ['a', 'b', 'c']]) {
    for (const rows of ['in order', 'out of order']) {
      it(`trains with the weights as they were at the call when the caller overwrites them before the step (rows ${rows}, ${devices.length} shard(s))`, async () => {
        const v = await table({ devices });
        // entries (row, id, weight): (0, 1, 2), (0, 3, 3), (1, 1, 5), listed in row order or not
        const entries: [number, bigint, number][] = rows === 'in order' ? [[0, 1n, 2], [0, 3n, 3], [1, 1n, 5]] : [[1, 1n, 5], [0, 1n, 2], [0, 3n, 3]];
        const indices = entries.map(([r], i) => [r, i]);
        const ids = new de.SparseTensor(indices, BigInt64Array.from(entries.map((e) => e[1])), [2, 3]);
        const weights = Float32Array.from(entries.map((e) => e[2]));
        await de.embeddingLookupSparse(v, ids, new de.SparseTensor(indices, weights, [2, 3]), { combiner: 'sum', name: 'ww' });
        weights.fill(100); // the caller reuses its buffer for the next batch
        const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 }));
        // output rows' gradients: row 0 [1, 1], row 1 [2, 2]; sum: an id's gradient is its weight times its row's
        await opt.applyGradients([[Float32Array.from([1, 1, 2, 2]), v.getTrainableByName('ww/embedding_lookup') as de.ShadowVariable]]);
        // key 1: 2 * 1 + 5 * 2 = 12; key 3: 3 * 1 = 3
        close((await v.lookup([1n, 3n])).data, [[1 - 12, 10 - 12], [3 - 3, 30 - 3]]);
      });
    }
  }

  it('refuses a bad combiner (ValueError), non-sparse ids or weights (TypeError), mismatched weights', async () => {
    const v = await table();
    await expectError(de.embeddingLookupSparse(v, ids(), null, { combiner: 'max' as de.SparseLookupOptions['combiner'] }), 'INVALID_ARGUMENT', 'combiner', '"max"');
    await expectError(de.embeddingLookupSparse(v, de.RaggedTensor.fromNestedArray([[1], [2]]) as never, null), 'INVALID_TYPE', 'spIds', 'SparseTensor');
    await expectError(de.embeddingLookupSparse(v, ids(), new Float32Array(4) as never), 'INVALID_TYPE', 'spWeights');
    const intWeights = new de.SparseTensor([[0, 0], [0, 1], [1, 0], [2, 3]], new BigInt64Array([1n, 1n, 1n, 1n]), [4, 4]);
    await expectError(de.embeddingLookupSparse(v, ids(), intWeights), 'INVALID_TYPE', 'spWeights', 'float32');
    const other = new de.SparseTensor([[0, 0], [0, 2], [1, 0], [2, 3]], new Float32Array(4), [4, 4]);
    await expectError(de.embeddingLookupSparse(v, ids(), other), 'SHAPE_MISMATCH', 'spWeights', "but received entry 1 at [0, 2] where the ids' is at [0, 1]");
    const ids32 = new de.SparseTensor([[0, 0]], new Int32Array([1]), [1, 1]);
    await expectError(de.embeddingLookupSparse(v, ids32, null), 'INVALID_TYPE', 'spIds', 'int32');
    expect(v.getTrainableByName('embedding_lookup_sparse/embedding_lookup')).toBeNull();
  });
});

describe('safeEmbeddingLookupSparse', () => {
  it('flattens rank-3 ids to [d0, d1, dim], prunes weights <= 0, fills empty rows with defaultId or zeros', async () => {
    const v = await table();
    // dense shape [2, 2, 3]: rows (0,0): ids 1 (w 1), 2 (w -1); (0,1): id 3 (w 0); (1,0): nothing; (1,1): id 4 (w 2), 5 (w 2)
    const sp = new de.SparseTensor([[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 1, 0], [1, 1, 2]], new BigInt64Array([1n, 2n, 3n, 4n, 5n]), [2, 2, 3]);
    const w = new de.SparseTensor([[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 1, 0], [1, 1, 2]], new Float32Array([1, -1, 0, 2, 2]), [2, 2, 3]);
    const zeros = await de.safeEmbeddingLookupSparse(v, sp, w, { combiner: 'mean' });
    expect(zeros.shape).toEqual([2, 2, 2]);
    close(zeros.data, [row(1), [0, 0], [0, 0], [0, 1].map((c) => (row(4)[c]! + row(5)[c]!) / 2)]);
    const withDefault = await de.safeEmbeddingLookupSparse(v, sp, w, { combiner: 'mean', defaultId: 9 });
    close(withDefault.data, [row(1), row(9), row(9), [0, 1].map((c) => (row(4)[c]! + row(5)[c]!) / 2)]);
    // 'sum' keeps non-positive weights
    const sum = await de.safeEmbeddingLookupSparse(v, sp, w, { combiner: 'sum' });
    close(sum.data, [[0, 1].map((c) => row(1)[c]! - row(2)[c]!), [0, 0], [0, 0], [0, 1].map((c) => 2 * row(4)[c]! + 2 * row(5)[c]!)]);
    // without weights nothing is pruned
    const plain = await de.safeEmbeddingLookupSparse(v, sp, null, { combiner: 'sum', defaultId: 0 });
    close(plain.data, [[0, 1].map((c) => row(1)[c]! + row(2)[c]!), row(3), row(0), [0, 1].map((c) => row(4)[c]! + row(5)[c]!)]);
  });

  it('refuses a missing variable, bad combiners, non-sparse ids and a defaultId of the wrong type', async () => {
    const v = await table();
    const sp = new de.SparseTensor([[0, 0]], new BigInt64Array([1n]), [1, 1]);
    await expectError(de.safeEmbeddingLookupSparse(null as unknown as de.AnyVariable, sp), 'INVALID_ARGUMENT', 'embeddingWeights');
    await expectError(de.safeEmbeddingLookupSparse(v, sp, null, { combiner: 'tile' as 'sum' }), 'INVALID_ARGUMENT', 'combiner');
    await expectError(de.safeEmbeddingLookupSparse(v, [1n] as never, null), 'INVALID_TYPE', 'sparseIds');
    await expectError(de.safeEmbeddingLookupSparse(v, sp, null, { defaultId: 1.5 }), 'INVALID_TYPE', 'defaultId');
  });
});

describe('string keys', () => {
  it('look up, train and export by their stable hash', async () => {
    const v = new de.Variable({ keyDtype: 'string', dim: 1, name: uniqueName(), devices: ['a', 'b'] });
    await v.upsert(['a', 'b'], [1, 2]);
    const e = await de.embeddingLookup(v, ['b', 'z', 'a'], { name: 's' });
    expect(Array.from(e.data)).toEqual([2, 0, 1]);
    const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 }));
    await opt.applyGradients([[[1, 1, 1], v.getTrainableByName('s') as de.ShadowVariable]]);
    expect(Array.from((await v.lookup(['a', 'b', 'z'])).data)).toEqual([0, 1, -1]);
    await expectError(de.embeddingLookup(v, new Int32Array([1]), { name: 's' }), 'INVALID_TYPE', 'ids');
  });
});

describe("lookups into the caller's buffer (out)", () => {
  for (const devices of [['a'], ['a', 'b', 'c']]) {
    it(`write the rows to out and return a Tensor over it, ${devices.length} shard(s); without out a fresh array`, async () => {
      const v = await table({ devices });
      const ids = new BigInt64Array([4n, -3n, 9n, 0n]); // -3 is missing: zeros
      const want = [row(4), [0, 0], row(9), row(0)];
      const out = new Float32Array(8).fill(7);
      const a = await v.lookup(ids, { out });
      expect(a.data).toBe(out);
      close(out, want);
      const outSync = new Float32Array(8).fill(7);
      expect(v.lookupSync(ids, { out: outSync }).data).toBe(outSync);
      close(outSync, want);
      const withExists = await v.lookup(ids, { out: new Float32Array(8), returnExists: true });
      expect(withExists.exists).toEqual([true, false, true, true]);
      const e = new Float32Array(8).fill(7);
      expect((await de.embeddingLookup(v, ids, { name: 'o', out: e })).data).toBe(e);
      close(e, want);
      // bags [4, 9] and [0, -3, 0], sum
      const bags = de.SparseTensor.fromNestedArray([[4, 9], [0, -3, 0]]);
      const pooled = new Float32Array(4).fill(7);
      expect((await de.embeddingLookupSparse(v, bags, null, { combiner: 'sum', out: pooled })).data).toBe(pooled);
      close(pooled, [[13, 130], [0, 0]]);
      const fresh = await v.lookup(ids);
      close(fresh.data, want);
      expect(fresh.data).not.toBe(out);
      v.dispose();
    });
  }
});

describe("the recorded copies of the caller's arrays (reused between lookups)", () => {
  const sgd = () => de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 }));
  /** One bag per row of `ids` (each entry at column j of its row). */
  const bagsOf = (values: BigInt64Array, rows: number[][]) => {
    const indices = rows.flatMap((r, b) => r.map((_, j) => [b, j]));
    return new de.SparseTensor(indices, values, [rows.length, Math.max(1, ...rows.map((r) => r.length))]);
  };

  for (const devices of [['a'], ['a', 'b', 'c']]) {
    it(`a loop that refills one ids buffer trains each step on that batch's ids, with batches of changing size (${devices.length} shard(s))`, async () => {
      const v = await table({ devices });
      const opt = sgd();
      const buffer = new BigInt64Array(4);
      // batches: [[1, 2], [3]] then [[4], [5, 6, 7]] then [[8]] (1 entry: a view of the reused copy), sum;
      // each output row gets gradient [1, 1]: every id's row drops by 1 per occurrence
      const batches = [[[1n, 2n], [3n]], [[4n], [5n, 6n, 7n]], [[8n]]];
      for (const rows of batches) {
        const flat = rows.flat();
        buffer.fill(0n);
        buffer.set(flat);
        const values = buffer.subarray(0, flat.length);
        await de.embeddingLookupSparse(v, bagsOf(values, rows.map((r) => r.map(Number))), null, { combiner: 'sum', name: 'loop' });
        buffer.fill(9n); // the caller refills its buffer before the step
        const t = v.getTrainableByName('loop/embedding_lookup') as de.ShadowVariable;
        await opt.applyGradients([[new Float32Array(rows.length * 2).fill(1), t]]);
      }
      // keys 1..8 trained once each; 9 (the refill value) and 0 (the padding) never
      const got = await v.lookup([0n, 1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n]);
      close(got.data, [row(0), ...[1, 2, 3, 4, 5, 6, 7, 8].map((k) => [k - 1, 10 * k - 1]), row(9)]);
    });
  }

  it('ids read through the trainable stay as they were after later lookups', async () => {
    const v = await table();
    const values = new BigInt64Array([1n, 2n, 3n]);
    const sp = bagsOf(values, [[1, 2, 3]]);
    await de.embeddingLookupSparse(v, sp, null, { name: 'keep' });
    const t = v.getTrainableByName('keep/embedding_lookup') as de.ShadowVariable;
    const first = t.ids!;
    for (const k of [4n, 5n, 6n]) {
      values.fill(k);
      await de.embeddingLookupSparse(v, sp, null, { name: 'keep' });
    }
    expect(Array.from(first as BigInt64Array)).toEqual([1n, 2n, 3n]);
    expect(Array.from(t.ids as BigInt64Array)).toEqual([6n, 6n, 6n]);
  });

  it('the dense lookup trains the ids as they were at the call when the caller overwrites its array', async () => {
    const v = await table();
    const ids = new BigInt64Array([2n, 5n, 2n]);
    await de.embeddingLookup(v, ids, { name: 'dense' });
    ids.fill(7n);
    const t = v.getTrainableByName('dense') as de.ShadowVariable;
    const opt = sgd();
    // per-id gradients [1, 2], [3, 4], [5, 6]: key 2 gets [6, 8], key 5 [3, 4]
    await opt.applyGradients([[Float32Array.from([1, 2, 3, 4, 5, 6]), t]]);
    close((await v.lookup([2n, 5n, 7n])).data, [[2 - 6, 20 - 8], [5 - 3, 50 - 4], row(7)]);
    // a Tensor's data is the caller's too
    const data = new BigInt64Array([4n]);
    await de.embeddingLookup(v, new de.Tensor(data, [1]), { name: 'dense' });
    data[0] = 8n;
    await opt.applyGradients([[Float32Array.from([1, 1]), t]]);
    close((await v.lookup([4n, 8n])).data, [[3, 39], row(8)]);
  });

  it('a held record keeps its arrays while later lookups record; once released they are reused', async () => {
    const v = await table();
    const values = new BigInt64Array([1n, 2n]);
    const sp = bagsOf(values, [[1, 2]]);
    const look = async (k: bigint) => {
      values.fill(k);
      await de.embeddingLookupSparse(v, sp, null, { name: 'held' });
    };
    await look(1n);
    const t = v.getTrainableByName('held/embedding_lookup') as de.ShadowVariable;
    await look(2n);
    const lease = holdRecord(t)!;
    expect(Array.from(lease.record.ids as BigInt64Array)).toEqual([2n, 2n]);
    for (const k of [3n, 4n, 5n, 6n]) await look(k);
    expect(Array.from(lease.record.ids as BigInt64Array)).toEqual([2n, 2n]);
    const heldBuffer = lease.record.ids.buffer;
    lease.release();
    lease.release(); // idempotent
    // nothing held: two buffers alternate (the released one is dropped, a spare of its size being there)
    const buffers: ArrayBufferLike[] = [];
    for (const k of [7n, 8n, 9n, 10n]) {
      await look(k);
      buffers.push(currentRecord(t)!.ids.buffer);
    }
    expect(new Set(buffers).size).toBe(2);
    expect(buffers[0]).toBe(buffers[2]);
    expect(buffers[1]).toBe(buffers[3]);
    expect(buffers).not.toContain(heldBuffer);
    expect(Array.from(currentRecord(t)!.ids as BigInt64Array)).toEqual([10n, 10n]);
  });
});

describe('a lookup of the same trainable recording while its training step runs (a pipelined next batch)', () => {
  const sgd = (bpV2: boolean) => de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 }), { bpV2 });
  const bag = (ids: bigint[]) => new de.SparseTensor(ids.map((_, j) => [0, j]), BigInt64Array.from(ids), [1, ids.length]);

  for (const bpV2 of [false, true]) {
    for (const kind of ['dense', 'sparse'] as const) {
      it(`the step trains the lookup it was asked for, the next lookup stays recorded and trains after (${kind}, bpV2 ${bpV2})`, async () => {
        const v = await table();
        const opt = sgd(bpV2);
        const name = `pipe_${kind}`;
        const look = (ids: bigint[]) =>
          kind === 'dense' ? de.embeddingLookup(v, BigInt64Array.from(ids), { name }) : de.embeddingLookupSparse(v, bag(ids), null, { combiner: 'sum', name });
        const t = () => v.getTrainableByName(kind === 'dense' ? name : `${name}/embedding_lookup`) as de.ShadowVariable;
        await look([1n, 2n]);
        // gradient 1 per output element: dense, one row per id; sparse, one summed row (each id gets it)
        const step = opt.applyGradients([[new Float32Array(kind === 'dense' ? 4 : 2).fill(1), t()]]);
        const next = look([3n, 4n, 5n]); // records while the step runs
        await Promise.all([step, next]);
        close((await v.lookup([1n, 2n, 3n, 4n, 5n])).data, [[0, 9], [1, 19], row(3), row(4), row(5)]);
        expect(Array.from(t().ids as BigInt64Array)).toEqual([3n, 4n, 5n]);
        // the next batch's step: gradient 2 per element
        await opt.applyGradients([[new Float32Array(kind === 'dense' ? 6 : 2).fill(2), t()]]);
        close((await v.lookup([1n, 2n, 3n, 4n, 5n])).data, [[0, 9], [1, 19], [1, 28], [2, 38], [3, 48]]);
      });
    }
  }

  for (const bpV2 of [false, true]) {
    for (const kind of ['dense', 'sparse'] as const) {
      it(`a record made right after applyGradients is called does not change what the step trains (${kind}, bpV2 ${bpV2})`, async () => {
        const v = await table();
        const opt = sgd(bpV2);
        const name = `now_${kind}`;
        if (kind === 'dense') await de.embeddingLookup(v, [1n, 2n], { name });
        else await de.embeddingLookupSparse(v, bag([1n, 2n]), null, { combiner: 'sum', name });
        const t = v.getTrainableByName(kind === 'dense' ? name : `${name}/embedding_lookup`) as de.ShadowVariable;
        const step = opt.applyGradients([[new Float32Array(kind === 'dense' ? 4 : 2).fill(1), t]]);
        // what the next batch's lookup of ids [3, 4, 5] records, before the step has run a line
        const ids = new BigInt64Array([3n, 4n, 5n]);
        t.record(kind === 'dense' ? { ids, shape: [3], bag: null, maxNorm: 0 } : { ids, shape: [1], bag: { rowSplits: Int32Array.from([0, 3]), weights: null, combiner: 'sum' }, maxNorm: 0 });
        await step;
        close((await v.lookup([1n, 2n, 3n, 4n, 5n])).data, [[0, 9], [1, 19], row(3), row(4), row(5)]);
        await opt.applyGradients([[new Float32Array(kind === 'dense' ? 6 : 2).fill(2), t]]);
        close((await v.lookup([1n, 2n, 3n, 4n, 5n])).data, [[0, 9], [1, 19], [1, 28], [2, 38], [3, 48]]);
      });
    }
  }

  it("a record replaced while its step waits keeps its rows as read through another trainable's write before the step", async () => {
    const v = await table({ devices: ['a'] });
    const opt = sgd(false);
    // trainables a and b both look id 1 up ([1, 10]); b's step comes second in the call
    await de.embeddingLookup(v, [1n], { name: 'a' });
    await de.embeddingLookup(v, [1n], { name: 'b' });
    const a = v.getTrainableByName('a') as de.ShadowVariable;
    const b = v.getTrainableByName('b') as de.ShadowVariable;
    const step = opt.applyGradients([
      [Float32Array.from([1, 1]), a],
      [Float32Array.from([2, 2]), b],
    ]);
    // b records its next lookup (id 7) before a's step writes id 1
    b.record({ ids: new BigInt64Array([7n]), shape: [1], bag: null, maxNorm: 0 });
    await step;
    // TFRA: b's step sets f(v0) of b's lookup, v0 = the row b read ([1, 10]): [1 - 2, 10 - 2], over a's update; id 7 untouched
    close((await v.lookup([1n, 7n])).data, [[-1, 8], row(7)]);
    // b's new record kept its own rows (copied before the writes): its step trains id 7 from [7, 70]
    await opt.applyGradients([[Float32Array.from([1, 1]), b]]);
    close((await v.lookup([1n, 7n])).data, [[-1, 8], [6, 69]]);
  });
});

describe("the record's copy of a caller's array that carries its own `constructor` property", () => {
  it('is made by the array\'s engine type, and the step trains its ids', async () => {
    const v = await table();
    const values = new BigInt64Array([3n, 4n]);
    // a property of the caller's object: the copy must not build a Float64Array from it (a BigInt TypeError)
    Object.defineProperty(values, 'constructor', { value: Float64Array });
    const sp = new de.SparseTensor([[0, 0], [0, 1]], values, [1, 2]);
    await de.embeddingLookupSparse(v, sp, null, { combiner: 'sum', name: 'ctor' });
    values.fill(9n);
    const t = v.getTrainableByName('ctor/embedding_lookup') as de.ShadowVariable;
    await de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 })).applyGradients([[Float32Array.from([1, 2]), t]]);
    close((await v.lookup([3n, 4n, 9n])).data, [[2, 28], [3, 38], row(9)]);
  });
});
