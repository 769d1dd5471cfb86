// The spec's convention: optional arguments may be omitted, undefined or null. Every table method
// whose options are optional takes null as "no options", with the results of omitting them (core
// refused null with INVALID_TYPE "Expected options to be an options object" before stop 53).
import { describe, expect, it } from 'vitest';
import { createTable, type EmbeddingTable, initializers, optimizers, RaggedTensor, referenceBackend } from '@embedstack/core';

const dim = 2;
/** A reference table holding keys 1, 2, 3 with rows [k, -k]; missing keys' initial row is [0.5, 0.5]. */
async function filled(): Promise<EmbeddingTable> {
  const t = createTable({ dim, name: 'nulls', initializer: initializers.constant(0.5), optimizer: optimizers.sgd({ learningRate: 0.5 }) }, { backend: referenceBackend });
  await t.upsert([1n, 2n, 3n], [1, -1, 2, -2, 3, -3]);
  return t;
}
const bag = () => RaggedTensor.fromNestedArray([[1, 2], [3]]);
const rows = (t: EmbeddingTable, keys: bigint[]) => Array.from(t.findSync(keys).values);

describe('null for optional options: the same as omitting them', () => {
  it('find / findSync / findOrInsert / findOrInsertSync', async () => {
    const t = await filled();
    for (const r of [await t.find([2n, 9n], null), t.findSync([2n, 9n], null)]) {
      expect([Array.from(r.values), Array.from(r.exists)]).toEqual([[2, -2, 0.5, 0.5], [1, 0]]);
    }
    expect(Array.from((await t.findOrInsert([8n], null)).values)).toEqual([0.5, 0.5]);
    expect(Array.from(t.findOrInsertSync([7n], null).exists)).toEqual([0]);
    expect(t.size()).toBe(5);
  });

  it('lookupCombined(Sync) and lookupCombinedBackward(Sync): mean by default', async () => {
    const t = await filled();
    const want = [1.5, -1.5, 3, -3]; // mean of rows 1 and 2; row 3
    expect(Array.from(await t.lookupCombined(bag(), null))).toEqual(want);
    expect(Array.from(t.lookupCombinedSync(bag(), null))).toEqual(want);
    const g = new Float32Array([2, 4, 6, 8]);
    const back = [1, 2, 1, 2, 6, 8]; // mean: each of the first row's two ids gets half its gradient
    expect(Array.from(await t.lookupCombinedBackward(bag(), g, null))).toEqual(back);
    expect(Array.from(t.lookupCombinedBackwardSync(bag(), g, null))).toEqual(back);
  });

  it('applyGradients(Sync), applyCombinedGradients(Sync), exportBatches, createOptimizer', async () => {
    const t = await filled();
    const sgd = optimizers.sgd(null as never); // the defaults (learning rate 0.01)
    expect(sgd.learningRate).toBe(0.01);
    const step = optimizers.sgd({ learningRate: 0.5 });
    await t.applyGradients([1n], [2, 2], step, 1, null);
    t.applyGradientsSync([2n], [2, 2], step, 2, null);
    expect(rows(t, [1n, 2n])).toEqual([0, -2, 1, -3]); // w - 0.5 * g
    await t.applyCombinedGradients(RaggedTensor.fromNestedArray([[3]]), [2, 2], step, 3, null);
    t.applyCombinedGradientsSync(RaggedTensor.fromNestedArray([[3]]), [2, 2], step, 4, null);
    expect(rows(t, [3n])).toEqual([1, -5]);
    const keys: bigint[] = [];
    for await (const b of t.exportBatches(null)) keys.push(...(b.keys as BigInt64Array));
    expect(keys.sort()).toEqual([1n, 2n, 3n]);
  });

  it('what is not an options object is still INVALID_TYPE', async () => {
    const t = await filled();
    expect(() => t.findSync([1n], 5 as never)).toThrow(expect.objectContaining({ code: 'INVALID_TYPE', argument: 'options' }));
    expect(() => t.lookupCombinedSync(bag(), 'mean' as never)).toThrow(expect.objectContaining({ code: 'INVALID_TYPE' }));
    expect(t.size()).toBe(3);
  });
});
