import { RaggedTensor, SparseTensor, Tensor } from '@embedstack/core';
import * as sok from '@embedstack/sok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initDevices, rowsOf, useTestBackend } from '../test/setup.js';

let backend = '';
beforeAll(async () => {
  backend = await useTestBackend();
});
afterAll(() => sok.shutdown());

describe.each([1, 2, 4])('the worked example (SOK docs) on %i devices', (n) => {
  it(`[13,13,13] x3, size 3, then [12,12,12] after one SGD step (${n} devices)`, async () => {
    await initDevices(n);
    const v = new sok.DynamicVariable({ dimension: 3, initializer: '13' });
    const tape = new sok.GradientTape();
    const emb = await sok.embeddingLookup(v, [0n, 1n, 2n ** 40n], { tape });
    expect(emb.shape).toEqual([3, 3]);
    expect(rowsOf(emb.data, 3)).toEqual([[13, 13, 13], [13, 13, 13], [13, 13, 13]]);
    expect(await v.size()).toBe(3);
    expect(v.shape).toEqual([3, 3]);
    const grads = tape.gradient([new Tensor(new Float32Array(9).fill(1), [3, 3])]);
    expect(grads).toHaveLength(1);
    expect(grads[0]![1]).toBe(v);
    expect(Array.from(grads[0]![0].indices as BigInt64Array)).toEqual([0n, 1n, 2n ** 40n]);
    expect(rowsOf(grads[0]![0].values.data, 3)).toEqual([[1, 1, 1], [1, 1, 1], [1, 1, 1]]);
    const opt = new sok.OptimizerWrapper(new sok.optimizers.SGD({ learningRate: 1.0 }));
    await opt.applyGradients(grads);
    const after = await sok.embeddingLookup(v, [0n, 1n, 2n ** 40n]);
    expect(rowsOf(after.data, 3)).toEqual([[12, 12, 12], [12, 12, 12], [12, 12, 12]]);
    expect(await v.size()).toBe(3);
  });
});

