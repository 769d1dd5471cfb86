// An exportModel that fails while it writes (a table disposed mid-export, a table whose export
// fails) leaves no folder behind that it created, and a folder that existed as it was.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createTable, type EmbeddingTable, Tensor } from '@embedstack/core';
import { afterEach, describe, expect, it } from 'vitest';
// createTable below uses the default backend: register the CPU backend whichever test runs first (or alone)
import '@embedstack/cpu-backend';
import * as hps from './index.js';
import { tempDir, tree } from '../test/fixtures.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function temp(): string {
  const t = tempDir('hps-export-fails-');
  cleanups.push(t.cleanup);
  return t.dir;
}

/** A dim-2 table with rows for `keys`. */
async function table(keys: bigint[]): Promise<EmbeddingTable> {
  const t = createTable({ kind: 'dynamic', dim: 2, initializer: { kind: 'zeros' } });
  cleanups.push(() => t.dispose());
  await t.upsert(keys, Float32Array.from({ length: keys.length * 2 }, (_, j) => j));
  return t;
}

/** Tables t0, t1 where t1 is disposed once t0's rows are all read by the export (t0 written, t1 not yet). */
async function disposedMidExport(): Promise<{ t0: EmbeddingTable; t1: EmbeddingTable }> {
  const t0 = await table([1n, 2n, 3n]);
  const t1 = await table([4n]);
  const batches = t0.exportBatches.bind(t0);
  t0.exportBatches = async function* (...args: Parameters<EmbeddingTable['exportBatches']>) {
    yield* batches(...args);
    t1.dispose();
  } as EmbeddingTable['exportBatches'];
  return { t0, t1 };
}

/** The failures under test: each runs exportModel of model m into `dir` and must reject. */
const failures: [string, (dir: string, psConfigFile: string) => Promise<unknown>, Record<string, unknown>][] = [
  [
    'a table disposed while the export runs (after table 0 was written)',
    async (dir, psConfigFile) => {
      const { t0, t1 } = await disposedMidExport();
      return hps.exportModel({ model: 'm', dir, psConfigFile, tables: [{ table: t0, name: 'a' }, { table: t1, name: 'b' }] });
    },
    {
      code: 'DISPOSED',
      argument: 'options.tables[1]',
      message: 'Expected options.tables[1] to stay live (not disposed) until exportModel returns but it was disposed while the export ran: nothing was exported',
    },
  ],
  [
    'a table whose export fails (a key that does not fit uint32, after table 0 was written)',
    async (dir, psConfigFile) =>
      hps.exportModel({ model: 'm', dir, psConfigFile, supportlonglong: false, tables: [{ table: await table([1n, 2n]), name: 'a' }, { table: await table([2n ** 40n]), name: 'b' }] }),
    { code: 'OUT_OF_RANGE' },
  ],
];

describe('exportModel failing mid-export leaves no folder it created', () => {
  for (const [what, run, error] of failures) {
    it(`${what}: a new <dir> and <dir>/<model> are removed; an existing <dir> or earlier export stays as it was`, async () => {
      // <dir> and its parent missing: neither is left behind
      const base = temp();
      const psConfigFile = join(base, 'ps.json');
      await expect(run(join(base, 'out', 'models'), psConfigFile)).rejects.toMatchObject(error);
      expect(readdirSync(base)).toEqual([]); // was: out/models/m (empty) left behind

      // <dir> exists, <dir>/<model> does not: <dir> stays, empty
      const dir = temp();
      await expect(run(dir, join(dir, 'ps.json'))).rejects.toMatchObject(error);
      expect(readdirSync(dir)).toEqual([]); // was: m (empty)

      // an earlier export of m: every file as it was, and it is still what a server loads
      const earlier = temp();
      const ps = join(earlier, 'ps.json');
      await hps.exportModel({ model: 'm', dir: earlier, psConfigFile: ps, tables: [{ table: new Tensor(Float32Array.of(7, 8), [1, 2]), name: 'a' }] });
      const before = tree(earlier);
      await expect(run(earlier, ps)).rejects.toMatchObject(error);
      expect(tree(earlier)).toEqual(before);
      const server = await hps.HPS.create({ psConfigFile: ps });
      cleanups.push(() => server.close());
      expect(Array.from((await server.lookup([0n], 'm', 0)).data as Float32Array)).toEqual([7, 8]);
    });
  }

  it('a failed export and a valid one into the same new <dir> at once: the valid one is committed and served, whatever their order', async () => {
    for (const sameModel of [true, false]) {
      for (const failFirst of [true, false]) {
        const dir = join(temp(), 'out');
        const { t0, t1 } = await disposedMidExport();
        const failing = () => hps.exportModel({ model: 'm', dir, tables: [{ table: t0, name: 'a' }, { table: t1, name: 'b' }] });
        const valid = () => hps.exportModel({ model: sameModel ? 'm' : 'n', dir, tables: [{ table: new Tensor(Float32Array.of(5, 6), [1, 2]), name: 'a' }] });
        const [failed, config] = failFirst ? await Promise.allSettled([failing(), valid()]) : (await Promise.allSettled([valid(), failing()])).reverse();
        expect(failed).toMatchObject({ status: 'rejected', reason: { code: 'DISPOSED' } });
        expect(config!.status).toBe('fulfilled');
        expect(readdirSync(dir)).toEqual([sameModel ? 'm' : 'n']);
        const server = await hps.HPS.create({ psConfig: (config as PromiseFulfilledResult<Record<string, unknown>>).value });
        cleanups.push(() => server.close());
        expect(Array.from((await server.lookup([0n], sameModel ? 'm' : 'n', 0)).data as Float32Array)).toEqual([5, 6]);
      }
    }
  });

  it('a psConfigFile that cannot be written, into a new <dir>: nothing is left (the earlier case, over an export, is in exportChecks)', async () => {
    const base = temp();
    const t = await table([1n]);
    const err = await hps.exportModel({ model: 'm', dir: join(base, 'out'), tables: [t], psConfigFile: join(base, 'missing', 'ps.json') }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'IO_ERROR' });
    expect(existsSync(join(base, 'out'))).toBe(false);
    expect(readdirSync(base)).toEqual([]);
  });
});
