import { spawn } from 'node:child_process';
import { cpSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../errors.js';
import { loadTable, saveTable } from './index.js';
import { setCrashHookForTesting } from './layout.js';
import { bundleChild } from '../testing/child.js';
import { concurrentTable, emptyConcurrentTable, generationOf } from '../../test/checkpoint/concurrentTable.js';
import { rejection, withTempDir } from '../../test/checkpoint/testUtil.js';

/**
 * Several writers on one checkpoint directory: child processes (bundled from source,
 * see bundleChild) saving in loops, and one process reaching the directory by two paths.
 * Whatever the interleaving, a save either succeeds or is refused with
 * FAILED_PRECONDITION, and the directory always loads one complete generation.
 */

let work: string;
let childScript: string;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'embedstack-conc-'));
  childScript = await bundleChild(new URL('../../test/checkpoint/saveLoopChild.ts', import.meta.url), join(work, 'bin'));
});

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

afterEach(() => setCrashHookForTesting(null));

/** Runs saveLoopChild; resolves with its output lines once it exits. */
function saveLoop(dir: string, tag: number, saves: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, [childScript, dir, String(tag), String(saves)], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    c.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    c.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    c.on('exit', (code) => (code === 0 ? resolve(out.trim().split('\n')) : reject(new Error(`child ${tag} exited with ${code}: ${err}`))));
  });
}

async function loadedGeneration(dir: string): Promise<number> {
  const t = emptyConcurrentTable();
  await loadTable(t, dir);
  return generationOf(t);
}

