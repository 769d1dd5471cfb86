import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { applyCombinedGradientsShards, createTable, lookupCombinedShards, optimizers, RaggedTensor, resolveOptimizer, resolveShardPlan } from '@embedstack/core';
import { expectSameState, snapshot } from '@embedstack/core/testing';
import { ASYNC_MIN_WORK, cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';
import { expectSameFloats } from './fixtures/sameFloats.js';

/**
 * The Promise forms run on the native thread pool (not the libuv pool) and settle
 * through one thread-safe function per environment. These tests pin what that path
 * must keep: the same values as the sync forms, nothing changed by a rejected call,
 * a pending promise holding the process open (and an idle addon not), and workers
 * that end with calls in flight.
 */
const DIM = 16;
const BATCH = Math.ceil(ASYNC_MIN_WORK / DIM) + 64; // large enough to go to the pool
const require = createRequire(import.meta.url);
const paths = { core: require.resolve('@embedstack/core'), cpu: require.resolve('@embedstack/cpu-backend') };

/** Row j of key k, as the test writes it (independent of the table). */
const rowValue = (k: number, j: number): number => (k % 1000) * 0.5 + j;

function keysFrom(start: number, n: number): BigInt64Array {
  return new BigInt64Array(n).map((_, i) => BigInt(start + i));
}

function rowsFor(start: number, n: number, shift = 0): Float32Array {
  const v = new Float32Array(n * DIM);
  for (let i = 0; i < n; i++) for (let j = 0; j < DIM; j++) v[i * DIM + j] = rowValue(start + i, j) + shift;
  return v;
}

describe('cpu backend: the Promise path', () => {
  it('concurrent Promise finds and writes give the values the sync forms and the model give', async () => {
    const t = createTable({ dim: DIM, initCapacity: 4 * BATCH }, { backend: cpuBackend });
    const fixed = keysFrom(0, BATCH);
    t.upsertSync(fixed, rowsFor(0, BATCH));
    // Writers on disjoint ranges, readers of the fixed range, all in flight at once.
    const writes = [1, 2, 3].map((w) => t.upsert(keysFrom(w * 1_000_000, BATCH), rowsFor(w * 1_000_000, BATCH, w)));
    const reads = Array.from({ length: 6 }, () => t.find(fixed));
    const [found] = await Promise.all([Promise.all(reads), Promise.all(writes)]);
    const expected = rowsFor(0, BATCH);
    for (const r of found) {
      expect(r.exists.every((e) => e === 1)).toBe(true);
      expectSameFloats(r.values, expected);
    }
    for (const w of [1, 2, 3]) {
      const keys = keysFrom(w * 1_000_000, BATCH);
      const viaPromise = await t.find(keys);
      const viaSync = t.findSync(keys);
      expectSameFloats(viaPromise.values, rowsFor(w * 1_000_000, BATCH, w));
      expectSameFloats(viaPromise.values, viaSync.values);
    }
    // Missing keys: the initial value (zeros by default), exists 0, as findSync.
    const missing = keysFrom(50_000_000, BATCH);
    const m = await t.find(missing, { out: { values: new Float32Array(BATCH * DIM).fill(7), exists: new Uint8Array(BATCH).fill(1) } });
    expect(m.exists.every((e) => e === 0)).toBe(true);
    expect(m.values.every((x) => x === 0)).toBe(true);
    expect(t.size()).toBe(4 * BATCH);
    t.dispose();
  });

  it('lookupCombinedShards on the pool: a floorMod split pools each row in bag order, as the whole table\'s bag (bit for bit); the partials in shard order agree; applyCombinedGradientsShards trains each key as the whole table does', async () => {
    const rows = 1200;
    const perRow = 26; // 31,200 ids: async, the shards in parallel, the sum split over the pool
    const keys = new BigInt64Array(rows * perRow).map((_, i) => BigInt(((i * 7919) % 5000) - 2500));
    const splits = Int32Array.from({ length: rows + 1 }, (_, r) => r * perRow);
    const weights = new Float32Array(keys.length).map((_, i) => ((i * 13) % 7) / 4 - 0.5);
    const bag = RaggedTensor.fromRowSplits(keys, splits);
    const w = RaggedTensor.fromRowSplits(weights, splits);
    const whole = createTable({ dim: DIM }, { backend: cpuBackend });
    const fill = keysFrom(-2500, 4000);
    const fillRows = rowsFor(-2500, 4000, 0.25);
    whole.upsertSync(fill, fillRows);
    // One SGD step of the whole table: the rows each shard's keys must reach (same entries, same order per key).
    const sgd = optimizers.sgd({ learningRate: 0.5 });
    const grads = new Float32Array(rows * DIM).map((_, i) => ((i * 31) % 17) / 8 - 1);
    const trained = createTable({ dim: DIM }, { backend: cpuBackend });
    trained.upsertSync(fill, fillRows);
    await trained.applyCombinedGradients(bag, grads, sgd, 1, { combiner: 'mean', weights: w });
    const want = trained.findSync(fill).values;
    for (const n of [2, 4]) {
      const shards = Array.from({ length: n }, (_, d) => {
        const table = createTable({ dim: DIM }, { backend: cpuBackend });
        const own = fill.filter((k) => ((Number(k) % n) + n) % n === d);
        const at = Array.from(own, (k) => Number(k) + 2500);
        const vals = new Float32Array(own.length * DIM);
        at.forEach((a, i) => vals.set(fillRows.subarray(a * DIM, (a + 1) * DIM), i * DIM));
        table.upsertSync(own, vals);
        return { table, plan: { placement: 'mod' as const, numShards: n, shard: d } };
      });
      for (const combiner of ['sum', 'mean'] as const) {
        const o = { combiner, weights: w };
        const partials = await Promise.all(shards.map((s) => s.table.lookupCombinedPartial(bag, { ...o, plan: s.plan })));
        const expected = new Float32Array(rows * DIM);
        for (let i = 0; i < expected.length; i++) {
          let acc = partials[0]![i]!;
          for (let d = 1; d < n; d++) acc += partials[d]![i]!;
          expected[i] = acc;
        }
        const got = await lookupCombinedShards(shards, bag, o);
        const one = await whole.lookupCombined(bag, o);
        expectSameFloats(got, one, `${n} shards vs one table, ${combiner}`);
        let worst = 0;
        for (let i = 0; i < one.length; i++) worst = Math.max(worst, Math.abs(expected[i]! - got[i]!));
        expect(worst, `${n} shards vs the partials in shard order, ${combiner}`).toBeLessThan(1e-4);
      }
      // insertMissing: the keys -2600..-2501 are on no shard yet; each lands on its owner only.
      const fresh = RaggedTensor.fromRowSplits(keysFrom(-2600, 100 * perRow).map((k) => -2600n + (k + 2600n) % 100n), Int32Array.from({ length: 101 }, (_, r) => r * perRow));
      const sizes = shards.map((s) => s.table.size());
      await lookupCombinedShards(shards, fresh, { combiner: 'sum', insertMissing: true });
      expect(shards.map((s, d) => s.table.size() - sizes[d]!)).toEqual(shards.map(() => 100 / n));
      // The fused step: an SGD step that fits every table but the last (Adagrad's slots) is
      // refused by the addon before any shard changes, not as it reaches the last table.
      const odd = createTable({ dim: DIM, optimizer: optimizers.adagrad() }, { backend: cpuBackend });
      const oddParts = shards.map((s, d) => {
        const table = d === n - 1 ? odd : s.table;
        return { table, raw: table.raw, plan: resolveShardPlan(s.plan, table.options) };
      });
      const before = await Promise.all(oddParts.map((p) => snapshot(p.table)));
      const raw = { rowSplits: splits, keys, weights };
      const rawSgd = resolveOptimizer(sgd, 1);
      await expect(shards[0]!.table.raw.applyCombinedGradientsShards!(oddParts, raw, grads, 'mean', 0, rawSgd)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      const after = await Promise.all(oddParts.map((p) => snapshot(p.table)));
      after.forEach((a, d) => expectSameState(a, before[d]!, `shard ${d} after a refused fused step`, true));
      odd.dispose();
      // Each shard inserts only the missing keys it owns (1500..2499 are on no shard yet).
      const owned = shards.map(() => new Set<bigint>());
      for (const k of keys) if (k >= 1500n) owned[((Number(k) % n) + n) % n]!.add(k);
      const sizesBefore = shards.map((s) => s.table.size());
      await applyCombinedGradientsShards(shards, bag, grads, sgd, 1, { combiner: 'mean', weights: w });
      expect(shards.map((s, d) => s.table.size() - sizesBefore[d]!), 'rows each shard gained').toEqual(owned.map((o) => o.size));
      const got = new Float32Array(fill.length * DIM);
      fill.forEach((k, i) => got.set(shards[((Number(k) % n) + n) % n]!.table.findSync([k]).values, i * DIM));
      expectSameFloats(got, want, `${n} shards trained by one call vs the whole table`);
      for (const s of shards) s.table.dispose();
    }
    whole.dispose();
    trained.dispose();
  });

  it('a Promise bag pools by its row splits as they were at call time, whatever the caller writes into them meanwhile', async () => {
    const vocab = 1 << 14;
    const rows = 1 << 16;
    const perRow = 4; // 262,144 ids: a pool job of several milliseconds
    const t = createTable({ dim: DIM, initCapacity: vocab }, { backend: cpuBackend });
    t.upsertSync(keysFrom(0, vocab), rowsFor(0, vocab));
    const ids = Array.from({ length: rows * perRow }, (_, i) => (i * 7919) % vocab);
    const keys = BigInt64Array.from(ids, BigInt);
    const splits = Int32Array.from({ length: rows + 1 }, (_, r) => r * perRow);
    for (const combiner of ['sum', 'mean'] as const) {
      splits.forEach((_, r) => (splits[r] = r * perRow));
      const pending = t.lookupCombined({ rowSplits: splits, keys, weights: null }, { combiner });
      splits.fill(0); // every bag empty, had the job read the caller's array
      const got = await pending;
      // every partial sum is a multiple of 0.5 below 2^12: exact in float32, whatever the order
      const expected = new Float32Array(rows * DIM);
      for (let r = 0; r < rows; r++) {
        for (let j = 0; j < DIM; j++) {
          let acc = 0;
          for (let i = r * perRow; i < (r + 1) * perRow; i++) acc += rowValue(ids[i]!, j);
          expected[r * DIM + j] = combiner === 'sum' ? acc : acc / perRow;
        }
      }
      expect(got.length).toBe(expected.length);
      let differ = 0;
      for (let i = 0; i < got.length; i++) if (got[i] !== expected[i]) differ++;
      expect(differ, `${combiner}: values that differ from the bags at call time`).toBe(0);
    }
    t.dispose();
  });

  it('a Promise find or write rejected on bad input changes nothing', async () => {
    const t = createTable({ dim: DIM, scorePolicy: 'lru' }, { backend: cpuBackend });
    const keys = keysFrom(10, BATCH);
    t.upsertSync(keys, rowsFor(10, BATCH));
    const before = await snapshot(t);
    // Caught by the addon's own checks (the raw async form skips core's validation).
    const badOut = { values: new Float32Array(3), exists: new Uint8Array(BATCH) };
    await expect(t.raw.async.find(keys, badOut, null)).rejects.toMatchObject({ code: 'SHAPE_MISMATCH' });
    await expect(t.raw.async.upsert(keys, new Float32Array(5), null)).rejects.toMatchObject({ code: 'SHAPE_MISMATCH' });
    await expect(t.raw.async.findOrInsert(keysFrom(9_000_000, BATCH), null, badOut, null)).rejects.toMatchObject({ code: 'SHAPE_MISMATCH' });
    // And by core's.
    await expect(t.find(keys, { out: { values: new Float32Array(BATCH * DIM + 1) } })).rejects.toMatchObject({ code: 'SHAPE_MISMATCH' });
    await expect(t.find(new Float64Array(BATCH) as unknown as BigInt64Array)).rejects.toMatchObject({ code: 'INVALID_TYPE' });
    const after = await snapshot(t);
    // Scores included: a rejected find must not have touched them either.
    expectSameState(after, before, 'after rejected Promise calls', true);
    t.dispose();
  });

  it('a pending Promise holds the process open until it settles; an idle addon does not', () => {
    const script = `
      const { createTable } = require(${JSON.stringify(paths.core)});
      const { cpuBackend } = require(${JSON.stringify(paths.cpu)});
      const t = createTable({ dim: ${DIM} }, { backend: cpuBackend });
      const n = ${BATCH};
      const keys = new BigInt64Array(n).map((_, i) => BigInt(i));
      const values = new Float32Array(n * ${DIM}).map((_, i) => i % 13);
      t.upsert(keys, values).then(() => t.find(keys)).then((r) => {
        let sum = 0;
        for (let i = 0; i < r.values.length; i++) sum += r.values[i];
        console.log('resolved ' + sum);
      });
    `;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    let sum = 0;
    for (let i = 0; i < BATCH * DIM; i++) sum += i % 13;
    expect(r.stdout.trim()).toBe(`resolved ${sum}`);
  }, 90_000);

  it('a resizable buffer shrunk while a Promise call reads or fills it does not crash the process', () => {
    // A resizable ArrayBuffer gives its pages back when it shrinks: a pool job still
    // reading or writing them would fault (a Promise call's job uses copies of its arrays).
    // Each call below is shrunk right after it starts.
    const script = `
      const { createTable } = require(${JSON.stringify(paths.core)});
      const { cpuBackend } = require(${JSON.stringify(paths.cpu)});
      const D = ${DIM}, N = ${4 * BATCH};
      const t = createTable({ dim: D }, { backend: cpuBackend });
      const resizable = (bytes) => new ArrayBuffer(bytes, { maxByteLength: bytes });
      const keys = new BigInt64Array(N).map((_, i) => BigInt(i));
      const row = (k, j) => (k % 1000) * 0.5 + j;
      const sumOf = (a) => { let s = 0; for (let i = 0; i < a.length; i++) s += a[i]; return s; };
      (async () => {
        const results = [];
        for (let it = 0; it < 8; it++) {
          // upsert from resizable values
          const vb = resizable(N * D * 4);
          const values = new Float32Array(vb);
          for (let i = 0; i < N; i++) for (let j = 0; j < D; j++) values[i * D + j] = row(i, j);
          const up = t.upsert(keys, values);
          vb.resize(0);
          await up;
          // find of resizable keys
          const kb = resizable(N * 8);
          const k = new BigInt64Array(kb);
          k.set(keys);
          const f = t.find(k);
          kb.resize(0);
          results.push(sumOf((await f).values));
          // find into a resizable out
          const ob = resizable(N * D * 4);
          const out = new Float32Array(ob);
          const g = t.find(keys, { out: { values: out, exists: new Uint8Array(N) } });
          ob.resize(0);
          results.push(await g.then(() => 'resolved', (e) => e.code));
          // a pooled lookup into a resizable out
          const bb = resizable((N / 4) * D * 4);
          const pooled = new Float32Array(bb);
          const splits = new Int32Array(N / 4 + 1).map((_, r) => 4 * r);
          const l = t.lookupCombined({ rowSplits: splits, keys, weights: null }, { combiner: 'sum', out: pooled });
          bb.resize(0);
          results.push(await l.then(() => 'resolved', (e) => e.code));
          // a pooled lookup of resizable row splits
          const sb = resizable((N / 4 + 1) * 4);
          const shrunk = new Int32Array(sb);
          shrunk.set(splits);
          const p = t.lookupCombined({ rowSplits: shrunk, keys, weights: null }, { combiner: 'sum' });
          sb.resize(0);
          results.push(sumOf(await p));
        }
        console.log('done ' + results.join(','));
      })().catch((e) => { console.error(e); process.exit(2); });
    `;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 90_000 });
    expect(r.signal, r.stderr).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    let sum = 0;
    for (let i = 0; i < 4 * BATCH; i++) for (let j = 0; j < DIM; j++) sum += Math.fround(rowValue(i, j));
    // Inputs are read from the call's copies; an output shrunk under the call is not written (SHAPE_MISMATCH).
    expect(r.stdout.trim()).toBe(`done ${Array(8).fill([sum, 'SHAPE_MISMATCH', 'SHAPE_MISMATCH', sum].join(',')).join(',')}`);
  }, 120_000);

  it('workers ended with Promise calls in flight leave the process working (the addon stays mapped)', () => {
    const script = `
      const { Worker } = require('node:worker_threads');
      const body = \`
        const { parentPort } = require('node:worker_threads');
        const { createTable } = require(${JSON.stringify(JSON.stringify(paths.core)).slice(1, -1)});
        const { cpuBackend, cpuLevel } = require(${JSON.stringify(JSON.stringify(paths.cpu)).slice(1, -1)});
        const t = createTable({ dim: ${DIM} }, { backend: cpuBackend });
        const keys = new BigInt64Array(${BATCH}).map((_, i) => BigInt(i));
        t.upsertSync(keys, new Float32Array(${BATCH * DIM}).fill(2));
        let calls = 0;
        const loop = () => t.find(keys).then((r) => { calls++; if (r.values[0] !== 2) throw new Error('bad value'); if (calls === 3) parentPort.postMessage(cpuLevel().path); loop(); });
        for (let i = 0; i < 4; i++) loop();
      \`;
      let ended = 0;
      const started = [];
      const loaded = new Set(); // the addon file each worker loaded
      for (let w = 0; w < 3; w++) {
        const worker = new Worker(body, { eval: true });
        worker.on('error', (e) => { console.error(e); process.exit(3); });
        started.push(new Promise((res) => worker.once('message', (path) => { loaded.add(require('node:fs').realpathSync(path)); worker.terminate().then(() => { ended++; res(); }); })));
      }
      Promise.all(started).then(() => {
        // Node dlcloses an addon when the last environment that loaded it ends; the
        // addon's process-wide pool must keep its code mapped (-z nodelete), or its
        // threads crash the process. Only the workers loaded it: is it still mapped?
        const maps = require('node:fs').readFileSync('/proc/self/maps', 'utf8');
        const lines = maps.split('\\n');
        const mapped = loaded.size > 0 && [...loaded].every((f) => lines.some((l) => l.endsWith(' ' + f)));
        console.log('mapped ' + mapped);
        const { createTable } = require(${JSON.stringify(paths.core)});
        const { cpuBackend } = require(${JSON.stringify(paths.cpu)});
        const t = createTable({ dim: 4 }, { backend: cpuBackend });
        const keys = new BigInt64Array(${ASYNC_MIN_WORK}).map((_, i) => BigInt(i));
        return t.upsert(keys, new Float32Array(${ASYNC_MIN_WORK * 4}).fill(5)).then(() => t.find(keys)).then((r) => {
          console.log('ended ' + ended + ' value ' + r.values[${ASYNC_MIN_WORK * 4 - 1}]);
        });
      });
    `;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 90_000 });
    expect(r.signal, r.stderr).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('mapped true\nended 3 value 5');
  }, 120_000);
});
