// The v1 layers on 1, 2 and 4 devices: shapes and values against a plain gather /
// pooling computed here; trainable through the tape; bad inputs refused.
import { SparseTensor, Tensor } from '@embedstack/core';
import * as sok from '@embedstack/sok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, initDevices, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});
afterAll(() => sok.shutdown());

const DIM = 3;
/** Row of key k in these tests: [k, 2k, -k] / 8 (exact in float32; lookups sum in float64 from +0, so -0 reads as +0). */
const rowOf = (k: number | bigint) => [Number(k) / 8, (2 * Number(k)) / 8, -Number(k) / 8].map((x) => x + 0);

async function fill(v: sok.SokVariable, keys: (number | bigint)[]) {
  await sok.assign(v, keys as never, Float32Array.from(keys.flatMap((k) => rowOf(k))));
}

describe.each([1, 2, 4])('v1 layers on %i devices', (n) => {
  it('All2AllDenseEmbedding (row indices): [batch, slotNum, nnz] -> [batch, slotNum, nnz, dim] as a plain gather', async () => {
    await initDevices(n);
    const layer = new sok.All2AllDenseEmbedding({ maxVocabularySizePerGpu: 5, embeddingVecSize: DIM, slotNum: 2, nnzPerSlot: 3, useHashtable: false });
    const rows = 5 * n;
    await fill(layer.variable, Array.from({ length: rows }, (_, i) => i));
    const ids = Array.from({ length: 2 * 2 * 3 }, (_, i) => (i * 7) % rows);
    const out = await layer.call(new Tensor(Int32Array.from(ids), [2, 2, 3]));
    expect(out.shape).toEqual([2, 2, 3, DIM]);
    expect(Array.from(out.data)).toEqual(ids.flatMap((k) => rowOf(k)));
    const flat = await layer.call(ids);
    expect(flat.shape).toEqual([2, 2, 3, DIM]);
    await expectError(layer.call([rows, 0, 0, 0, 0, 0]), 'OUT_OF_RANGE', 'ids[0]', `[0, ${rows})`);
    await expectError(layer.call([1, 2, 3, 4]), 'SHAPE_MISMATCH', 'batch * slotNum * nnzPerSlot', 'received 4');
    await expectError(layer.call(new Tensor(Int32Array.from([1, 2, 3, 4, 5, 6]), [1, 3, 2])), 'SHAPE_MISMATCH', '[batch, 2, 3]', '[1, 3, 2]');
  });

  it('All2AllDenseEmbedding (hashtable, dynamicInput): int64 keys -> [n, dim], trained by the tape', async () => {
    await initDevices(n);
    const layer = new sok.All2AllDenseEmbedding({ maxVocabularySizePerGpu: 16, embeddingVecSize: DIM, slotNum: 1, nnzPerSlot: 1, dynamicInput: true, embeddingInitializer: 'zeros' });
    const keys = [5n, -3n, 2n ** 45n, 5n];
    await fill(layer.variable, [5n, -3n, 2n ** 45n]);
    const tape = new sok.GradientTape();
    const out = await layer.call(BigInt64Array.from(keys), { tape });
    expect(out.shape).toEqual([4, DIM]);
    expect(Array.from(out.data)).toEqual(keys.flatMap((k) => rowOf(k)));
    const opt = new sok.OptimizerWrapper(new sok.optimizers.SGD({ learningRate: 1 }));
    await opt.applyGradients(tape.gradient([new Tensor(new Float32Array(4 * DIM).fill(0.5), [4, DIM])]));
    // Key 5 appears twice: its gradient sums to 1.
    const after = await layer.call(BigInt64Array.from([5n, -3n]));
    expect(Array.from(after.data)).toEqual([...rowOf(5n).map((x) => x - 1), ...rowOf(-3n).map((x) => x - 0.5)]);
  });

  it('DistributedEmbedding: SparseTensor [batch*slotNum, maxNnz] -> [batch, slotNum, dim], pooled per slot', async () => {
    await initDevices(n);
    for (const combiner of ['sum', 'mean'] as const) {
      const layer = new sok.DistributedEmbedding({ combiner, maxVocabularySizePerGpu: 10, embeddingVecSize: DIM, slotNum: 2, maxNnz: 3, useHashtable: n % 2 === 0 });
      const slotIds = [[1, 4], [7], [], [2, 2, 9]]; // batch 2 x slot 2
      await fill(layer.variable, [1, 2, 4, 7, 9]);
      const sp = SparseTensor.fromNestedArray(slotIds);
      const tape = new sok.GradientTape();
      const out = await layer.call(sp, { tape });
      expect(out.shape).toEqual([2, 2, DIM]);
      const expected = slotIds.flatMap((ids) => {
        const sum = [0, 0, 0];
        for (const k of ids) rowOf(k).forEach((x, c) => (sum[c] = sum[c]! + x));
        return sum.map((x) => (combiner === 'mean' && ids.length > 0 ? Math.fround(x / ids.length) : x));
      });
      expect(Array.from(out.data)).toEqual(expected);
      const grads = tape.gradient([new Tensor(new Float32Array(12).fill(1), [2, 2, DIM])]);
      expect(grads[0]![1]).toBe(layer.variable);
      // d(output)/d(row) per entry: 1 for sum, 1/len for mean.
      expect(Array.from(grads[0]![0].indices as ArrayLike<number | bigint>, Number)).toEqual([1, 4, 7, 2, 2, 9]);
      const scale = [[1, 4], [7], [2, 2, 9]].flatMap((ids) => ids.map(() => (combiner === 'mean' ? Math.fround(1 / ids.length) : 1)));
      expect(Array.from(grads[0]![0].values.data)).toEqual(scale.flatMap((x) => [x, x, x]));
      await expectError(() => tape.gradient([new Tensor(new Float32Array(12), [2, 2, DIM])]), 'FAILED_PRECONDITION', 'already used');
      await expectError(layer.call(SparseTensor.fromNestedArray([[1], [2], [3]])), 'SHAPE_MISMATCH', 'sp.denseShape', '[batch * 2, <= 3]');
    }
  });
});

