import { createTable, ErrorCodes, EmbeddingError, initializers, initialRow } from '@embedstack/core';
import { cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

describe('cpu backend: every key value is a key', () => {
  it('int64 extremes, -1, 0 and 2^40 insert, read, export and remove', () => {
    const t = createTable({ dim: 2, initCapacity: 2, initializer: initializers.constant(-7) }, { backend: cpuBackend });
    const keys = [INT64_MIN, INT64_MAX, -1n, 0n, 1n << 40n];
    const values = Float32Array.from(keys.flatMap((_, i) => [i + 0.5, -i]));
    t.upsertSync(keys, values);
    expect(t.size()).toBe(5);
    const r = t.findSync([...keys, 1n, INT64_MIN + 1n]);
    expect(Array.from(r.exists)).toEqual([1, 1, 1, 1, 1, 0, 0]);
    expect(Array.from(r.values.subarray(0, 10))).toEqual(Array.from(values));
    expect(Array.from(r.values.subarray(10))).toEqual([-7, -7, -7, -7]); // missing: initial value
    const e = t.exportSync();
    expect([...(e.keys as BigInt64Array)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual([INT64_MIN, -1n, 0n, 1n << 40n, INT64_MAX]);
    expect(t.removeSync([INT64_MAX, INT64_MIN, 12345n])).toBe(2);
    expect(Array.from(t.findSync(keys).exists)).toEqual([0, 0, 1, 1, 1]);
    t.dispose();
  });

  it('int32 extremes round-trip as Int32Array', () => {
    const t = createTable({ dim: 1, keyDtype: 'int32' }, { backend: cpuBackend });
    const keys = [-2147483648, 2147483647, -1, 0];
    t.upsertSync(keys, [1, 2, 3, 4]);
    const e = t.exportSync();
    expect(e.keys).toBeInstanceOf(Int32Array);
    expect([...e.keys].map(Number).sort((a, b) => a - b)).toEqual([-2147483648, -1, 0, 2147483647]);
    expect(Array.from(t.findSync(keys).values)).toEqual([1, 2, 3, 4]);
    t.dispose();
  });

  it('random initial rows of extreme keys equal core initialRow (int32 keys sign-extended)', () => {
    for (const keyDtype of ['int64', 'int32'] as const) {
      const t = createTable({ dim: 5, keyDtype, initializer: initializers.truncatedNormal(0.5, 2), seed: 11 }, { backend: cpuBackend });
      const keys = keyDtype === 'int64' ? [INT64_MIN, INT64_MAX, -1n, 0n, 1n << 40n] : [-2147483648, 2147483647, -1, 0, 99];
      const got = t.findSync(keys).values;
      const expected = new Float32Array(keys.length * 5);
      keys.forEach((k, i) => initialRow(t.options.initializer, 11, t.options.stream, k, 5, expected, i * 5));
      expect(Array.from(got)).toEqual(Array.from(expected));
      t.dispose();
    }
  });

  it('a raw static bag of int32 ids reports the first id outside [0, vocabularySize) and leaves out untouched', () => {
    const t = createTable({ kind: 'static', keyDtype: 'int32', vocabularySize: 1000, dim: 2 }, { backend: cpuBackend });
    const n = 200_000; // past the size the check splits over the pool
    const splits = Int32Array.from({ length: n / 20 + 1 }, (_, r) => r * 20);
    for (const [bad, at, later] of [[1000, 0, 5], [-1, 70_001, 150_000], [-(2 ** 31), n - 1, -1], [2 ** 31 - 1, 131_072, 131_073]] as const) {
      const ids = Int32Array.from({ length: n }, (_, i) => (i * 7919) % 1000);
      ids[at] = bad;
      if (later >= 0) ids[later] = 1000;
      const out = new Float32Array((n / 20) * 2).fill(7);
      let error: unknown;
      try {
        t.raw.sync!.lookupCombined({ rowSplits: splits, keys: ids, weights: null }, 'sum', 0, false, out);
      } catch (e) {
        error = e;
      }
      expect((error as EmbeddingError).code, `id ${bad} at ${at}`).toBe(ErrorCodes.OUT_OF_RANGE);
      expect((error as EmbeddingError).message).toContain(`ids[${at}]`);
      expect((error as EmbeddingError).message).toContain(`received ${bad}`);
      expect(out.every((v) => v === 7)).toBe(true);
    }
    t.dispose();
  });

  it('static tables refuse keys outside [0, vocabularySize) and change nothing', () => {
    const t = createTable({ kind: 'static', vocabularySize: 3, dim: 1 }, { backend: cpuBackend });
    // core rejects first; the native table checks again for direct raw calls
    expect(() => t.raw.sync!.upsert(new BigInt64Array([0n, 3n]), new Float32Array([5, 5]), null)).toThrow(EmbeddingError);
    let error: unknown;
    try {
      t.raw.sync!.find(new BigInt64Array([-1n]), null, null);
    } catch (e) {
      error = e;
    }
    expect(error, 'a raw find of key -1 on a static table throws').toBeInstanceOf(EmbeddingError);
    expect((error as EmbeddingError).code).toBe(ErrorCodes.OUT_OF_RANGE);
    expect((error as EmbeddingError).message).toContain('keys[0]');
    expect(Array.from(t.findSync([0, 1, 2]).values)).toEqual([0, 0, 0]);
    t.dispose();
  });
});
