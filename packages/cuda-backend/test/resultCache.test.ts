import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { totalmem } from 'node:os';
import { CudaBackend, type CudaAddonLoad, type CudaBinding } from '@embedstack/cuda-backend';
import { describe, expect, it } from 'vitest';

/**
 * The CUDA addon compiles cpu-backend's result cache (memory.cc) as its own instance:
 * CudaBackend.clearResultCache() empties that one, loads nothing, and returns 0 for a
 * binding without the function. The host build of the tests (no GPU here).
 */
const require = createRequire(import.meta.url);
const cudaPackage = require.resolve('@embedstack/cuda-backend');
const cpuPackage = require.resolve('@embedstack/cpu-backend');
const corePackage = require.resolve('@embedstack/core');

// Nothing loaded yet; then one 1 MiB result of the CUDA addon (4096 bags x 64 floats,
// no `out`), dropped and collected into its cache, given back by clearResultCache().
const script = `
const cuda = require(${JSON.stringify(cudaPackage)});
const cpu = require(${JSON.stringify(cpuPackage)});
const core = require(${JSON.stringify(corePackage)});
const addons = () => Object.keys(require.cache).filter((k) => k.endsWith('.node')).length;
const report = { first: cuda.cudaHostBackend.clearResultCache(), addons: addons() };
const b = cuda.loadCudaAddon().binding;
report.addonsAfter = addons();
const e = cpu.encodeTable(core.resolveTableOptions({ kind: 'static', dim: 64, vocabularySize: 10, keyDtype: 'int32', name: 't' }));
const h = b.createTable(e.config, e.slotWidths, e.slotInitial, e.initValues, null);
const splits = new Int32Array(4097).map((_, i) => i), ids = new Int32Array(4096).map((_, i) => i % 10);
const turn = () => new Promise((r) => setImmediate(r));
(async () => {
  report.start = b.info().resultCache;
  b.lookupCombined(h, splits, ids, null, 0, 0, false);
  for (let k = 0; k < 200 && b.info().resultCache.heldBlocks === 0; k++) { global.gc(); await turn(); }
  report.filled = b.info().resultCache;
  report.cpuReleased = cpu.cpuBackend.clearResultCache(); // the CPU addon's cache: another one, never loaded here
  report.released = cuda.cudaHostBackend.clearResultCache();
  report.cleared = b.info().resultCache;
  report.again = cuda.cudaBackend.clearResultCache();
  console.log(JSON.stringify(report));
})();
`;

describe('CudaBackend.clearResultCache()', () => {
  it("empties the CUDA addon's result cache (not the CPU addon's), and loads nothing before", () => {
    const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, EMBEDSTACK_CPU_RESULT_CACHE_MB: undefined } });
    expect(r.status, r.stderr).toBe(0);
    type Stats = { capBytes: number; heldBytes: number; heldBlocks: number; hits: number; misses: number };
    const report = JSON.parse(r.stdout.trim()) as {
      first: number; addons: number; addonsAfter: number; start: Stats; filled: Stats; cpuReleased: number; released: number; cleared: Stats; again: number;
    };
    const MiB = 1024 * 1024;
    // the cache's default cap (cpu-backend memory.h): 1/16 of the machine's memory, 128 MiB to 1 GiB
    const cap = Math.min(1024 * MiB, Math.max(128 * MiB, Math.floor(totalmem() / 16)));
    expect(report.first).toBe(0);
    expect(report.addons).toBe(0);
    expect(report.addonsAfter).toBe(1);
    expect(report.start).toEqual({ capBytes: cap, heldBytes: 0, heldBlocks: 0, hits: 0, misses: 0 });
    expect(report.filled).toEqual({ capBytes: cap, heldBytes: MiB, heldBlocks: 1, hits: 0, misses: 1 });
    expect(report.cpuReleased).toBe(0);
    expect(report.released).toBe(MiB);
    expect(report.cleared).toEqual({ capBytes: cap, heldBytes: 0, heldBlocks: 0, hits: 0, misses: 1 });
    expect(report.again).toBe(0);
  }, 60_000);

  /** A custom load of `binding`, counting its calls. */
  const counted = (binding: unknown) => {
    const load = {
      calls: 0,
      fn: (): CudaAddonLoad => {
        load.calls++;
        return { binding: binding as CudaBinding, path: '/stub/embedstack_cuda.node', attempts: [], reason: null, build: 'source' };
      },
    };
    return load;
  };

  it('returns 0 without calling a custom load nothing called yet, then the binding’s bytes', () => {
    const load = counted({ clearResultCache: () => 5 * 65536, info: () => ({ threads: 1 }) });
    const backend = new CudaBackend({ mode: 'host', load: load.fn });
    expect(backend.clearResultCache()).toBe(0);
    expect(load.calls).toBe(0);
    expect(backend.isUsable()).toBe(true);
    expect(backend.clearResultCache()).toBe(5 * 65536);
  });

  it('returns 0 for a loaded addon built without clearResultCache, and for none', () => {
    const old = new CudaBackend({ mode: 'host', load: counted({ info: () => ({ threads: 1 }) }).fn });
    expect(old.isUsable()).toBe(true);
    expect(old.clearResultCache()).toBe(0);
    const none = new CudaBackend({ mode: 'host', load: () => ({ binding: null, path: null, attempts: [], reason: 'not built', build: null }) });
    expect(none.isUsable()).toBe(false);
    expect(none.clearResultCache()).toBe(0);
  });
});
