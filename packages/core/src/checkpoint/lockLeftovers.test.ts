import { spawnSync } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { referenceBackend } from '../reference/index.js';
import { createTable } from '../table.js';
import { exportHugeCTR, loadTable, saveTable } from './index.js';
import { removeLockLeftovers } from './layout.js';
import { rowsOf, withTempDir } from '../../test/checkpoint/testUtil.js';

/**
 * The temp files of a lock acquisition (`LOCK.<pid>-<tag>`: the lock's content before it is
 * hard-linked to LOCK; `LOCK.stale-<pid>-<tag>`: a crashed writer's LOCK being taken over)
 * stay behind when their process is killed inside those few file operations (the kill -9
 * test saw `LOCK.<pid>-<tag>` of a killed child after the next save). The lock's next holder
 * removes those of processes gone from this host, and any older than the grace period.
 */

/** The id of a process that has ended (a child run to its end). */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' });
  expect(r.status).toBe(0);
  return r.pid!;
}

const tag = (n: number) => n.toString(16).padStart(16, '0');
const holder = (pid: number, host = hostname()) => JSON.stringify({ pid, host, since: new Date().toISOString(), thread: 0, token: `${pid}-${tag(7)}` });

describe('lock temp files left by killed writers', () => {
  it('removeLockLeftovers removes those of gone processes of this host and keeps the rest', async () => {
    await withTempDir(async (dir) => {
      const dead = deadPid();
      const alive = process.ppid; // the process that started this one runs until we end
      const files: Record<string, string> = {
        [`LOCK.${dead}-${tag(1)}`]: holder(dead), // gone: removed
        [`LOCK.${dead}-${tag(2)}`]: '', // gone, killed between create and write: removed
        [`LOCK.stale-${dead}-${tag(3)}`]: holder(deadPid()), // the mover is gone: removed
        [`LOCK.${dead}-${tag(4)}`]: holder(dead, `not-${hostname()}`), // another host's pid: kept while young
        [`LOCK.${alive}-${tag(5)}`]: holder(alive), // a live acquisition: kept
        [`LOCK.stale-${alive}-${tag(6)}`]: holder(dead), // a live mover: kept
        [`LOCK.${process.pid}-${tag(8)}`]: holder(process.pid), // this process's: kept while young
        [`LOCK.${dead}-${tag(9).slice(1)}`]: holder(dead), // not a name the lock makes (15 hex digits): kept
        [`LOCK.${dead}-${tag(10)}.x`]: holder(dead), // not a name the lock makes: kept
        [`OTHER.${dead}-${tag(11)}`]: holder(dead), // another lock's: kept
        LOCK: holder(dead), // the lock itself is not a temp file: kept (taken over by the lock code)
      };
      for (const [name, content] of Object.entries(files)) await writeFile(join(dir, name), content);
      const removed = [`LOCK.${dead}-${tag(1)}`, `LOCK.${dead}-${tag(2)}`, `LOCK.stale-${dead}-${tag(3)}`];
      expect(await removeLockLeftovers(dir, 'LOCK')).toBe(3);
      const kept = Object.keys(files).filter((n) => !removed.includes(n));
      expect((await readdir(dir)).sort()).toEqual(kept.sort());
      // past the grace period every temp file of this lock goes, live or not; the others stay
      expect(await removeLockLeftovers(dir, 'LOCK', 0)).toBe(4);
      expect((await readdir(dir)).sort()).toEqual([`LOCK.${dead}-${tag(10)}.x`, `LOCK.${dead}-${tag(9).slice(1)}`, 'LOCK', `OTHER.${dead}-${tag(11)}`].sort());
    });
  });

  it('saveTable removes them: the directory holds CURRENT and the new version only, which loads', async () => {
    await withTempDir(async (parent) => {
      const dir = join(parent, 'ckpt');
      const table = createTable({ dim: 2 }, { backend: referenceBackend });
      table.upsertSync(new BigInt64Array([5n, -9n]), new Float32Array([1, 2, 3, 4]));
      await saveTable(table, dir);
      const dead = deadPid();
      await writeFile(join(dir, 'LOCK'), holder(dead)); // the killed writer held the lock ...
      await writeFile(join(dir, `LOCK.${dead}-${tag(1)}`), holder(dead)); // ... or was taking it
      await writeFile(join(dir, `LOCK.stale-${deadPid()}-${tag(2)}`), holder(dead)); // or taking over a stale one
      await saveTable(table, dir);
      const names = (await readdir(dir)).sort();
      expect(names).toHaveLength(2);
      expect(names[0]).toBe('CURRENT');
      expect(names[1]).toMatch(/^ckpt-\d{12}$/);
      const loaded = createTable({ dim: 2 }, { backend: referenceBackend });
      await loadTable(loaded, dir);
      expect([...(await rowsOf(loaded)).entries()].map(([k, r]) => [k, r.values]).sort()).toEqual([
        [-9n, [3, 4]],
        [5n, [1, 2]],
      ]);
    });
  });

  it("exportHugeCTR removes those of its folder's lock", async () => {
    await withTempDir(async (parent) => {
      const table = createTable({ dim: 1 }, { backend: referenceBackend });
      table.upsertSync(new BigInt64Array([3n]), new Float32Array([0.5]));
      const dead = deadPid();
      await writeFile(join(parent, `.model.lock.${dead}-${tag(1)}`), holder(dead));
      await writeFile(join(parent, `.model.lock.stale-${dead}-${tag(2)}`), holder(dead));
      await writeFile(join(parent, `.other.lock.${dead}-${tag(3)}`), holder(dead)); // another folder's lock: kept
      await exportHugeCTR(table, join(parent, 'model'));
      expect((await readdir(parent)).sort()).toEqual([`.other.lock.${dead}-${tag(3)}`, 'model']);
    });
  });
});
