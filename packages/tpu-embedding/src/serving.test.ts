import { ErrorCodes, SparseTensor, Tensor } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import { FeatureConfig, TableConfig } from './config.js';
import { SGD } from './optimizers.js';
import { cpuEmbeddingLookup, servingEmbeddingLookup } from './serving.js';
import {
  expectClose,
  expectError,
  FAVORITED,
  fixture,
  FRIENDS,
  iota,
  ragged,
  raggedWeights,
  rows,
  sparse,
  sparseWeights,
  testBackends,
  WATCHED,
} from '../test/testUtil.js';

const video = new TableConfig({ vocabularySize: 8, dim: 4, combiner: 'sum', name: 'video', initializer: iota });
const user = new TableConfig({ vocabularySize: 16, dim: 2, combiner: 'mean', name: 'user', initializer: iota });
const userSqrtn = new TableConfig({ vocabularySize: 16, dim: 2, combiner: 'sqrtn', name: 'user2', initializer: iota });
const iotaTensor = (n: number, d: number) => new Tensor(Float32Array.from({ length: n * d }, (_, i) => i), [n, d]);
const tables = new Map([
  [video, iotaTensor(8, 4)],
  [user, iotaTensor(16, 2)],
  [userSqrtn, iotaTensor(16, 2)],
]);

