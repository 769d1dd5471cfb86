import { createTable, type EmbeddingTable, OutOfRangeError, referenceBackend } from '@embedstack/core';
import { ASYNC_MIN_WORK, cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

/**
 * The CPU backend's static tables check a bag's row indices in the addon
 * (RawTable.checksRowIndices), so core skips its own serial pass over the ids. The error a
 * caller sees must not change: the same OutOfRangeError, message and argument as the
 * reference backend's, where core checks before the call; and in-range calls the same values.
 */
const DIM = 4;
const ROWS = 10;
const BIG = Math.ceil(ASYNC_MIN_WORK / DIM) + 64; // large enough for the addon's pool

function tables(keyDtype: 'int32' | 'int64'): { cpu: EmbeddingTable; ref: EmbeddingTable } {
  const make = (backend: typeof cpuBackend | typeof referenceBackend) => {
    const t = createTable({ kind: 'static', dim: DIM, vocabularySize: ROWS, keyDtype, name: 'rows' }, { backend });
    const idx = keyDtype === 'int32' ? Int32Array.from({ length: ROWS }, (_, i) => i) : BigInt64Array.from({ length: ROWS }, (_, i) => BigInt(i));
    t.upsertSync(idx, Float32Array.from({ length: ROWS * DIM }, (_, j) => j * 0.25));
    return t;
  };
  return { cpu: make(cpuBackend), ref: make(referenceBackend) };
}

/** A bag of `n` ids (bags of 2) with `bad` at position `at`. */
function bag(keyDtype: 'int32' | 'int64', n: number, at: number, bad: number) {
  const ids = Array.from({ length: n }, (_, i) => (i === at ? bad : (i * 7) % ROWS));
  const keys = keyDtype === 'int32' ? Int32Array.from(ids) : BigInt64Array.from(ids, (x) => BigInt(x));
  return { rowSplits: Int32Array.from({ length: Math.ceil(n / 2) + 1 }, (_, r) => Math.min(n, r * 2)), keys, weights: null };
}

function errorOf(f: () => unknown): { name: string; code: string; message: string; argument: unknown } {
  try {
    f();
  } catch (e) {
    const x = e as OutOfRangeError;
    return { name: x.name, code: x.code, message: x.message, argument: x.argument };
  }
  throw new Error('expected the call to throw');
}

async function asyncErrorOf(p: Promise<unknown>): Promise<ReturnType<typeof errorOf>> {
  try {
    await p;
  } catch (e) {
    const x = e as OutOfRangeError;
    return { name: x.name, code: x.code, message: x.message, argument: x.argument };
  }
  throw new Error('expected the promise to reject');
}

describe('static bag row indices checked by the addon', () => {
  for (const keyDtype of ['int32', 'int64'] as const) {
    it(`${keyDtype}: out-of-range and negative ids give core's error, sync and Promise, small and pooled`, async () => {
      const { cpu, ref } = tables(keyDtype);
      expect(cpu.raw.checksRowIndices).toBe(true);
      for (const [n, at, bad] of [
        [6, 3, ROWS],
        [6, 0, -1],
        [BIG, BIG - 5, ROWS + 100],
        [BIG, 1000, -7],
      ] as const) {
        const b = bag(keyDtype, n, at, bad);
        const want = errorOf(() => ref.lookupCombinedSync(b, { combiner: 'sum' }));
        expect(want.name).toBe('OutOfRangeError');
        expect(want.message).toContain(`ids[${at}]`);
        expect(errorOf(() => cpu.lookupCombinedSync(b, { combiner: 'sum' }))).toEqual(want);
        expect(await asyncErrorOf(cpu.lookupCombined(b, { combiner: 'mean' }))).toEqual(await asyncErrorOf(ref.lookupCombined(b, { combiner: 'mean' })));
        // the out given is left as it was
        const out = new Float32Array((b.rowSplits.length - 1) * DIM).fill(5);
        errorOf(() => cpu.lookupCombinedSync(b, { combiner: 'sum', out }));
        expect(out.every((x) => x === 5)).toBe(true);
      }
      const good = bag(keyDtype, BIG, 0, 9);
      expect(cpu.lookupCombinedSync(good, { combiner: 'sum' })).toEqual(ref.lookupCombinedSync(good, { combiner: 'sum' }));
      expect(await cpu.lookupCombined(good, { combiner: 'mean' })).toEqual(await ref.lookupCombined(good, { combiner: 'mean' }));
      cpu.dispose();
      ref.dispose();
    });
  }
});
