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
    // plain loops: a typed array's map() calls back per element, 2-4x slower at these sizes
    const keysOf = (n) => { const k = new BigInt64Array(n); for (let i = 0; i < n; i++) k[i] = BigInt(i); return k; };
    (async () => { ${body} })().catch((e) => { console.log('uncaught ' + coded(e)); });
  `;
  const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 120_000 });
  expect(r.signal, r.stderr).toBeNull();
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trim().split('\n');
}

describe('cpu backend: the native boundary never crashes the process', () => {
  it("a Promise call ignores a resizable buffer's lying `resizable` property (own value or getter) and reads its own copy", () => {
    // 2M keys at dim 8: a pooled find. The keys' buffer is shrunk right after the call.
    const out = child(`
      const dim = 8, n = 1 << 21;
      for (const mode of ['own', 'getter']) {
        const t = core.createTable({ dim }, { backend: cpu.cpuBackend });
        const ab = new ArrayBuffer(n * 8, { maxByteLength: n * 8 });
        const k = new BigInt64Array(ab);
        for (let i = 0; i < n; i++) k[i] = BigInt(i);
        const rows = new Float32Array(n * dim);
        for (let i = 0; i < rows.length; i++) rows[i] = i % 7;
        t.upsertSync(k.slice(), rows);
        let getterCalls = 0;
        if (mode === 'own') Object.defineProperty(ab, 'resizable', { value: false });
        else Object.defineProperty(ab, 'resizable', { get() { getterCalls++; ab.resize(0); return false; } });
        const p = t.find(k);
        ab.resize(0);
        try {
          const r = await p;
          let same = r.values.length === rows.length && r.exists.every((e) => e === 1);
          for (let i = 0; same && i < rows.length; i++) same = r.values[i] === rows[i];
          console.log(mode + ' resolved ' + same + ' getter calls ' + getterCalls);
        } catch (e) { console.log(mode + ' rejected ' + coded(e)); }
      }
    `);
    expect(out).toEqual(['own resolved true getter calls 0', 'getter resolved true getter calls 0']);
  }, 150_000);

  it('a Promise call whose inputs are transferred away (and freed) while it runs reads its own copies', () => {
    // 8M keys: 64 MiB of keys, above the 32 MiB at which malloc maps (and frees by unmapping) its memory.
    const out = child(`
      const dim = 4, n = 1 << 23;
      const t = core.createTable({ dim, initCapacity: 1 << 24 }, { backend: cpu.cpuBackend });
      const k = new BigInt64Array(n);
      for (let i = 0; i < n; i++) k[i] = BigInt(i * 7);
      const v = new Float32Array(n * dim);
      for (let i = 0; i < v.length; i++) v[i] = i % 5;
      const up = t.upsert(k.slice(), v);
      structuredClone(v.buffer, { transfer: [v.buffer] });
      globalThis.gc();
      await up;
      const check = t.findSync(k);
      let same = check.exists.every((e) => e === 1);
      for (let i = 0; same && i < n * dim; i++) same = check.values[i] === i % 5;
      console.log('upsert ' + same);
      const f = t.find(k);
      structuredClone(k.buffer, { transfer: [k.buffer] });
      globalThis.gc();
      const junk = Array.from({ length: 4 }, () => new Float64Array(n).fill(-1));
      const r = await f;
      same = r.exists.every((e) => e === 1);
      for (let i = 0; same && i < n * dim; i++) same = r.values[i] === i % 5;
      console.log('find ' + same + ' ' + junk.length);
    `);
    expect(out).toEqual(['upsert true', 'find true 4']);
  }, 150_000);

  it('a Promise call whose output is detached or shrunk while it runs rejects SHAPE_MISMATCH and writes nothing', () => {
    const out = child(`
      const dim = 4, n = 1 << 23;
      const t = core.createTable({ dim, initCapacity: 1 << 24 }, { backend: cpu.cpuBackend });
      const k = keysOf(n);
      t.upsertSync(k, new Float32Array(n * dim).fill(2));
      // out.values transferred away and freed; out.exists kept: it must stay unwritten
      const values = new Float32Array(n * dim);
      const exists = new Uint8Array(n);
      const f = t.find(k, { out: { values, exists } });
      structuredClone(values.buffer, { transfer: [values.buffer] });
      globalThis.gc();
      const junk = Array.from({ length: 4 }, () => new Float64Array(n).fill(-1));
      try { await f; console.log('detached resolved'); }
      catch (e) { console.log('detached ' + coded(e) + ' ' + /outValues/.test(e.message) + ' ' + exists.every((x) => x === 0) + ' ' + junk.length); }
      // out.exists in a resizable buffer shrunk to half: too short, nothing written to either
      const eb = new ArrayBuffer(n, { maxByteLength: n });
      const ex = new Uint8Array(eb);
      const vals = new Float32Array(n * dim);
      const g = t.find(k, { out: { values: vals, exists: ex } });
      eb.resize(n / 2);
      try { await g; console.log('shrunk resolved'); }
      catch (e) { console.log('shrunk ' + coded(e) + ' ' + /outExists/.test(e.message) + ' ' + vals.every((x) => x === 0) + ' ' + ex.every((x) => x === 0)); }
      // a pooled lookup's out transferred to a worker that exits
      const { Worker } = require('node:worker_threads');
      const w = new Worker('require("node:worker_threads").parentPort.once("message", () => process.exit(0))', { eval: true });
      await new Promise((resolve) => w.once('online', resolve));
      const rows = n / 4;
      const pooled = new Float32Array(rows * dim);
      const rowSplits = new Int32Array(rows + 1);
      for (let r = 0; r <= rows; r++) rowSplits[r] = 4 * r;
      const l = t.lookupCombined({ rowSplits, keys: k, weights: null }, { combiner: 'sum', out: pooled });
      w.postMessage(pooled.buffer, [pooled.buffer]);
      try { await l; console.log('posted resolved'); }
      catch (e) { console.log('posted ' + coded(e) + ' ' + /out/.test(e.message)); }
    `);
    expect(out).toEqual(['detached SHAPE_MISMATCH true true 4', 'shrunk SHAPE_MISMATCH true true true', 'posted SHAPE_MISMATCH true']);
  }, 150_000);

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
