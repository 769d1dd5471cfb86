// Fidelity to TensorFlow's TPU embedding API, with expected values computed here by hand.
import { RaggedTensor, SparseTensor, Tensor } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import { iota, testBackends } from '../test/testUtil.js';
import { FeatureConfig, ReplicaStrategy, SGD, TableConfig, TPUEmbedding, servingEmbeddingLookup } from './index.js';

const cases = await testBackends();

/** Row r of an iota table of width `dim`: [r*dim, ..., r*dim + dim - 1]. */
const row = (r: number, dim: number) => Array.from({ length: dim }, (_, c) => r * dim + c);

describe.each(cases)('fidelity on the $name backend', ({ backend, reason }) => {
  if (!backend) {
    it.skip(`skipped: ${reason}`, () => undefined);
    return;
  }

  it("serving keeps weights <= 0 for the 'sum' combiner (TF's safe lookup prunes them only for other combiners), so it agrees with dequeue", async () => {
    const t = new TableConfig({ vocabularySize: 4, dim: 2, combiner: 'sum', name: 's', initializer: iota });
    const featureConfig = { f: new FeatureConfig({ table: t }) };
    const emb = new TPUEmbedding({ featureConfig, optimizer: new SGD({ learningRate: 0.1 }), backend });
    const ids = new SparseTensor([[0, 0], [0, 1]], new BigInt64Array([1n, 2n]), [1, 2]);
    const weights = new SparseTensor([[0, 0], [0, 1]], new Float32Array([1, -1]), [1, 2]);
    await emb.enqueue({ f: ids }, { weights: { f: weights } });
    const trained = await emb.dequeue();
    // 1 * [2, 3] - 1 * [4, 5]
    expect(Array.from(trained.f.data)).toEqual([-2, -2]);
    const served = await servingEmbeddingLookup({ f: ids }, { f: weights }, emb.embeddingTables, featureConfig);
    expect(Array.from(served.f.data)).toEqual([-2, -2]);
    // mean: serving prunes the weight -1 (TF), leaving row 1 alone
    const m = new TableConfig({ vocabularySize: 4, dim: 2, combiner: 'mean', name: 'm', initializer: iota });
    const mc = { f: new FeatureConfig({ table: m }) };
    const tables = new Map([[m, new Tensor(Float32Array.from(iota([4, 2])), [4, 2])]]);
    const mean = await servingEmbeddingLookup({ f: ids }, { f: weights }, tables, mc);
    expect(Array.from(mean.f.data)).toEqual(row(1, 2));
    emb.dispose();
  });

  it('serving a SparseTensor of rank 3 gives [d0, d1, dim], each (d0, d1) row combined', async () => {
    const t = new TableConfig({ vocabularySize: 6, dim: 2, combiner: 'mean', name: 'r3', initializer: iota });
    const featureConfig = { f: new FeatureConfig({ table: t }) };
    const tables = new Map([[t, new Tensor(Float32Array.from(iota([6, 2])), [6, 2])]]);
    // [2, 2, 3]: (0,0) -> ids 1, 3; (0,1) -> none; (1,0) -> 5; (1,1) -> 0, 2, 4
    const ids = new SparseTensor(
      [[0, 0, 0], [0, 0, 2], [1, 0, 1], [1, 1, 0], [1, 1, 1], [1, 1, 2]],
      new BigInt64Array([1n, 3n, 5n, 0n, 2n, 4n]),
      [2, 2, 3],
    );
    const out = await servingEmbeddingLookup({ f: ids }, null, tables, featureConfig);
    expect(out.f.shape).toEqual([2, 2, 2]);
    const mean = (rs: number[]) => [0, 1].map((c) => rs.reduce((a, r) => a + row(r, 2)[c]!, 0) / rs.length);
    expect(Array.from(out.f.data)).toEqual([...mean([1, 3]), 0, 0, ...mean([5]), ...mean([0, 2, 4])]);
  });

  it('TPUEmbedding calls unnamed tables table_{i} (tableNames) without writing the name onto the user\'s TableConfig; named ones keep their names', () => {
    const a = new TableConfig({ vocabularySize: 2, dim: 1 });
    const b = new TableConfig({ vocabularySize: 2, dim: 1, name: 'mine' });
    const c = new TableConfig({ vocabularySize: 2, dim: 1 });
    const dup = new TableConfig({ vocabularySize: 2, dim: 1, name: 'mine' });
    expect(() => new TPUEmbedding({ featureConfig: { x: new FeatureConfig({ table: a }), y: new FeatureConfig({ table: b }), z: new FeatureConfig({ table: dup }) } })).toThrow(
      /Multiple tables with name "mine"/,
    );
    const x = new FeatureConfig({ table: a });
    const emb = new TPUEmbedding({ featureConfig: { x, y: new FeatureConfig({ table: b }), z: new FeatureConfig({ table: c }) }, backend });
    expect(emb.tableNames).toEqual(['table_0', 'mine', 'table_2']);
    emb.build(1);
    // the configs read as given: name undefined when unset (an own, frozen property)
    expect([a.name, b.name, c.name, x.name]).toEqual([undefined, 'mine', undefined, undefined]);
    expect([Object.isFrozen(a), Object.getOwnPropertyDescriptor(a, 'name')]).toEqual([true, { value: undefined, writable: false, enumerable: true, configurable: false }]);
    emb.dispose();
  });

  it('a TableConfig used by one TPUEmbedding is reused by another: its tables are named by their position there', async () => {
    const a = new TableConfig({ vocabularySize: 3, dim: 2, combiner: 'sum', initializer: iota });
    const first = new TPUEmbedding({ featureConfig: { f: new FeatureConfig({ table: a }) }, backend });
    expect(first.tableNames).toEqual(['table_0']);
    // a new unnamed table comes first here: a is table_1 (TF would have written table_0 onto it: "Multiple tables with name")
    const n = new TableConfig({ vocabularySize: 2, dim: 2, combiner: 'sum', initializer: iota });
    const second = new TPUEmbedding({ featureConfig: { a: new FeatureConfig({ table: n }), b: new FeatureConfig({ table: a }) }, backend });
    expect(second.tableNames).toEqual(['table_0', 'table_1']);
    await second.enqueue({ a: new Int32Array([1]), b: new Int32Array([2]) }, { training: false });
    const out = await second.dequeue();
    expect([Array.from(out.a.data), Array.from(out.b.data)]).toEqual([row(1, 2), row(2, 2)]);
    expect([a.name, n.name]).toEqual([undefined, undefined]);
    first.dispose();
    second.dispose();
  });

  it('dequeue({ out }) writes the activations to the caller\'s arrays; a wrong array is refused and the batch stays queued', async () => {
    const t = new TableConfig({ vocabularySize: 4, dim: 2, combiner: 'sum', name: 'o', initializer: iota });
    const emb = new TPUEmbedding({ featureConfig: { f: new FeatureConfig({ table: t }) }, backend });
    await emb.enqueue({ f: new Int32Array([3, 0]) }, { training: false });
    await expect(emb.dequeue({ out: { f: new Float32Array(3) } })).rejects.toMatchObject({ code: 'SHAPE_MISMATCH' });
    await expect(emb.dequeue({ out: { f: new Float64Array(4) as never } })).rejects.toMatchObject({ code: 'INVALID_TYPE' });
    const out = new Float32Array(4);
    const acts = await emb.dequeue({ out: { f: out } });
    expect(acts.f.data).toBe(out);
    expect(Array.from(out)).toEqual([...row(3, 2), ...row(0, 2)]);
    emb.dispose();
  });

  for (const numHosts of [1, 3]) {
    it(`dequeue with and without out, dense and pooled features, ${numHosts} host(s): the same activations`, async () => {
      const t = new TableConfig({ vocabularySize: 7, dim: 2, combiner: 'sum', name: 'p', initializer: iota });
      const featureConfig = { d: new FeatureConfig({ table: t }), b: new FeatureConfig({ table: t }) };
      const emb = new TPUEmbedding({ featureConfig, strategy: new ReplicaStrategy({ numHosts }), backend });
      const inputs = { d: new Int32Array([6, 0]), b: RaggedTensor.fromNestedArray([[1, 5, 5], []], { dtype: 'int32' }) };
      // b row 0 = e1 + 2 e5 = [2, 3] + 2 [10, 11]; row 1 is empty: zeros
      const wantB = [22, 25, 0, 0];
      await emb.enqueue(inputs, { training: false });
      const fresh = await emb.dequeue();
      expect(Array.from(fresh.d.data)).toEqual([...row(6, 2), ...row(0, 2)]);
      expect(Array.from(fresh.b.data)).toEqual(wantB);
      await emb.enqueue(inputs, { training: false });
      const out = { d: new Float32Array(4).fill(9), b: new Float32Array(4).fill(9) };
      const into = await emb.dequeue({ out });
      expect(into.d.data).toBe(out.d);
      expect(into.b.data).toBe(out.b);
      expect(Array.from(out.d)).toEqual([...row(6, 2), ...row(0, 2)]);
      expect(Array.from(out.b)).toEqual(wantB);
      emb.dispose();
    });
  }
});