describe('the v2 API by example', () => {
  it('its first lines, literally as the spec writes them: the lookup inserts, size 3, shape [3, 3]', async () => {
    sok.shutdown();
    // --- sok.md, "v2 API by example", as written ---
    sok.init({ numDevices: 2 });
    const v = new sok.DynamicVariable({ dimension: 3, initializer: '13', varType: 'hbm' });
    const emb = await sok.embeddingLookup(v, [0n, 1n, 2n ** 40n]);
    const size = await v.size();
    const shape = v.shape;
    // --- end of the spec's lines ---
    expect(emb.shape).toEqual([3, 3]);
    expect(rowsOf(emb.data, 3)).toEqual([[13, 13, 13], [13, 13, 13], [13, 13, 13]]);
    expect(size).toBe(3);
    expect(shape).toEqual([3, 3]);
    // The rows were inserted with their initial value, on their owners (key mod 2: 0 and 2^40 on device 0, 1 on device 1).
    expect(v.shards.map((s) => s.table.size())).toEqual([2, 1]);
  });

  it('training: false is inference: the missing keys read their initial value and nothing is inserted', async () => {
    await initDevices(2);
    const v = new sok.DynamicVariable({ dimension: 3, initializer: '13' });
    const emb = await sok.embeddingLookup(v, [0n, 1n, 2n ** 40n], { training: false });
    expect(rowsOf(emb.data, 3)).toEqual([[13, 13, 13], [13, 13, 13], [13, 13, 13]]);
    const [pooled] = await sok.lookupSparse([v], [RaggedTensor.fromNestedArray([[5n, 6n], [7n]])], { combiners: 'sum', training: false });
    expect(rowsOf(pooled!.data, 3)).toEqual([[26, 26, 26], [13, 13, 13]]);
    expect(await v.size()).toBe(0);
    // Without the option lookupSparse inserts too (SOK's lookup_sparse reads with insertion).
    await sok.lookupSparse([v], [RaggedTensor.fromNestedArray([[5n, 6n], [7n]])], { combiners: 'sum' });
    expect(await v.size()).toBe(3);
  });

  it('runs as the spec writes it, with values checked by hand', async () => {
    sok.shutdown();
    await sok.init({ numDevices: 2 });
    const v = new sok.DynamicVariable({ dimension: 3, initializer: '13', varType: 'hbm' });
    const emb = await sok.embeddingLookup(v, [0n, 1n, 2n ** 40n]);
    expect(rowsOf(emb.data, 3)).toEqual([[13, 13, 13], [13, 13, 13], [13, 13, 13]]);
    // A lookup inserts the missing keys (SOK's sparse_read does), tape or not.
    expect(await v.size()).toBe(3);
    expect(v.shape).toEqual([3, 3]);
    const w = new sok.Variable({ shape: [100, 8], initializer: 'uniform', mode: 'distributed' });
    // Known rows for w: row r = [r, r, ..., r] / 100.
    const wRows = new Float32Array(800);
    for (let r = 0; r < 100; r++) wRows.fill(r / 100, r * 8, r * 8 + 8);
    await sok.assign(w, Array.from({ length: 100 }, (_, i) => i), wRows);
    const spIdsA = new SparseTensor([[0, 0], [0, 1], [1, 0]], BigInt64Array.from([0n, 1n, 2n ** 40n]), [2, 2]);
    const raggedB = RaggedTensor.fromNestedArray([[3, 5], [], [99]]);
    const tape = new sok.GradientTape();
    const [a, b] = await sok.lookupSparse([v, w], [spIdsA, raggedB], { combiners: ['sum', 'mean'], tape });
    expect(a!.shape).toEqual([2, 3]);
    expect(rowsOf(a!.data, 3)).toEqual([[26, 26, 26], [13, 13, 13]]);
    expect(b!.shape).toEqual([3, 8]);
    expect(rowsOf(b!.data, 8)[0]).toEqual(Array(8).fill(Math.fround((Math.fround(0.03) + Math.fround(0.05)) / 2)));
    expect(rowsOf(b!.data, 8)[1]).toEqual(Array(8).fill(0));
    expect(rowsOf(b!.data, 8)[2]).toEqual(Array(8).fill(Math.fround(0.99)));
    const dLossDa = new Tensor(new Float32Array(6).fill(1), [2, 3]);
    const dLossDb = new Tensor(new Float32Array(24).fill(2), [3, 8]);
    const grads = tape.gradient([dLossDa, dLossDb]);
    expect(grads.map(([, x]) => x)).toEqual([v, w]);
    // mean over 2 ids: each gets 2 / 2 = 1; the single id of row 2 gets 2.
    expect(Array.from(grads[1]![0].indices as Int32Array)).toEqual([3, 5, 99]);
    expect(rowsOf(grads[1]![0].values.data, 8)).toEqual([Array(8).fill(1), Array(8).fill(1), Array(8).fill(2)]);
    const opt = new sok.OptimizerWrapper(new sok.optimizers.SGD({ learningRate: 1.0 }));
    await opt.applyGradients(grads);
    const [indices, values] = await sok.exportVariable(v);
    expect(indices).toBeInstanceOf(BigInt64Array);
    const byKey = new Map(Array.from(indices as BigInt64Array, (k, i) => [k, Array.from(values.data.subarray(i * 3, i * 3 + 3))]));
    expect(byKey.get(0n)).toEqual([12, 12, 12]);
    expect(byKey.get(1n)).toEqual([12, 12, 12]);
    expect(byKey.get(2n ** 40n)).toEqual([12, 12, 12]);
    const wAfter = await sok.embeddingLookup(w, [3, 5, 99, 4]);
    expect(rowsOf(wAfter.data, 8)).toEqual([Array(8).fill(Math.fround(Math.fround(0.03) - 1)), Array(8).fill(Math.fround(Math.fround(0.05) - 1)), Array(8).fill(Math.fround(Math.fround(0.99) - 2)), Array(8).fill(Math.fround(0.04))]);
    await sok.assign(v, indices, values);
    expect(await v.size()).toBe(3);
    expect(backend).toBeTruthy();
  });
});