describe('servingEmbeddingLookup', () => {
  it('is also exported as cpuEmbeddingLookup', () => {
    expect(cpuEmbeddingLookup).toBe(servingEmbeddingLookup);
  });

  it('gathers dense ids (ids.shape + [dim])', async () => {
    const fc = { friends: new FeatureConfig({ table: user }), w: new FeatureConfig({ table: video }) };
    const out = await servingEmbeddingLookup({ friends: [3, 0, 1, 2, 3, 0, 1, 2], w: Int32Array.from([1, 7]) }, null, tables, fc);
    expect(rows(out.friends!)).toEqual([[6, 7], [0, 1], [2, 3], [4, 5], [6, 7], [0, 1], [2, 3], [4, 5]]);
    expect(rows(out.w!)).toEqual([[4, 5, 6, 7], [28, 29, 30, 31]]);
    const two = (await servingEmbeddingLookup([new Tensor(new BigInt64Array([1n, 2n, 3n, 4n]), [2, 2])], undefined, tables, [new FeatureConfig({ table: user })])) as Tensor[];
    expect(two[0]!.shape).toEqual([2, 2, 2]);
  });

  it("reproduces the worked example's sum and mean (sparse and ragged)", async () => {
    const fc = { watched: new FeatureConfig({ table: video }), favorited: new FeatureConfig({ table: video }), friends: new FeatureConfig({ table: user }) };
    for (const make of [sparse, ragged]) {
      const out = (await servingEmbeddingLookup({ watched: make(WATCHED), favorited: make(FAVORITED), friends: make(FRIENDS) }, undefined, tables, fc)) as Record<
        string,
        Tensor
      >;
      expect(rows(out.watched!)).toEqual([[0, 1, 2, 3], [4, 6, 8, 10], [4, 6, 8, 10], [4, 5, 6, 7]]);
      expect(rows(out.favorited!)).toEqual([[4, 6, 8, 10], [4, 5, 6, 7], [0, 1, 2, 3], [4, 6, 8, 10]]);
      expect(rows(out.friends!)).toEqual([[6, 7], [2, 3], [6, 7], [2, 3]]);
    }
  });

  it('sparse: safe lookup drops ids < 0 and weights <= 0; empty rows give zeros', async () => {
    const ids = sparse([[3, -1], [0, 1, 2], [-5], [2, 0]]);
    const w = sparseWeights([[1, 5], [0, 1, 2], [1], [-1, 2]]);
    const fc = { mean: new FeatureConfig({ table: user }), sqrtn: new FeatureConfig({ table: userSqrtn }) };
    const out = await servingEmbeddingLookup({ mean: ids, sqrtn: ids }, { mean: w, sqrtn: w }, tables, fc);
    expectClose(out.mean!.data as Float32Array, [6, 7, 10 / 3, 13 / 3, 0, 0, 0, 1], 1e-6);
    // sqrtn over kept (id, w): row1 (1,1),(2,2): ([2,3] + 2*[4,5]) / sqrt(5); row3 (0,2): 2*[0,1]/2
    expectClose(out.sqrtn!.data as Float32Array, [6, 7, 10 / Math.sqrt(5), 13 / Math.sqrt(5), 0, 0, 0, 1], 1e-6);
    // unweighted: only negative ids are dropped
    const u = await servingEmbeddingLookup({ mean: ids, sqrtn: ids }, null, tables, fc);
    expectClose(u.mean!.data as Float32Array, [6, 7, 2, 3, 0, 0, 2, 3], 1e-6);
  });

  it('ragged: the same reduce with div-no-nan (weights summing to 0 give zeros)', async () => {
    const fc = { mean: new FeatureConfig({ table: user }), sqrtn: new FeatureConfig({ table: userSqrtn }), sum: new FeatureConfig({ table: video }) };
    const ids = ragged([[1, 2], [], [3, 4]]);
    const w = raggedWeights([[1, -1], [], [0.5, 1.5]]);
    const out = await servingEmbeddingLookup({ mean: ids, sqrtn: ids, sum: ids }, { mean: w, sqrtn: w, sum: w }, tables, fc);
    // mean row 0: denominator 0 -> zeros; row 2: (0.5*[6,7] + 1.5*[8,9]) / 2
    expectClose(out.mean!.data as Float32Array, [0, 0, 0, 0, 7.5, 8.5], 1e-6);
    const s = Math.sqrt(2);
    expectClose(out.sqrtn!.data as Float32Array, [-2 / s, -2 / s, 0, 0, 15 / Math.sqrt(2.5), 17 / Math.sqrt(2.5)], 1e-6);
    expectClose(out.sum!.data as Float32Array, [-4, -4, -4, -4, 0, 0, 0, 0, 30, 32, 34, 36], 1e-6);
  });

  it('sequence features: [batch, L, dim] for dense, sparse and ragged inputs', async () => {
    const fc = [new FeatureConfig({ table: user, maxSequenceLength: 3 })];
    const expected = [[2, 3], [4, 5], [0, 0], [0, 0], [0, 0], [0, 0], [14, 15], [16, 17], [18, 19]];
    for (const input of [ragged([[1, 2], [], [7, 8, 9, 10]]), sparse([[1, 2], [], [7, 8, 9, 10]])]) {
      const out = (await servingEmbeddingLookup([input], null, tables, fc)) as Tensor[];
      expect(out[0]!.shape).toEqual([3, 3, 2]);
      expect(rows(out[0]!)).toEqual(expected);
    }
    // sparse positions come from the second index; negative ids are dropped (position left zero)
    const sp = new SparseTensor([[0, 2], [1, 0], [1, 1]], new BigInt64Array([5n, -1n, 6n]), [2, 4]);
    const out = (await servingEmbeddingLookup([sp], null, tables, fc)) as Tensor[];
    expect(rows(out[0]!)).toEqual([[0, 0], [0, 0], [10, 11], [0, 0], [12, 13], [0, 0]]);
    const dense = (await servingEmbeddingLookup([[[1, 2, 3, 4], [5, 6, 7, 8]]], null, tables, fc)) as Tensor[];
    expect(rows(dense[0]!)).toEqual([[2, 3], [4, 5], [6, 7], [10, 11], [12, 13], [14, 15]]);
  });

  it("serves exactly what training's dequeue computes, from embeddingTables (any numHosts, every backend)", async () => {
    for (const { backend } of await testBackends()) {
      if (!backend) continue; // the skip reason is printed by testBackends
      for (const numHosts of [1, 3]) {
        const { emb, featureConfig } = fixture({ backend, numHosts, optimizer: new SGD({ learningRate: 0.05 }), userCombiner: 'sqrtn', videoCombiner: 'mean', friendsSequence: 2 });
        const inputs = { watched: ragged(WATCHED), favorited: ragged(FAVORITED), friends: ragged(FRIENDS) };
        const weights = { watched: raggedWeights([[1], [2, 3], [1, 1.7], [0.5]]), favorited: null, friends: null };
        await emb.enqueue(inputs, { weights });
        const acts = await emb.dequeue();
        await emb.applyGradients(acts);
        await emb.enqueue(inputs, { weights, training: false });
        const after = await emb.dequeue();
        const served = await servingEmbeddingLookup(inputs, weights, emb.embeddingTables, featureConfig);
        for (const k of ['watched', 'favorited', 'friends'] as const) {
          expect(served[k].shape).toEqual(after[k].shape);
          // bit for bit: serving and dequeue pool with core's same ops
          expect(Array.from(served[k].data), `${backend.name} numHosts ${numHosts} ${k}`).toEqual(Array.from(after[k].data));
        }
        emb.dispose();
      }
    }
  });

  it('rejects missing or misshapen tables and out-of-range ids', async () => {
    const fc = { f: new FeatureConfig({ table: user }) };
    await expectError(() => servingEmbeddingLookup({ f: [1] }, null, new Map(), fc), ErrorCodes.INVALID_ARGUMENT, 'tables');
    await expectError(() => servingEmbeddingLookup({ f: [1] }, null, new Map([[user, iotaTensor(15, 2)]]), fc), ErrorCodes.SHAPE_MISMATCH, 'tables');
    await expectError(() => servingEmbeddingLookup({ f: [1] }, null, {} as never, fc), ErrorCodes.INVALID_TYPE, 'tables');
    await expectError(() => servingEmbeddingLookup({ f: [16] }, null, tables, fc), ErrorCodes.OUT_OF_RANGE, 'inputs.f');
    await expectError(() => servingEmbeddingLookup({ f: sparse([[16]]) }, null, tables, fc), ErrorCodes.OUT_OF_RANGE, 'inputs.f');
    await expectError(() => servingEmbeddingLookup({ f: ragged([[-1]]) }, null, tables, fc), ErrorCodes.OUT_OF_RANGE, 'inputs.f');
    await expectError(() => servingEmbeddingLookup({ f: [1] }, { f: raggedWeights([[1]]) }, tables, fc), ErrorCodes.INVALID_ARGUMENT, 'weights.f');
    await expectError(() => servingEmbeddingLookup({ g: [1] } as never, null, tables, fc), ErrorCodes.INVALID_ARGUMENT, 'inputs');
  });
});
