import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { type AddonLoad, CpuBackend, type NativeBinding } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

/**
 * The addon's result cache (native/src/memory.h, resultAllocate): a result of 1 MiB or more
 * that the addon allocated goes back to a process-wide cache when V8 collects its
 * ArrayBuffer, and the next result of a similar size reuses it. Here JS scribbles NaNs over
 * such a result, drops it, and the next call must return every element right (empty bags
 * as zeros), computed by a plain loop below. Runs in a child process with --expose-gc, so
 * the collection (and Node's finalizer, which runs as the event loop turns) can be forced.
 */
const require = createRequire(import.meta.url);
const cpuPackage = require.resolve('@embedstack/cpu-backend');
const corePackage = require.resolve('@embedstack/core');
const MiB = 1024 * 1024;
/** The cache's default cap for a machine of `physical` bytes (memory.h): 1/16 of it, at least 128 MiB and at most 1 GiB. */
const defaultCap = (physical: number): number => Math.min(1024 * MiB, Math.max(128 * MiB, Math.floor(physical / 16)));

const script = `
const cpu = require(${JSON.stringify(cpuPackage)});
const core = require(${JSON.stringify(corePackage)});
const b = cpu.loadAddon().binding;
const ROWS = 300, DIM = 64, BAGS = 4096; // 4096 x 64 floats: a 1 MiB result
const e = cpu.encodeTable(core.resolveTableOptions({ kind: 'static', dim: DIM, vocabularySize: ROWS, keyDtype: 'int32', name: 't' }));
const h = b.createTable(e.config, e.slotWidths, e.slotInitial, e.initValues);
const value = (r, c) => (r % 97) * 0.5 + c * 0.125;
const vals = new Float32Array(ROWS * DIM);
for (let r = 0; r < ROWS; r++) for (let c = 0; c < DIM; c++) vals[r * DIM + c] = value(r, c);
const idx = new Int32Array(ROWS).map((_, i) => i);
b.upsert(h, idx, vals, null);
// bag r holds r % 4 ids (every fourth bag empty)
const splits = new Int32Array(BAGS + 1), list = [];
for (let r = 0; r < BAGS; r++) { for (let k = 0; k < r % 4; k++) list.push((r * 7 + k * 13) % ROWS); splits[r + 1] = list.length; }
const ids = Int32Array.from(list);
const turn = () => new Promise((r) => setImmediate(r));
(async () => {
  const report = { wrong: 0, hits: [], calls: 0 };
  // one call, checked, then scribbled over; the result is unreachable once this returns
  const call = (combiner) => {
    const out = b.lookupCombined(h, splits, ids, null, combiner, 0, false);
    report.calls++;
    for (let r = 0; r < BAGS; r++) {
      const n = r % 4;
      for (let c = 0; c < DIM; c++) {
        let s = 0;
        for (let k = 0; k < n; k++) s += Math.fround(value((r * 7 + k * 13) % ROWS, c));
        const want = n === 0 ? 0 : Math.fround(combiner === 1 ? s / n : s);
        if (!Object.is(out[r * DIM + c], want)) report.wrong++;
      }
    }
    out.fill(NaN); // garbage in the block the next call may get
  };
  for (let round = 0; round < 4; round++) {
    call(round % 2); // 0 sum, 1 mean
    report.hits.push(b.info().resultCache.hits);
    // until Node ran the dropped result's finalizer (the block back in the cache), at most 200 turns
    for (let k = 0; k < 200 && b.info().resultCache.heldBlocks === 0; k++) { global.gc(); await turn(); }
  }
  report.cache = b.info().resultCache;
  report.physical = b.info().physicalMemory;
  console.log(JSON.stringify(report));
})();
`;

// A 1 MiB result is collected into the cache, then CpuBackend.clearResultCache() gives it back.
const clearScript = `
const cpu = require(${JSON.stringify(cpuPackage)});
const core = require(${JSON.stringify(corePackage)});
const b = cpu.loadAddon().binding;
const e = cpu.encodeTable(core.resolveTableOptions({ kind: 'static', dim: 64, vocabularySize: 10, keyDtype: 'int32', name: 't' }));
const h = b.createTable(e.config, e.slotWidths, e.slotInitial, e.initValues);
const splits = new Int32Array(4097).map((_, i) => i), ids = new Int32Array(4096).map((_, i) => i % 10);
const turn = () => new Promise((r) => setImmediate(r));
(async () => {
  const report = { start: b.info().resultCache, physical: b.info().physicalMemory };
  b.lookupCombined(h, splits, ids, null, 0, 0, false); // 4096 x 64 floats, dropped at once
  for (let k = 0; k < 200 && b.info().resultCache.heldBlocks === 0; k++) { global.gc(); await turn(); }
  report.filled = b.info().resultCache;
  report.released = cpu.cpuBackend.clearResultCache();
  report.cleared = b.info().resultCache;
  report.again = cpu.cpuBackend.clearResultCache();
  console.log(JSON.stringify(report));
})();
`;

