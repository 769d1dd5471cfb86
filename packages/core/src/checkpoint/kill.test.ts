import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTable, saveTable } from './index.js';
import { bundleChild, runChildUntil, type ChildRun } from '../testing/child.js';
import { checkingTable, generatedTable } from '../../test/checkpoint/generatedTable.js';

/**
 * kill -9 during saves: a child process saves a big table over and over into one
 * directory; the parent SIGKILLs it at spread-out random moments and after each kill
 * loads the directory, which must hold exactly one complete generation: the last one
 * the child reported saved, or the one it was saving. The child is bundled from
 * source into a temp .mjs (bundleChild), so no prior build is needed.
 */

const ROWS = 400_000; // 16 floats + a 16-float slot per row: ~58 MB per save
const KILLS = 5;

let work: string;
let childScript: string;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'embedstack-kill-'));
  childScript = await bundleChild(new URL('../../test/checkpoint/crashChild.ts', import.meta.url), join(work, 'bin'));
});

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

type Round = ChildRun;

function startChild(dir: string, firstGen: number): Promise<Round> {
  return runChildUntil(childScript, [dir, String(ROWS), String(firstGen)], 'ready');
}

/** Kills the child after `ms` and resolves once its output is all read: 'close' (the stdio pipes drained), not 'exit', which can come before the last lines the child wrote (a "saving <g>" line still in the pipe would read as no save in progress). */
function killAfter(r: Round, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    r.child.on('close', (_code, signal) => (signal === 'SIGKILL' ? resolve() : reject(new Error(`child ended by itself (${signal}): ${r.lines.join('|')}`))));
    setTimeout(() => r.child.kill('SIGKILL'), ms);
  });
}

/** Loads dir through loadTable into a checking table; returns the single generation found. */
async function loadedGeneration(dir: string): Promise<number> {
  const c = checkingTable(ROWS);
  await loadTable(c.table, dir, { batchSize: 50_000 });
  expect(c.mismatches(), c.firstMismatch() ?? '').toBe(0);
  expect(c.seen()).toBe(ROWS);
  expect(c.generations.size).toBe(1); // never a mix of two saves
  return [...c.generations][0]!;
}

describe('kill -9 in the middle of saves', () => {
  it(`after each of ${KILLS} SIGKILLs at random moments, the checkpoint is the last completed save or the one in progress, complete`, async () => {
    const dir = join(work, 'ckpt');
    const { table, setGeneration } = generatedTable(ROWS);
    setGeneration(1);
    const t0 = performance.now();
    await saveTable(table, dir);
    const saveMs = performance.now() - t0;
    let live = 1;
    let midSave = 0;
    for (let round = 0; round < KILLS; round++) {
      const first = 100 * (round + 1);
      const r = await startChild(dir, first);
      // spread the kills over the first ~2.5 saves of each child
      const delay = ((round + Math.random()) / KILLS) * 2.5 * saveMs;
      await killAfter(r, delay);
      const saved = r.lines.filter((l) => l.startsWith('saved ')).map((l) => Number(l.slice(6)));
      const saving = r.lines.filter((l) => l.startsWith('saving ')).map((l) => Number(l.slice(7)));
      const lastSaved = saved.length > 0 ? saved[saved.length - 1]! : live;
      const inProgress = saving.length > saved.length ? saving[saving.length - 1]! : null;
      if (inProgress !== null) midSave++;
      const gen = await loadedGeneration(dir);
      const allowed = inProgress === null ? [lastSaved] : [lastSaved, inProgress];
      expect(allowed, `round ${round}: killed after ${delay.toFixed(0)} ms, log ${r.lines.join('|')}`).toContain(gen);
      live = gen;
    }
    // the kills did land inside saves (not between them)
    expect(midSave).toBeGreaterThanOrEqual(3);
    // the next save takes over the dead child's lock and removes its leftovers
    setGeneration(4000);
    await saveTable(table, dir);
    expect(await loadedGeneration(dir)).toBe(4000);
    expect((await readdir(dir)).sort()).toEqual(['CURRENT', expect.stringMatching(/^ckpt-\d{12}$/)]);
  });
});
