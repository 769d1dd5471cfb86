import { createTable, type EmbeddingTable, referenceBackend } from '@embedstack/core';
import { cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

/**
 * With RawTable.checksRowIndices core validates combiner / maxNorm / out /
 * insertMissing BEFORE the ids are checked (by the addon, in the job). A call with a bad id
 * AND a second bad argument must still fail like the reference backend's (core checks ids first).
 */
const DIM = 4;
const ROWS = 10;
function make(backend: typeof cpuBackend | typeof referenceBackend): EmbeddingTable {
  const t = createTable({ kind: 'static', dim: DIM, vocabularySize: ROWS, keyDtype: 'int32', name: 'rows' }, { backend });
  t.upsertSync(Int32Array.from({ length: ROWS }, (_, i) => i), new Float32Array(ROWS * DIM).fill(1));
  return t;
}
function err(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    const x = e as { name: string; code: string; message: string };
    return `${x.name} ${x.code} ${x.message}`;
  }
  return 'no error';
}
const bad = { rowSplits: Int32Array.from([0, 1, 2]), keys: Int32Array.from([1, ROWS + 5]), weights: null };

describe('static bag: a bad id plus a second bad argument', () => {
  const cases: [string, Record<string, unknown>][] = [
    ['bad combiner', { combiner: 'bogus' }],
    ['bad maxNorm', { combiner: 'sum', maxNorm: -1 }],
    ['out too short', { combiner: 'sum', out: new Float32Array(3) }],
    ['insertMissing not a boolean', { combiner: 'sum', insertMissing: 'yes' }],
  ];
  for (const [what, opts] of cases) {
    it(`${what}: same error as the reference backend (sync and Promise)`, async () => {
      const cpu = make(cpuBackend);
      const ref = make(referenceBackend);
      expect(err(() => cpu.lookupCombinedSync(bad, opts as never))).toBe(err(() => ref.lookupCombinedSync(bad, opts as never)));
      const rejected = async (p: () => Promise<unknown>) =>
        Promise.resolve()
          .then(p)
          .then(() => 'no error', (e: { name: string; code: string; message: string }) => `${e.name} ${e.code} ${e.message}`);
      const refError = await rejected(() => ref.lookupCombined(bad, opts as never));
      expect(refError).toContain('OUT_OF_RANGE');
      expect(await rejected(() => cpu.lookupCombined(bad, opts as never))).toBe(refError);
      cpu.dispose();
      ref.dispose();
    });
  }
  for (const kind of ['shared', 'resizable'] as const) {
    it(`ids in a ${kind} ArrayBuffer: same error as the reference backend, sync and Promise`, async () => {
      const cpu = make(cpuBackend);
      const ref = make(referenceBackend);
      const buf = kind === 'shared' ? new SharedArrayBuffer(8) : new (ArrayBuffer as unknown as new (n: number, o: object) => ArrayBuffer)(8, { maxByteLength: 64 });
      const keys = new Int32Array(buf);
      keys.set([1, ROWS + 5]);
      const b = { rowSplits: Int32Array.from([0, 1, 2]), keys, weights: null };
      expect(err(() => cpu.lookupCombinedSync(b, { combiner: 'sum' }))).toBe(err(() => ref.lookupCombinedSync(b, { combiner: 'sum' })));
      const aerr = async (p: Promise<unknown>) => p.then(() => 'no error', (e: { name: string; code: string; message: string }) => `${e.name} ${e.code} ${e.message}`);
      expect(await aerr(cpu.lookupCombined(b, { combiner: 'sum' }))).toBe(await aerr(ref.lookupCombined(b, { combiner: 'sum' })));
      keys.set([1, -3]);
      expect(err(() => cpu.lookupCombinedSync(b, { combiner: 'sum' }))).toBe(err(() => ref.lookupCombinedSync(b, { combiner: 'sum' })));
      cpu.dispose();
      ref.dispose();
    });
  }
  it('int64: huge and most-negative ids: same error as the reference backend', async () => {
    const mk = (backend: typeof cpuBackend | typeof referenceBackend) => {
      const t = createTable({ kind: 'static', dim: DIM, vocabularySize: ROWS, keyDtype: 'int64', name: 'rows' }, { backend });
      return t;
    };
    const cpu = mk(cpuBackend);
    const ref = mk(referenceBackend);
    for (const big of [2n ** 62n, 2n ** 63n - 1n, -(2n ** 63n), 2n ** 32n + 1n]) {
      const b = { rowSplits: Int32Array.from([0, 1, 2]), keys: BigInt64Array.from([1n, big]), weights: null };
      expect(err(() => cpu.lookupCombinedSync(b, { combiner: 'sum' }))).toBe(err(() => ref.lookupCombinedSync(b, { combiner: 'sum' })));
    }
    cpu.dispose();
    ref.dispose();
  });
  it('a disposed table: same error as the reference backend (sync)', () => {
    const cpu = make(cpuBackend);
    const ref = make(referenceBackend);
    cpu.dispose();
    ref.dispose();
    expect(err(() => cpu.lookupCombinedSync(bad, { combiner: 'sum' }))).toBe(err(() => ref.lookupCombinedSync(bad, { combiner: 'sum' })));
  });
});
