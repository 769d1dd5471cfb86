import { describe, expect, it } from 'vitest';
import { createTable } from '../table.js';
import { initializers } from '../initializers.js';
import { optimizers } from '../optimizers.js';
import { RaggedTensor } from '../sparse.js';
import { referenceBackend, ReferenceBackend } from './backend.js';

const backend = referenceBackend;

describe('reference backend smoke', () => {
  it('describes itself', () => {
    expect(backend).toBeInstanceOf(ReferenceBackend);
    expect(backend.name).toBe('reference');
    expect(backend.priority).toBe(0);
    expect(backend.capabilities()).toEqual({ sync: true, threads: 1, device: 'js', storageDtypes: ['float32', 'float16', 'bfloat16'] });
  });

  it('dynamic: upsert, find, findOrInsert, remove', async () => {
    const t = createTable({ dim: 2, initializer: initializers.constant(0.5) }, { backend });
    await t.upsert([1n, -1n], [1, 2, 3, 4]);
    const r = await t.find([1n, 7n, -1n]);
    expect(Array.from(r.values)).toEqual([1, 2, 0.5, 0.5, 3, 4]);
    expect(Array.from(r.exists)).toEqual([1, 0, 1]);
    expect(t.size()).toBe(2);
    const fi = t.findOrInsertSync([7n, 7n]);
    expect(Array.from(fi.exists)).toEqual([0, 0]);
    expect(t.size()).toBe(3);
    expect(await t.remove([7n, 7n, 99n])).toBe(1);
    expect(t.size()).toBe(2);
  });

  it('accum follows bp_v2', () => {
    const t = createTable({ dim: 1 }, { backend });
    t.upsertSync([1], [10]);
    t.accumSync([1, 2, 1, 3], [1, 5, 2, 7], [true, false, false, true]);
    const r = t.findSync([1, 2, 3]);
    expect(Array.from(r.values)).toEqual([11, 5, 0]);
    expect(Array.from(r.exists)).toEqual([1, 1, 0]);
  });

  it('static: adagrad on duplicates', () => {
    const opt = optimizers.adagrad({ learningRate: 0.1 });
    const t = createTable({ kind: 'static', dim: 1, vocabularySize: 3, initializer: initializers.ones(), optimizer: opt }, { backend });
    t.applyGradientsSync([2, 2], [1, 1], opt, 1);
    // g = 2, acc = 0.1 + 4 = 4.1, w = 1 - 0.1 * 2 / sqrt(4.1)
    expect(t.findSync([2]).values[0]).toBeCloseTo(1 - 0.2 / Math.sqrt(4.1), 6);
    expect(t.exportSync({ offset: 2, limit: 1 }).slots[0]![0]).toBeCloseTo(4.1, 6);
  });

  it('lookupCombined mean', () => {
    const t = createTable({ dim: 2 }, { backend });
    t.upsertSync([1, 2], [1, 2, 3, 4]);
    const out = t.lookupCombinedSync(RaggedTensor.fromNestedArray([[1, 2], [], [2]]), { combiner: 'mean' });
    expect(Array.from(out)).toEqual([2, 3, 0, 0, 3, 4]);
  });

  it('lru eviction', () => {
    const t = createTable({ dim: 1, maxCapacity: 2, initCapacity: 2 }, { backend });
    t.upsertSync([1], [1]);
    t.upsertSync([2], [2]);
    t.findSync([1]);
    t.upsertSync([3], [3]);
    expect(Array.from(t.findSync([1, 2, 3]).exists)).toEqual([1, 0, 1]);
  });
});
