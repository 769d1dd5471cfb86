// review32c #1: a queued batch owns its ids and weights, and a failed dequeue / applyGradients changes nothing.
import { type EmbeddingBackend, type RawTable, RaggedTensor, referenceBackend, SparseTensor, Tensor } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import { FeatureConfig, TableConfig } from './config.js';
import { SGD } from './optimizers.js';
import { testBackends } from '../test/testUtil.js';
import { TPUEmbedding } from './tpuEmbedding.js';

const cases = await testBackends();

/** Tables a and b: 4 rows of dim 1 holding 0, 1, 2, 3 (sum combiner, SGD lr 1). */
function model(backend: EmbeddingBackend, pipeline = false) {
  const init = () => Float32Array.of(0, 1, 2, 3);
  const a = new TableConfig({ vocabularySize: 4, dim: 1, name: 'a', combiner: 'sum', initializer: init });
  const b = new TableConfig({ vocabularySize: 4, dim: 1, name: 'b', combiner: 'sum', initializer: init });
  return new TPUEmbedding({
    featureConfig: { fa: new FeatureConfig({ table: a }), fb: new FeatureConfig({ table: b }) },
    optimizer: new SGD({ learningRate: 1 }),
    pipelineExecutionWithTensorCore: pipeline,
    backend,
  });
}

const tables = (e: { embeddingTables: Map<unknown, Tensor<Float32Array>> }) => [...e.embeddingTables.values()].map((t) => Array.from(t.data));

/** One id per example (rows 0 and 1) in each input kind, and a function that refills the caller's id buffer with rows 2 and 3. */
function inputs(): { name: string; make: () => { input: unknown; refill: () => void } }[] {
  return [
    { name: 'dense Int32Array', make: () => { const ids = Int32Array.of(0, 1); return { input: ids, refill: () => ids.set([2, 3]) }; } },
    { name: 'dense BigInt64Array', make: () => { const ids = BigInt64Array.of(0n, 1n); return { input: ids, refill: () => ids.set([2n, 3n]) }; } },
    { name: 'dense Tensor', make: () => { const ids = Int32Array.of(0, 1); return { input: new Tensor(ids, [2]), refill: () => ids.set([2, 3]) }; } },
    {
      name: 'RaggedTensor',
      make: () => { const ids = Int32Array.of(0, 1); return { input: RaggedTensor.fromRowSplits(ids, Int32Array.of(0, 1, 2)), refill: () => ids.set([2, 3]) }; },
    },
    {
      name: 'SparseTensor',
      make: () => { const ids = Int32Array.of(0, 1); return { input: new SparseTensor([[0, 0], [1, 0]], ids, [2, 1]), refill: () => ids.set([2, 3]) }; },
    },
  ];
}

