import { describe, expect, it } from 'vitest';
import { createTable, EmbeddingTable, ErrorCodes, initializers, optimizers, type RawTable, referenceBackend, resolveTableOptions } from '@embedstack/core';
import { throwsCode } from './util.js';

describe('EmbeddingTable', () => {
  it('exposes its resolved options as read-only properties', () => {
    const t = createTable({ dim: 3, name: 'user', keyDtype: 'int32', optimizer: optimizers.rowWiseAdagrad() }, { backend: referenceBackend });
    expect([t.name, t.dim, t.kind, t.keyDtype, t.backendName]).toEqual(['user', 3, 'dynamic', 'int32', 'reference']);
    expect(t.slotNames).toEqual(['accumulators']);
    expect(t.slotWidths).toEqual([1]);
    expect(t.options.initCapacity).toBe(1024);
    expect(t.disposed).toBe(false);
    t.dispose();
    expect(t.disposed).toBe(true);
    throwsCode(() => t.raw, ErrorCodes.DISPOSED, 'user');
  });

  it('wraps any RawTable; the sync form of an async-only raw table throws UNSUPPORTED naming the Promise form', async () => {
    const options = resolveTableOptions({ dim: 1, initializer: initializers.ones() });
    const inner = referenceBackend.createTable(options);
    const asyncOnly: RawTable = { ...inner, sync: null, async: inner.async, size: inner.size, capacity: inner.capacity, memoryUsage: inner.memoryUsage, setEpoch: inner.setEpoch, dispose: inner.dispose };
    const t = new EmbeddingTable(asyncOnly, options, 'remote');
    expect(t.backendName).toBe('remote');
    await t.upsert([1], [5]);
    expect(Array.from((await t.find([1, 2])).values)).toEqual([5, 1]);
    const e = throwsCode(() => t.findSync([1]), ErrorCodes.UNSUPPORTED, 'Promise');
    expect(e.message).toContain('"remote"');
    expect(new EmbeddingTable(inner, options).backendName).toBe('custom');
  });

  it('Symbol.dispose disposes the table', () => {
    const t = createTable({ dim: 1 }, { backend: referenceBackend });
    t[Symbol.dispose]();
    expect(t.disposed).toBe(true);
    throwsCode(() => t.size(), ErrorCodes.DISPOSED, 'disposed');
  });
});
