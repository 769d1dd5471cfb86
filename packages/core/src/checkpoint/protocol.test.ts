import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../errors.js';
import { referenceBackend } from '../reference/index.js';
import { createTable, type EmbeddingTable } from '../table.js';
import { loadTable, saveTable } from './index.js';
import { type CrashPoint, setCrashHookForTesting, SimulatedCrash } from './layout.js';
import { f32Value, rejection, rowsOf, withTempDir } from '../../test/checkpoint/testUtil.js';

const KEYS = Array.from({ length: 25 }, (_, i) => BigInt(i * 1000 - 7));

/** A table whose every value encodes generation `gen`. */
async function generation(gen: number): Promise<EmbeddingTable> {
  const t = createTable({ dim: 2 }, { backend: referenceBackend });
  await t.upsert(KEYS, Float32Array.from(KEYS.flatMap((k) => [f32Value(k, 0, gen), f32Value(k, 1, gen)])));
  return t;
}

/** Loads `dir` and returns the one generation all rows belong to (fails on a mix). */
async function loadedGeneration(dir: string): Promise<number> {
  const t = createTable({ dim: 2 }, { backend: referenceBackend });
  await loadTable(t, dir);
  const rows = await rowsOf(t);
  expect(rows.size).toBe(KEYS.length);
  const gens = new Set<number>();
  for (const k of KEYS) {
    const v = rows.get(k)!.values;
    const gen = (v[0]! - f32Value(k, 0)) / 1024;
    expect(v).toEqual([f32Value(k, 0, gen), f32Value(k, 1, gen)]);
    gens.add(gen);
  }
  expect(gens.size).toBe(1);
  return [...gens][0]!;
}

afterEach(() => setCrashHookForTesting(null));

describe('crash at each step of a save (injected)', () => {
  const cases: [CrashPoint, number][] = [
    ['dataWritten', 1],
    ['versionRenamed', 1],
    ['currentTmpWritten', 1],
    ['currentSwitched', 2],
    ['oldRemoved', 2],
  ];
  for (const [point, live] of cases) {
    it(`crash at ${point}: generation ${live} is live and complete; the next save cleans up`, async () => {
      await withTempDir(async (dir) => {
        await saveTable(await generation(1), dir);
        setCrashHookForTesting((p) => {
          if (p === point) throw new SimulatedCrash(p);
        });
        await expect(saveTable(await generation(2), dir)).rejects.toBeInstanceOf(SimulatedCrash);
        setCrashHookForTesting(null);
        expect(await loadedGeneration(dir)).toBe(live);
        expect(await readdir(dir)).toContain('LOCK'); // left behind, as by a killed process
        await saveTable(await generation(3), dir);
        expect(await loadedGeneration(dir)).toBe(3);
        expect((await readdir(dir)).sort()).toEqual(['CURRENT', (await readFile(join(dir, 'CURRENT'), 'utf8')).trim()].sort());
      });
    });
  }

  it('an ordinary failure mid-save (a backend error) removes the temp dir and keeps the old checkpoint', async () => {
    await withTempDir(async (dir) => {
      await saveTable(await generation(1), dir);
      const t = await generation(2);
      const real = t.raw.async.exportBatch;
      let calls = 0;
      t.raw.async.exportBatch = (o, l) => (++calls === 2 ? Promise.reject(new Error('device lost')) : real(o, l));
      await expect(saveTable(t, dir, { batchSize: 5 })).rejects.toThrow('device lost');
      expect((await readdir(dir)).sort()).toEqual(['CURRENT', 'ckpt-000000000001']);
      expect(await loadedGeneration(dir)).toBe(1);
    });
  });
});

describe('one writer per directory', () => {
  it('concurrent saves from one process run in call order; the last one called is live and complete', async () => {
    await withTempDir(async (dir) => {
      const tables = await Promise.all([1, 2, 3, 4].map(generation));
      await Promise.all(tables.map((t) => saveTable(t, dir, { batchSize: 3 })));
      expect(await loadedGeneration(dir)).toBe(4);
      expect((await readdir(dir)).sort()).toEqual(['CURRENT', 'ckpt-000000000004']);
    });
  });

  it('a lock held by another live process -> FAILED_PRECONDITION, nothing written; a dead holder\'s lock is taken over', async () => {
    await withTempDir(async (dir) => {
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, 'LOCK'), JSON.stringify({ pid: process.ppid, host: hostname(), since: 'then' }));
      const e = await rejection(saveTable(await generation(1), dir));
      expect(e.code).toBe(ErrorCodes.FAILED_PRECONDITION);
      expect(e.message).toContain(`process ${process.ppid}`);
      expect(e.message).toContain(join(dir, 'LOCK'));
      expect(await readdir(dir)).toEqual(['LOCK']);
      // pid 2^22+1 is above Linux's pid_max default range; treated as a crashed writer
      await writeFile(join(dir, 'LOCK'), JSON.stringify({ pid: 4194305, host: hostname(), since: 'then' }));
      await saveTable(await generation(1), dir);
      expect(await loadedGeneration(dir)).toBe(1);
      expect(await readdir(dir)).not.toContain('LOCK');
    });
  });

  it('leftovers of crashed saves (temp dirs, CURRENT.tmp, unreferenced versions) are ignored by readers and removed by the next save', async () => {
    await withTempDir(async (dir) => {
      await saveTable(await generation(1), dir);
      await mkdir(join(dir, '.tmp-1-deadbeef'));
      await writeFile(join(dir, '.tmp-1-deadbeef', 'values'), 'partial');
      await mkdir(join(dir, 'ckpt-000000000005'));
      await writeFile(join(dir, 'CURRENT.tmp'), 'ckpt-000000000005\n');
      await writeFile(join(dir, 'notes.txt'), 'user file');
      // entries that only look like ours are not ours: never deleted
      await writeFile(join(dir, '.tmp-notes'), 'user file');
      await mkdir(join(dir, '.tmp-1-deadbeef-mine'));
      await mkdir(join(dir, 'ckpt-7'));
      expect(await loadedGeneration(dir)).toBe(1);
      await saveTable(await generation(2), dir);
      // the unreferenced ckpt-5 is deleted before the next number is chosen
      expect((await readdir(dir)).sort()).toEqual(['.tmp-1-deadbeef-mine', '.tmp-notes', 'CURRENT', 'ckpt-000000000002', 'ckpt-7', 'notes.txt']);
      expect(await loadedGeneration(dir)).toBe(2);
    });
  });
});