// fix33b #3: SOK v1 gives each device a table of maxVocabularySizePerGpu rows; the hashtable never grows past it.
describe.each([1, 2])('v1 layers with useHashtable: maxVocabularySizePerGpu bounds each device (%i devices)', (n) => {
  const sizes = (v: sok.SokVariable) => v.shards.map((s) => s.table.size());
  const a2a = (cap: number) => new sok.All2AllDenseEmbedding({ maxVocabularySizePerGpu: cap, embeddingVecSize: 2, slotNum: 1, nnzPerSlot: 1, dynamicInput: true, embeddingInitializer: 'ones' });

  it('100 distinct keys with a cap of 8 per device: OUT_OF_RANGE naming the device, nothing inserted', async () => {
    await initDevices(n);
    const layer = a2a(8);
    const keys = BigInt64Array.from({ length: 100 }, (_, i) => BigInt(i));
    const e = await expectError(layer.call(keys), 'OUT_OF_RANGE', 'maxVocabularySizePerGpu = 8', 'device 0', `would insert ${100 / n} new keys`);
    expect(e.message).toContain('training: false');
    expect(await layer.variable.size()).toBe(0);
    // Inference reads without inserting, whatever the budget.
    const out = await layer.call(keys, { training: false });
    expect(Array.from(out.data)).toEqual(Array(200).fill(1));
    expect(await layer.variable.size()).toBe(0);
  });

  it('fills each device exactly to its cap; then resident keys still train and a new key on a full device is refused', async () => {
    await initDevices(n);
    const layer = a2a(4);
    // keys 0..4n-1: 4 per device (key mod n), in batches of 3 with repeats
    const all = Array.from({ length: 4 * n }, (_, i) => BigInt(i));
    for (let at = 0; at < all.length; at += 3) await layer.call(BigInt64Array.from([...all.slice(at, at + 3), all[at]!]));
    expect(sizes(layer.variable)).toEqual(Array(n).fill(4));
    // resident keys only (the exact count: 0 new keys) pass, with a tape, and train
    const tape = new sok.GradientTape();
    await layer.call(BigInt64Array.from(all), { tape });
    const opt = new sok.OptimizerWrapper(new sok.optimizers.SGD({ learningRate: 1 }));
    await opt.applyGradients(tape.gradient([new Float32Array(all.length * 2).fill(1)]));
    expect(Array.from((await layer.call(BigInt64Array.of(0n))).data)).toEqual([0, 0]);
    await expectError(layer.call(BigInt64Array.of(1n, BigInt(4 * n))), 'OUT_OF_RANGE', 'device 0', 'holds 4 of its maxVocabularySizePerGpu = 4 rows', 'would insert 1 new keys');
    expect(sizes(layer.variable)).toEqual(Array(n).fill(4));
  });

  it('concurrent training calls never overshoot: 6 calls of 4 new keys each on a budget of 16 keys admit exactly 16', async () => {
    await initDevices(n);
    const layer = a2a(16 / n);
    const calls = Array.from({ length: 6 }, (_, c) => layer.call(BigInt64Array.from({ length: 4 }, (_, i) => BigInt(c * 4 + i))));
    const results = await Promise.allSettled(calls);
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    expect(ok).toBe(4);
    expect(await layer.variable.size()).toBe(16);
    for (const r of results) if (r.status === 'rejected') expect((r.reason as { code?: string }).code).toBe('OUT_OF_RANGE');
    for (const s of sizes(layer.variable)) expect(s).toBeLessThanOrEqual(16 / n);
  });

  it('a call counting its new keys exactly holds the others back: in flight 3, refused 3, then 1 fits (int32 keys)', async () => {
    await initDevices(n);
    const layer = new sok.All2AllDenseEmbedding({ maxVocabularySizePerGpu: 4, embeddingVecSize: 1, slotNum: 1, nnzPerSlot: 1, dynamicInput: true, keyDtype: 'int32' });
    // every key on device 0 (multiples of n)
    const keys = (ks: number[]) => Int32Array.from(ks, (k) => k * n);
    const results = await Promise.allSettled([layer.call(keys([1, 2, 3])), layer.call(keys([4, 5, 6])), layer.call(keys([7]))]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(((results[1] as PromiseRejectedResult).reason as { code: string }).code).toBe('OUT_OF_RANGE');
    const [k] = await sok.exportVariable(layer.variable);
    expect(Array.from(k as Int32Array).sort((a, b) => a - b)).toEqual([1, 2, 3, 7].map((x) => x * n));
  });

  it('nested-array ids are INVALID_TYPE naming ids[0] (they were a SHAPE_MISMATCH counting the outer array)', async () => {
    await initDevices(n);
    const layer = new sok.All2AllDenseEmbedding({ maxVocabularySizePerGpu: 4, embeddingVecSize: 1, slotNum: 2, nnzPerSlot: 1 });
    await expectError(layer.call([[1n, 2n]] as never), 'INVALID_TYPE', 'ids[0]', 'array of length 2');
    expect(await layer.variable.size()).toBe(0);
    expect((await layer.call([1n, 2n])).shape).toEqual([1, 2, 1, 1]);
  });

  it('DistributedEmbedding: the same bound', async () => {
    await initDevices(n);
    const layer = new sok.DistributedEmbedding({ combiner: 'sum', maxVocabularySizePerGpu: 2, embeddingVecSize: 2, slotNum: 1, maxNnz: 3, embeddingInitializer: 'ones' });
    const sp = (ids: number[][]) => new SparseTensor(ids.flatMap((r, i) => r.map((_, j) => [i, j])), BigInt64Array.from(ids.flat(), BigInt), [ids.length, 3]);
    await expectError(layer.call(sp([[0, 1, 2], [3, 4, 5]])), 'OUT_OF_RANGE', 'DistributedEmbedding', 'maxVocabularySizePerGpu = 2');
    expect(await layer.variable.size()).toBe(0);
    const keys = Array.from({ length: 2 * n }, (_, i) => i);
    const out = await layer.call(sp([keys.slice(0, 1), keys.slice(1)]));
    expect(Array.from(out.data)).toEqual([1, 1, 2 * n - 1, 2 * n - 1]);
    expect(await layer.variable.size()).toBe(2 * n);
  });
});