/** A reference backend whose tables named in `fail` throw from the named raw methods (an injected native failure). */
function faultyBackend(fail: Set<string>): EmbeddingBackend {
  // The raw table and its `async` operations (what core's EmbeddingTable calls).
  const wrap = <T extends object>(obj: T, name: string): T =>
    new Proxy(obj, {
      get(target, key) {
        const v = Reflect.get(target, key, target) as unknown;
        if (key === 'async' && typeof v === 'object' && v !== null) return wrap(v, name);
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => {
          if (fail.has(`${name}.${String(key)}`)) throw new Error(`injected failure in ${name}.${String(key)}`);
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  const make = (o: Parameters<EmbeddingBackend['createTable']>[0]): RawTable => wrap(referenceBackend.createTable(o), o.name);
  return {
    name: 'faulty-reference',
    priority: -1,
    isUsable: () => true,
    capabilities: () => referenceBackend.capabilities(),
    devices: () => referenceBackend.devices(),
    createTable: make,
  };
}

describe.each(cases.filter((c) => c.backend))('$name backend', ({ backend }) => {
  describe.each(inputs())('$name ids refilled after enqueue', ({ make }) => {
    it('dequeue looks up the enqueued ids', async () => {
      const e = model(backend!);
      const { input, refill } = make();
      await e.enqueue({ fa: input, fb: [0, 0] } as never);
      refill();
      const acts = await e.dequeue();
      expect(Array.from(acts.fa.data)).toEqual([0, 1]); // rows 0 and 1, not 2 and 3
    });

    it('applyGradients trains the enqueued rows', async () => {
      for (const pipeline of [false, true]) {
        const e = model(backend!, pipeline);
        const { input, refill } = make();
        await e.enqueue({ fa: input, fb: [0, 0] } as never);
        await e.dequeue();
        refill();
        await e.applyGradients({ fa: Float32Array.of(1, 1), fb: Float32Array.of(0, 0) });
        // SGD lr 1, gradient 1 on rows 0 and 1: 0 - 1, 1 - 1; rows 2 and 3 untouched.
        expect(tables(e)[0]).toEqual([-1, 0, 2, 3]);
        expect(e.step).toBe(1);
      }
    });
  });

  it('ragged and sparse weights refilled after enqueue change nothing', async () => {
    for (const kind of ['ragged', 'sparse'] as const) {
      const e = model(backend!);
      const w = Float32Array.of(1, 2);
      const ids = Int32Array.of(1, 2);
      const input = kind === 'ragged' ? RaggedTensor.fromRowSplits(ids, Int32Array.of(0, 1, 2)) : new SparseTensor([[0, 0], [1, 0]], ids, [2, 1]);
      const weight = kind === 'ragged' ? RaggedTensor.fromRowSplits(w, Int32Array.of(0, 1, 2)) : new SparseTensor([[0, 0], [1, 0]], w, [2, 1]);
      await e.enqueue({ fa: input, fb: [0, 0] }, { weights: { fa: weight as never, fb: null } });
      w.set([100, 100]);
      const acts = await e.dequeue();
      expect(Array.from(acts.fa.data)).toEqual([1 * 1, 2 * 2]); // weight * row value (sum combiner)
      w.set([5, 5]);
      await e.applyGradients({ fa: Float32Array.of(1, 1), fb: Float32Array.of(0, 0) });
      // row 1 gets weight 1 * gradient 1, row 2 weight 2 * gradient 1.
      expect(tables(e)[0]).toEqual([0, 0, 0, 3]);
    }
  });
});

describe('failures inside the backend', () => {
  it('a failed applyGradients leaves the step and the batch as they were, and can be retried', async () => {
    const fail = new Set(['b.applyCombinedGradients']);
    const e = model(faultyBackend(fail));
    await e.enqueue({ fa: [0, 1], fb: [0, 1] });
    await e.dequeue();
    const grads = { fa: Float32Array.of(1, 1), fb: Float32Array.of(1, 1) };
    await expect(e.applyGradients(grads)).rejects.toThrow('injected failure in b.applyCombinedGradients');
    expect(e.step).toBe(0);
    // Table a's update had already run: a native failure mid-way after validation is not rolled back (see the doc).
    fail.clear();
    await e.applyGradients({ fa: Float32Array.of(0, 0), fb: Float32Array.of(1, 1) });
    expect(e.step).toBe(1);
    expect(tables(e)).toEqual([
      [-1, 0, 2, 3],
      [-1, 0, 2, 3],
    ]);
  });

  it('a failed dequeue keeps the batch queued', async () => {
    const fail = new Set(['b.find']);
    const e = model(faultyBackend(fail));
    await e.enqueue({ fa: [0, 1], fb: [2, 3] });
    await expect(e.dequeue()).rejects.toThrow('injected failure in b.find');
    await expect(e.applyGradients({ fa: null, fb: null })).rejects.toThrow('before dequeue');
    fail.clear();
    const acts = await e.dequeue();
    expect([Array.from(acts.fa.data), Array.from(acts.fb.data)]).toEqual([
      [0, 1],
      [2, 3],
    ]);
    await e.applyGradients({ fa: Float32Array.of(1, 1), fb: Float32Array.of(1, 1) });
    expect(tables(e)).toEqual([
      [-1, 0, 2, 3],
      [0, 1, 1, 2],
    ]);
    await expect(e.dequeue()).rejects.toThrow('before enqueue');
  });
});