describe('result cache', () => {
  it('a recycled result block full of NaNs never reaches the next result (empty bags are zeros)', () => {
    const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, EMBEDSTACK_CPU_RESULT_CACHE_MB: undefined } });
    expect(r.status, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout.trim()) as { wrong: number; hits: number[]; calls: number; cache: { capBytes: number; heldBytes: number }; physical: number };
    expect(report.calls).toBe(4);
    expect(report.wrong).toBe(0);
    // the blocks were recycled: calls 2 to 4 each took the block the previous result left
    expect(report.hits[3]! - report.hits[0]!).toBe(3);
    expect(report.cache.capBytes).toBe(defaultCap(report.physical));
    expect(report.cache.heldBytes).toBeLessThanOrEqual(report.cache.capBytes);
  }, 60_000);

  it('CpuBackend.clearResultCache() unmaps the idle blocks and returns their bytes', () => {
    const r = spawnSync(process.execPath, ['--expose-gc', '-e', clearScript], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, EMBEDSTACK_CPU_RESULT_CACHE_MB: undefined } });
    expect(r.status, r.stderr).toBe(0);
    type Stats = { capBytes: number; heldBytes: number; heldBlocks: number; hits: number; misses: number };
    const report = JSON.parse(r.stdout.trim()) as { start: Stats; filled: Stats; released: number; cleared: Stats; again: number; physical: number };
    const cap = defaultCap(report.physical);
    expect(report.start).toMatchObject({ heldBytes: 0, heldBlocks: 0, hits: 0, misses: 0 });
    // the one result of 4096 x 64 floats (exactly 1 MiB) mapped a block, and its collection cached it
    expect(report.filled).toMatchObject({ capBytes: cap, heldBytes: MiB, heldBlocks: 1, hits: 0, misses: 1 });
    expect(report.released).toBe(MiB);
    expect(report.cleared).toMatchObject({ capBytes: cap, heldBytes: 0, heldBlocks: 0, hits: 0, misses: 1 });
    expect(report.again).toBe(0);
  }, 60_000);

  it('EMBEDSTACK_CPU_RESULT_CACHE_MB sets the cap (0 turns the cache off); the loader refuses other values (nativeEnv.test.ts)', () => {
    const cap = (v: string): string => {
      const s = `const l = require(${JSON.stringify(cpuPackage)}).loadAddon(); console.log(l.binding ? l.binding.info().resultCache.capBytes + ' ' + l.binding.info().physicalMemory : l.reason)`;
      const r = spawnSync(process.execPath, ['-e', s], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, EMBEDSTACK_CPU_RESULT_CACHE_MB: v } });
      expect(r.status, r.stderr).toBe(0);
      return r.stdout.trim();
    };
    const capOf = (v: string): number => Number(cap(v).split(' ')[0]);
    expect(capOf('16')).toBe(16 * MiB);
    expect(capOf('0')).toBe(0);
    expect(capOf('1024')).toBe(1024 * MiB);
    // unset: the default, 1/16 of the machine's memory within [128 MiB, 1 GiB]
    const [unset, physical] = cap('').split(' ').map(Number) as [number, number];
    expect(unset).toBe(defaultCap(physical));
    expect(cap('12x')).toContain('EMBEDSTACK_CPU_RESULT_CACHE_MB="12x" is not accepted');
  }, 60_000);
});

// The shared backend's clearResultCache() before anything loaded the addon, then after
// (a .node file in require.cache: the addon was loaded).
const firstClearScript = `
const cpu = require(${JSON.stringify(cpuPackage)});
const addons = () => Object.keys(require.cache).filter((k) => k.endsWith('.node')).length;
const report = { cleared: cpu.cpuBackend.clearResultCache(), addons: addons() };
report.usable = cpu.cpuBackend.isUsable();
report.addonsAfter = addons();
report.clearedAfter = cpu.cpuBackend.clearResultCache();
console.log(JSON.stringify(report));
`;

describe('CpuBackend.clearResultCache() loads nothing and never reaches a missing function', () => {
  /** A custom load of `binding`, counting its calls. */
  const counted = (binding: unknown) => {
    const load = { calls: 0, fn: (): AddonLoad => {
      load.calls++;
      return { binding: binding as NativeBinding, path: '/stub/embedstack_cpu.node', attempts: [], reason: null, level: 'baseline', build: 'source' };
    } };
    return load;
  };

  it('returns 0 without calling a custom load that nothing called yet', () => {
    const load = counted({ clearResultCache: () => 7 });
    const backend = new CpuBackend({ load: load.fn });
    expect(backend.clearResultCache()).toBe(0);
    expect(load.calls).toBe(0);
    // once the backend loaded, the binding's own count
    expect(backend.isUsable()).toBe(true);
    expect(backend.clearResultCache()).toBe(7);
  });

  it('returns 0 for a loaded binding without clearResultCache (an addon built before it), and for no binding', () => {
    const load = counted({ info: () => ({ threads: 1 }) });
    const backend = new CpuBackend({ load: load.fn });
    expect(backend.isUsable()).toBe(true);
    expect(backend.clearResultCache()).toBe(0);
    const none = new CpuBackend({ load: () => ({ binding: null, path: null, attempts: [], reason: 'not built', level: null, build: null }) });
    expect(none.isUsable()).toBe(false);
    expect(none.clearResultCache()).toBe(0);
  });

  it('the shared backend returns 0 before the addon loaded, and does not load it', () => {
    const r = spawnSync(process.execPath, ['-e', firstClearScript], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout.trim()) as { cleared: number; addons: number; usable: boolean; addonsAfter: number; clearedAfter: number };
    expect(report).toEqual({ cleared: 0, addons: 0, usable: true, addonsAfter: 1, clearedAfter: 0 });
  }, 60_000);
});