describe('one writer per directory, across processes and paths', () => {
  it('two processes saving into one dir: every save succeeds or is refused with FAILED_PRECONDITION; the dir loads the last saved generation', async () => {
    const dir = join(work, 'two-writers');
    const outs = await Promise.all([1, 2].map((tag) => saveLoop(dir, tag, 400)));
    const lines = outs.flat();
    const others = lines.filter((l) => !l.startsWith('ok ') && !l.startsWith(`err ${ErrorCodes.FAILED_PRECONDITION} `));
    expect(others).toEqual([]); // never an IOError (ENOENT, ENOTEMPTY): both inside the lock
    const ok = lines.filter((l) => l.startsWith('ok ')).map((l) => Number(l.slice(3)));
    expect(ok.length).toBeGreaterThan(0);
    // the last save of each child that succeeded is a candidate for the live one
    const lastOk = outs.map((o) => o.filter((l) => l.startsWith('ok ')).map((l) => Number(l.slice(3))).pop()).filter((g) => g !== undefined);
    expect(lastOk).toContain(await loadedGeneration(dir));
    const names = (await readdir(dir)).sort();
    expect(names).toEqual(['CURRENT', (await readFile(join(dir, 'CURRENT'), 'utf8')).trim()]);
  }, 240_000);

  it('one process saving into one dir through the dir and a symlink at once: the saves queue up, none fails, the dir always loads', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'real');
      const alias = join(root, 'alias');
      await mkdir(dir);
      await symlink(dir, alias);
      for (let r = 0; r < 40; r++) {
        const [a, b] = [await concurrentTable(2 * r), await concurrentTable(2 * r + 1)];
        const results = await Promise.allSettled([saveTable(a, dir), saveTable(b, alias)]);
        expect(results.map((x) => (x.status === 'rejected' ? String(x.reason) : 'ok'))).toEqual(['ok', 'ok']);
        expect([2 * r, 2 * r + 1]).toContain(await loadedGeneration(dir));
      }
      expect((await readdir(dir)).sort()).toEqual(['CURRENT', (await readFile(join(dir, 'CURRENT'), 'utf8')).trim()]);
    });
  });

  it('a LOCK being created (empty, young) is held; once old it is taken over', async () => {
    await withTempDir(async (dir) => {
      await writeFile(join(dir, 'LOCK'), '');
      const e = await rejection(saveTable(await concurrentTable(1), dir));
      expect(e.code).toBe(ErrorCodes.FAILED_PRECONDITION);
      expect(await readdir(dir)).toEqual(['LOCK']);
      const old = new Date(Date.now() - 60_000);
      await utimes(join(dir, 'LOCK'), old, old);
      await saveTable(await concurrentTable(2), dir);
      expect(await loadedGeneration(dir)).toBe(2);
      expect(await readdir(dir)).not.toContain('LOCK');
    });
  });

  it("a LOCK naming this process but another thread is held (that thread's queue is not ours)", async () => {
    await withTempDir(async (dir) => {
      await writeFile(join(dir, 'LOCK'), JSON.stringify({ pid: process.pid, host: hostname(), since: 'then', thread: threadId + 1, token: 'x' }));
      const e = await rejection(saveTable(await concurrentTable(1), dir));
      expect(e.code).toBe(ErrorCodes.FAILED_PRECONDITION);
      expect(e.message).toContain(`process ${process.pid}`);
      // this thread's own leftover (e.g. a crashed save) is stale
      await writeFile(join(dir, 'LOCK'), JSON.stringify({ pid: process.pid, host: hostname(), since: 'then', thread: threadId, token: 'x' }));
      await saveTable(await concurrentTable(2), dir);
      expect(await loadedGeneration(dir)).toBe(2);
    });
  });

  it("a save that fails deletes only what it created: never a version another writer published", async () => {
    await withTempDir(async (dir) => {
      await saveTable(await concurrentTable(1), dir);
      // Just before this save renames its temp dir to ckpt-2, a writer that bypassed the
      // lock publishes its own ckpt-2 (a copy of generation 1) and makes it live.
      setCrashHookForTesting((p) => {
        if (p !== 'dataWritten') return;
        cpSync(join(dir, 'ckpt-000000000001'), join(dir, 'ckpt-000000000002'), { recursive: true });
        writeFileSync(join(dir, 'CURRENT'), 'ckpt-000000000002\n');
      });
      const e = await rejection(saveTable(await concurrentTable(7), dir));
      expect(e.code).toBe(ErrorCodes.IO_ERROR); // the rename onto the other writer's version fails
      setCrashHookForTesting(null);
      expect(await readFile(join(dir, 'CURRENT'), 'utf8')).toBe('ckpt-000000000002\n');
      expect(await loadedGeneration(dir)).toBe(1);
      expect((await readdir(dir)).filter((n) => n.startsWith('.tmp-'))).toEqual([]);
    });
  });

  it('a reader loading while another process saves never gets a false corrupt error and follows CURRENT forward', async () => {
    const dir = join(work, 'reader');
    const saves = 400;
    let writerDone = false;
    const writer = saveLoop(dir, 1, saves).finally(() => (writerDone = true));
    const failures: string[] = [];
    const reader = async (): Promise<number[]> => {
      const seen: number[] = [];
      while (!writerDone) {
        const t = emptyConcurrentTable();
        try {
          await loadTable(t, dir);
          seen.push(await generationOf(t));
        } catch (e) {
          const code = (e as { code?: string }).code;
          // before the first save there is no checkpoint yet
          if (!(code === ErrorCodes.NOT_FOUND && seen.length === 0)) failures.push(`${code} ${(e as Error).message}`);
        }
      }
      return seen;
    };
    const readers = await Promise.all([1, 2, 3, 4].map(reader)); // four loads in flight at a time
    const lines = await writer;
    expect(lines).toEqual(Array.from({ length: saves }, (_, s) => `ok ${1000 + s}`));
    expect(failures).toEqual([]);
    for (const seen of readers) {
      expect(seen.length).toBeGreaterThan(0);
      // one writer saving generations in order: a reader never goes back
      expect(seen.every((g, i) => g >= 1000 && g < 1000 + saves && (i === 0 || g >= seen[i - 1]!))).toBe(true);
    }
    expect(await loadedGeneration(dir)).toBe(1000 + saves - 1);
  }, 240_000);
});
