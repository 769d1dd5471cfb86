import { beforeAll, describe, expect, it } from 'vitest';
import * as de from './index.js';
import { expectError, rowsOf, uniqueName, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});

const ids2x3 = () => new de.Tensor(new BigInt64Array([23n, 12n, 0n, 9n, 13n, 10n]), [2, 3]);

describe('de.layers', () => {
  it('FieldWiseEmbedding: the worked example (slot k % 3, every value [1, 1])', async () => {
    for (const slotMapFn of [
      (ids: de.Tensor['data']) => Array.from(ids as BigInt64Array, (k) => k % 3n),
      (k: bigint | number) => Number(BigInt(k) % 3n),
    ]) {
      const layer = new de.layers.FieldWiseEmbedding({ embeddingSize: 2, nslots: 3, slotMapFn: slotMapFn as de.SlotMapFn, initializer: 0, name: uniqueName('fw') });
      const keys = Array.from({ length: 100 }, (_, i) => BigInt(i));
      await layer.params.upsert(keys, new Float32Array(200).fill(1));
      const out = await layer.call(ids2x3());
      expect(out.shape).toEqual([2, 3, 2]);
      expect(out.toNestedArray()).toEqual([
        [[2, 2], [0, 0], [1, 1]],
        [[1, 1], [2, 2], [0, 0]],
      ]);
    }
  });

  it('take ids as a rectangular nested array too (the worked example written literally)', async () => {
    const layer = new de.layers.FieldWiseEmbedding({ embeddingSize: 2, nslots: 3, slotMapFn: (k: bigint | number) => Number(BigInt(k) % 3n), initializer: [1, 1], name: uniqueName('fw') });
    const out = await layer.call([[23, 12, 0], [9, 13, 10]]);
    expect(out.shape).toEqual([2, 3, 2]);
    expect(out.toNestedArray()).toEqual([
      [[2, 2], [0, 0], [1, 1]],
      [[1, 1], [2, 2], [0, 0]],
    ]);
    const v = new de.Variable({ dim: 1, name: uniqueName() });
    await v.upsert([[1n, 2n], [3n, 4n]], [1, 2, 3, 4]);
    const got = await v.lookup([[4n], [1n]]);
    expect(got.shape).toEqual([2, 1, 1]);
    expect(Array.from(got.data)).toEqual([4, 1]);
    await expectError(v.upsert([[5n, 6n], [7n]], [1, 2, 3]), 'SHAPE_MISMATCH', 'keys[1]', 'length 2');
    await expectError(v.lookup([[1.5]]), 'INVALID_TYPE', 'keys[0]');
    expect(await v.size()).toBe(4);
  });

  it('FieldWiseEmbedding: zeros before any upsert; rank > 2 and slots out of range are refused', async () => {
    const layer = new de.layers.FieldWiseEmbedding({ embeddingSize: 2, nslots: 3, slotMapFn: (k: bigint | number) => Number(BigInt(k) % 3n), initializer: 0, name: uniqueName('fw') });
    expect(Array.from((await layer.call(ids2x3())).data)).toEqual(new Array(12).fill(0));
    await expectError(layer.call(new de.Tensor(new BigInt64Array(8), [2, 2, 2])), 'UNSUPPORTED', 'ids', 'rank');
    const bad = new de.layers.FieldWiseEmbedding({ embeddingSize: 2, nslots: 2, slotMapFn: () => 5, name: uniqueName('fw') });
    await expectError(bad.call(ids2x3()), 'INVALID_ARGUMENT', 'slotMapFn', '[0, 2)');
    expect(() => new de.layers.FieldWiseEmbedding({ embeddingSize: 2, nslots: 2, slotMapFn: 3 as never })).toThrowError(/slotMapFn/);
  });

  it('Embedding: ids.shape + [size], default RandomNormal(0, 0.05) per key, deterministic', async () => {
    const name = uniqueName('emb');
    const layer = new de.layers.Embedding({ embeddingSize: 4, name });
    expect(layer.params.name).toBe(`${name}-parameter`);
    expect(layer.shadow.name).toBe(`${name}-shadow`);
    const ids = new de.Tensor(new BigInt64Array([15n, 2n, 4n, 92n, 22n, 4n]), [3, 2]);
    const out = await layer.call(ids);
    expect(out.shape).toEqual([3, 2, 4]);
    const rows = rowsOf(out.data, 4);
    expect(rows[2]).toEqual(rows[5]); // same key, same row
    expect(rows.flat().every((x) => Math.abs(x) < 0.5)).toBe(true);
    const std = Math.sqrt(rows.flat().reduce((a, x) => a + x * x, 0) / 24);
    expect(std).toBeGreaterThan(0.01);
    expect(std).toBeLessThan(0.15);
    const again = new de.layers.Embedding({ embeddingSize: 4, name, withUnique: false });
    expect(Array.from((await again.call(ids)).data)).toEqual(Array.from(out.data));
  });

  it('SquashedEmbedding reduces the id axes with the combiner', async () => {
    for (const combiner of ['sum', 'mean', 'max', 'min'] as const) {
      const layer = new de.layers.SquashedEmbedding({ embeddingSize: 2, combiner, initializer: 0, name: uniqueName('sq') });
      await layer.params.upsert([1n, 2n, 3n], [1, -1, 2, 5, 4, 0]);
      const batched = await layer.call(new de.Tensor(new BigInt64Array([1n, 2n, 3n, 1n]), [2, 2]));
      expect(batched.shape).toEqual([2, 2]);
      const single = await layer.call([1n, 2n, 3n]);
      expect(single.shape).toEqual([2]);
      const want = {
        sum: [[3, 4], [5, -1], [7, 4]],
        mean: [[1.5, 2], [2.5, -0.5], [7 / 3, 4 / 3]],
        max: [[2, 5], [4, 0], [4, 5]],
        min: [[1, -1], [1, -1], [1, -1]],
      }[combiner];
      const got = [...rowsOf(batched.data, 2), Array.from(single.data)];
      got.forEach((r, i) => r.forEach((x, c) => expect(x, `${combiner} [${i}][${c}]`).toBeCloseTo(want[i]![c]!, 5)));
    }
  });

  it('max / min over 3 shards and with maxNorm: the same values as one shard (pooled by core)', async () => {
    for (const devices of [['a'], ['a', 'b', 'c']]) {
      for (const combiner of ['max', 'min'] as const) {
        const layer = new de.layers.SquashedEmbedding({ embeddingSize: 2, combiner, initializer: 0, devices, maxNorm: 5, name: uniqueName('sx') });
        // keys -4, 5, 9 land on shards 2, 2, 0 of 3; row of 9 has norm 10: clipped to [3, -4]
        await layer.params.upsert([-4n, 5n, 9n], [1, -1, 2, 3, 6, -8]);
        const out = await layer.call(new de.Tensor(new BigInt64Array([-4n, 5n, 9n, 5n, 7n, 5n]), [2, 3]));
        // row 0 = {[1, -1], [2, 3], [3, -4]}; row 1 = {[2, 3], [0, 0] (7 is missing: initializer 0), [2, 3]}
        const want = combiner === 'max' ? [3, 3, 2, 3] : [1, -4, 0, 0];
        Array.from(out.data).forEach((x, i) => expect(x, `${devices.length} shard(s) ${combiner} [${i}]`).toBeCloseTo(want[i]!, 5));
        layer.params.dispose();
      }
    }
  });

  it('a layer trains through its shadow with the output gradient: core maps it onto the looked-up rows', async () => {
    const layer = new de.layers.SquashedEmbedding({ embeddingSize: 2, combiner: 'mean', initializer: 0, name: uniqueName('tr') });
    const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 }));
    // batch [[1, 2], [2, 2]]: row 0 = mean(e1, e2), row 1 = e2
    await layer.call(new de.Tensor(new BigInt64Array([1n, 2n, 2n, 2n]), [2, 2]));
    const g = layer.backward([1, 2, 10, 20]);
    expect(Array.from(g)).toEqual([1, 2, 10, 20]); // the output's gradient, validated
    await opt.applyGradients([[g, layer.shadow]]);
    // d e1 = 0.5*[1,2]; d e2 = 0.5*[1,2] + 0.5*[10,20] + 0.5*[10,20] (mean: each id of a row gets g / 2)
    expect(rowsOf((await layer.params.lookup([1n, 2n])).data, 2)).toEqual([[-0.5, -1], [-10.5, -21]]);
    expect(layer.trainableWeights).toEqual([layer.shadow]);
    const max = new de.layers.SquashedEmbedding({ embeddingSize: 2, combiner: 'max', name: uniqueName('mx') });
    await max.call(new de.Tensor(new BigInt64Array([1n, 2n]), [1, 2]));
    expect(() => max.backward([1, 1])).toThrowError(/'sum' and 'mean'/);
    expect(() => layer.backward([1, 2, 3])).toThrowError(/outputGrad/);
  });

  it('refuses bad options', () => {
    expect(() => new de.layers.Embedding({ embeddingSize: 0 })).toThrowError(/embeddingSize/);
    expect(() => new de.layers.Embedding({ embeddingSize: 2, combiner: 'prod' as 'sum' })).toThrowError(/combiner/);
    expect(() => new de.layers.Embedding({ embeddingSize: 2, vocab: 3 } as de.EmbeddingLayerOptions)).toThrowError(/options.vocab/);
  });
});
