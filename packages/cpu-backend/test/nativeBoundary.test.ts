import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

/**
 * Calls that once crashed the process through the native boundary (review32a). Each runs
 * in a child process (a crash would take the test runner with it) and must end normally,
 * printing the coded error (or result) it got.
 */
const require = createRequire(import.meta.url);
const paths = { core: require.resolve('@embedstack/core'), cpu: require.resolve('@embedstack/cpu-backend') };

/** Runs `body` in a child `node --expose-gc` with `core` and `cpu` loaded; returns its stdout lines. */
function child(body: string): string[] {
  const script = `
    const core = require(${JSON.stringify(paths.core)});
    const cpu = require(${JSON.stringify(paths.cpu)});
    const coded = (e) => (e instanceof core.EmbeddingError ? e.code : 'uncoded ' + (e && e.name) + ': ' + (e && e.message));
    const keysOf = (n) => new BigInt64Array(n).map((_, i) => BigInt(i));
    (async () => { ${body} })().catch((e) => { console.log('uncaught ' + coded(e)); });
  `;
  const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 120_000 });
  expect(r.signal, r.stderr).toBeNull();
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trim().split('\n');
}

describe('cpu backend: the native boundary never crashes the process', () => {
  it('importRows reads every slots element before taking a pointer (a getter that shrinks or detaches values)', () => {
    const out = child(`
      const dim = 8, n = 1 << 20;
      for (const how of ['shrink', 'detach']) {
        const raw = cpu.cpuBackend.createTable(core.resolveTableOptions({ name: 'r', dim, optimizer: core.optimizers.adagrad({ learningRate: 0.1 }) }));
        const bytes = n * dim * 4;
        const values = new Float32Array(how === 'shrink' ? new ArrayBuffer(bytes, { maxByteLength: bytes }) : bytes / 4).fill(3);
        const slot = new Float32Array(n * dim).fill(0.5);
        const slots = [];
        Object.defineProperty(slots, 0, { enumerable: true, get() {
          if (how === 'shrink') values.buffer.resize(0);
          else { structuredClone(values.buffer, { transfer: [values.buffer] }); globalThis.gc(); }
          return slot;
        } });
        try { raw.sync.importRows(keysOf(n), values, slots, null); console.log(how + ' returned'); }
        catch (e) { console.log(how + ' ' + e.code + ' ' + /values/.test(e.message)); }
        console.log('size ' + raw.size());
      }
    `);
    expect(out).toEqual(['shrink SHAPE_MISMATCH true', 'size 0', 'detach SHAPE_MISMATCH true', 'size 0']);
  }, 150_000);

  it('the shard ops read every tables element before taking the plans pointer (a getter that detaches plans)', () => {
    const out = child(`
      const b = cpu.loadAddon().binding;
      const e = cpu.encodeTable(core.resolveTableOptions({ name: 's', dim: 4 }));
      const h = b.createTable(e.config, e.slotWidths, e.slotInitial, e.initValues);
      const parts = 1 << 20;
      for (const fn of ['lookupCombinedShards', 'applyCombinedGradientsShards']) {
        const plans = new Float64Array(parts * cpu.PLAN_FIELDS);
        for (let d = 0; d < parts; d++) plans[d * cpu.PLAN_FIELDS] = 3;
        const tables = new Array(parts).fill(h);
        Object.defineProperty(tables, 1, { get() { structuredClone(plans.buffer, { transfer: [plans.buffer] }); globalThis.gc(); return h; } });
        const bag = [new Int32Array([0, 1]), new BigInt64Array(1), null];
        try {
          if (fn === 'lookupCombinedShards') b.lookupCombinedShards(tables, plans, ...bag, 0, 0, false, new Float32Array(4));
          else b.applyCombinedGradientsShards(tables, plans, ...bag, new Float32Array(4), 0, 0, new Float64Array(cpu.OPTIMIZER_FIELDS));
          console.log(fn + ' returned');
        } catch (err) { console.log(fn + ' ' + err.code + ' ' + /plans/.test(err.message)); }
      }
    `);
    expect(out).toEqual(['lookupCombinedShards SHAPE_MISMATCH true', 'applyCombinedGradientsShards SHAPE_MISMATCH true']);
  }, 150_000);
});
