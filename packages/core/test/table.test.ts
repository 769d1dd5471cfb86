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

describe('static-table key range check', () => {
  const cases: [string, bigint, number][] = [
    ['the vocabulary size itself', 10n, 1],
    ['-1', -1n, 1],
    ['INT64_MIN', -(2n ** 63n), 0],
    ['INT64_MAX', 2n ** 63n - 1n, 2],
    ['2^32 + 1 (low word in range)', 2n ** 32n + 1n, 1],
    ['2^40', 2n ** 40n, 0],
  ];
  for (const [what, bad, at] of cases) {
    it(`refuses ${what} at its index and leaves the table unchanged`, () => {
      const t = createTable({ kind: 'static', vocabularySize: 10, dim: 1, initializer: initializers.zeros() }, { backend: referenceBackend });
      const keys = [0n, 9n, 3n];
      keys.splice(at, 0, bad);
      throwsCode(() => t.upsertSync(BigInt64Array.from(keys), new Float32Array(keys.length).fill(5)), ErrorCodes.OUT_OF_RANGE, `keys[${at}]`);
      expect(Array.from(t.findSync([0n, 3n, 9n]).values)).toEqual([0, 0, 0]);
      t.dispose();
    });
  }
  it('refuses an int32 key outside [0, vocabularySize) at its index, in a block of 8 or in the tail', () => {
    const t = createTable({ kind: 'static', keyDtype: 'int32', vocabularySize: 10, dim: 1, initializer: initializers.zeros() }, { backend: referenceBackend });
    for (const bad of [10, -1, -(2 ** 31), 2 ** 31 - 1]) {
      for (const at of [0, 5, 7, 8, 19, 20]) {
        const keys = Int32Array.from({ length: 21 }, (_, i) => (i * 7) % 10);
        keys[at] = bad;
        if (at < 20) keys[20] = -1; // a later bad key: the first one is reported
        throwsCode(() => t.findSync(keys), ErrorCodes.OUT_OF_RANGE, `keys[${at}]`);
      }
    }
    t.dispose();
  });
  it('accepts every index in [0, vocabularySize) for int64 and int32 keys', () => {
    for (const keyDtype of ['int64', 'int32'] as const) {
      const t = createTable({ kind: 'static', keyDtype, vocabularySize: 10, dim: 1, initializer: initializers.fromArray([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]) }, { backend: referenceBackend });
      expect(Array.from(t.findSync([9, 0, 5]).values)).toEqual([9, 0, 5]);
      throwsCode(() => t.findSync([10]), ErrorCodes.OUT_OF_RANGE, 'keys[0]');
      t.dispose();
    }
  });
});
