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
 * removes those of processes gone from this host, any older than the grace period, and a moved
 * lock whose acquisition file is gone.
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
  it('removeLockLeftovers removes those of gone processes of this host and orphaned moves, and keeps the rest', async () => {
    await withTempDir(async (dir) => {
      const dead = deadPid();
      const alive = process.ppid; // the process that started this one runs until we end
      const acq = (pid: number, t: number) => `LOCK.${pid}-${tag(t)}`;
      const moved = (pid: number, t: number) => `LOCK.stale-${pid}-${tag(t)}`;
      const files: [string, string, 'removed' | 'kept'][] = [
        [acq(dead, 1), holder(dead), 'removed'], // its process is gone
        [moved(dead, 1), holder(deadPid()), 'removed'], // goes with its acquisition
        [acq(dead, 2), '', 'removed'], // gone, killed between create and write
        [moved(dead, 3), holder(deadPid()), 'removed'], // no acquisition of its token: orphaned
        [moved(alive, 6), holder(alive), 'removed'], // orphaned, even with a live pid in its name
        [acq(dead, 4), holder(dead, `not-${hostname()}`), 'kept'], // another host's pid: kept while young
        [moved(dead, 4), holder(deadPid()), 'kept'], // ... and the lock it is moving
        [acq(alive, 5), holder(alive), 'kept'], // a live acquisition
        [moved(alive, 5), holder(deadPid()), 'kept'], // ... and the stale lock it is taking over
        [acq(process.pid, 8), holder(process.pid), 'kept'], // this process's, while young
        [`LOCK.${dead}-${tag(9).slice(1)}`, holder(dead), 'kept'], // not a name the lock makes (15 hex digits)
        [`${acq(dead, 10)}.x`, holder(dead), 'kept'], // not a name the lock makes
        [`OTHER.${dead}-${tag(11)}`, holder(dead), 'kept'], // another lock's
        ['LOCK', holder(dead), 'kept'], // the lock itself is not a temp file (the lock code takes it over)
      ];
      for (const [name, content] of files) await writeFile(join(dir, name), content);
      const listed = (what: 'removed' | 'kept') => files.filter((f) => f[2] === what).map((f) => f[0]);
      expect(await removeLockLeftovers(dir, 'LOCK')).toBe(listed('removed').length);
      expect((await readdir(dir)).sort()).toEqual(listed('kept').sort());
      // past the grace period every temp file of this lock goes, live or not; the others stay
      await new Promise((r) => setTimeout(r, 60));
      expect(await removeLockLeftovers(dir, 'LOCK', 20)).toBe(5);
      expect((await readdir(dir)).sort()).toEqual([`LOCK.${dead}-${tag(9).slice(1)}`, `${acq(dead, 10)}.x`, `OTHER.${dead}-${tag(11)}`, 'LOCK'].sort());
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
