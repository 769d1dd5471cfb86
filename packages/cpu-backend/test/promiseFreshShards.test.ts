import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

/**
 * Core's lookupCombinedShards without `out` on the CPU backend: the Promise call on the pool
 * gets the addon's fresh result (below 32 MiB an array made in JS memory as the call starts,
 * from 32 MiB a block of the result cache), written in place: no private copy of the result
 * and no copy back. Each result is checked element by element against sums computed here,
 * then scribbled over with NaNs and dropped, so the next call's memory holds garbage the
 * kernels must overwrite: empty bags included, on every path of the fused call (floorMod
 * plans: each row in bag order; range plans: the partials in shard order; with inserts). The
 * caller's `out` (full of NaNs) is written whole and returned; the small inline call gets a
 * new array too. In a child process with --expose-gc, so collections can be forced.
 */
const require = createRequire(import.meta.url);
const cpuPackage = require.resolve('@embedstack/cpu-backend');
const corePackage = require.resolve('@embedstack/core');

const script = `
const cpu = require(${JSON.stringify(cpuPackage)});
const core = require(${JSON.stringify(corePackage)});
const b = cpu.loadAddon().binding;
const DIM = 64, B = 16384; // 16384 bags x 64 floats: a 4 MiB result, on the pool
const BIG = 131072; // 32 MiB of floats: from the result cache
const KEYS = 3 * BIG; // keys 0 .. KEYS-1 are stored (value(k, c)); KEYS and above are absent
const value = (k, c) => (k % 89) * 0.25 + c * 0.125 - 3;
const valueRows = new Float32Array(89 * DIM).map((_, i) => value(Math.floor(i / DIM), i % DIM));
const report = { wrong: 0, shape: 0, copied: [], copiedOut: [], cacheRequests: [], inserted: [], notReturned: 0, checked: 0 };
const turn = () => new Promise((r) => setImmediate(r));
const settle = async () => { for (let k = 0; k < 20; k++) { global.gc(); await turn(); } };
const copiedBytes = () => b.info().asyncCopies.bytes;
const cacheRequests = () => b.info().resultCache.hits + b.info().resultCache.misses;
const whole = (a, n) => { if (a.length !== n || a.byteOffset !== 0 || !(a.buffer instanceof ArrayBuffer) || a.buffer.byteLength !== a.byteLength) report.shape++; };
const owner = (k, n, placement) => (placement === 'mod' ? k % n : Math.floor((k * n) / KEYS));
// the shard tables of one split: each holds the stored keys it owns
const split = (n, placement) => Array.from({ length: n }, (_, d) => {
  const table = core.createTable({ dim: DIM, initCapacity: KEYS, name: placement + n + '_' + d }, { backend: cpu.cpuBackend });
  const own = [];
  for (let k = 0; k < KEYS; k++) if (owner(k, n, placement) === d) own.push(BigInt(k));
  const keys = BigInt64Array.from(own);
  const rows = new Float32Array(keys.length * DIM);
  // a row depends on k % 89 only: the 89 rows computed once by value(), each stored row a copy of its own
  keys.forEach((k, i) => rows.set(valueRows.subarray(Number(k % 89n) * DIM, (Number(k % 89n) + 1) * DIM), i * DIM));
  table.upsertSync(keys, rows);
  const plan = placement === 'mod' ? { placement: 'mod', numShards: n, shard: d } : { placement: 'range', start: (d * KEYS) / n, end: ((d + 1) * KEYS) / n };
  return { table, plan };
});
// nrows bags, bag r holding r % 3 ids (every third bag empty): key(r, j) below KEYS (or absent ones, shifted by KEYS)
const bagOf = (nrows, shift) => {
  const splits = new Int32Array(nrows + 1), list = [];
  for (let r = 0; r < nrows; r++) { for (let j = 0; j < r % 3; j++) list.push(BigInt(((r * 5 + j * 11) % KEYS) + shift)); splits[r + 1] = list.length; }
  return { rowSplits: splits, keys: BigInt64Array.from(list), weights: null };
};
// sums of at most 2 values that are multiples of 1/8 (exact in float32 and float64), a mean over 1 or 2: exact in any order
const check = (out, bag, combiner, stored) => {
  const nrows = bag.rowSplits.length - 1;
  whole(out, nrows * DIM);
  for (let r = 0; r < nrows; r++) {
    const s0 = bag.rowSplits[r], n = bag.rowSplits[r + 1] - s0;
    const ks = Array.from(bag.keys.subarray(s0, s0 + n), Number); // the bag's keys read once, not once per column
    for (let c = 0; c < DIM; c++) {
      let s = 0;
      for (let j = 0; j < n; j++) s += stored ? value(ks[j], c) : 0;
      const want = n === 0 ? 0 : Math.fround(combiner === 'mean' ? s / n : s);
      if (!Object.is(out[r * DIM + c], want)) report.wrong++;
    }
  }
  report.checked++;
};
(async () => {
  const bag = bagOf(B, 0);
  const splitsBytes = (B + 1) * 4, idsBytes = bag.keys.length * 8;
  for (const [n, placement] of [[2, 'mod'], [4, 'mod'], [2, 'range'], [4, 'range']]) {
    const shards = split(n, placement);
    for (const combiner of ['sum', 'mean']) {
      // each result checked, scribbled and dropped in a function of its own
      const round = async () => {
        const before = copiedBytes(), q = cacheRequests();
        const out = await core.lookupCombinedShards(shards, bag, { combiner });
        report.copied.push(copiedBytes() - before <= splitsBytes + idsBytes); // the ids' (and splits') copies only
        report.cacheRequests.push(cacheRequests() - q); // 4 MiB: JS memory, not the cache: 0
        check(out, bag, combiner, true);
        out.fill(NaN);
      };
      for (let k = 0; k < 2; k++) { await round(); await settle(); }
      // the caller's out, full of NaNs: written whole and returned
      const given = new Float32Array(B * DIM).fill(NaN);
      const before = copiedBytes();
      const got = await core.lookupCombinedShards(shards, bag, { combiner, out: given });
      report.copiedOut.push(copiedBytes() - before >= B * DIM * 4); // the stats count a private copy of the caller's out
      if (got !== given) report.notReturned++;
      check(given, bag, combiner, true);
      // small enough to run inline (no pool): a new array all the same
      const small = bagOf(30, 0);
      check(await core.lookupCombinedShards(shards, small, { combiner }), small, combiner, true);
    }
    // inserts: absent keys get the initial value (zeros), each on its owner (mod plans only: a range plan's keys end below KEYS)
    if (placement === 'mod') {
      const absent = bagOf(B, KEYS);
      const sizes = shards.map((s) => s.table.size());
      check(await core.lookupCombinedShards(shards, absent, { combiner: 'sum', insertMissing: true }), absent, 'sum', false);
      report.inserted.push(shards.reduce((a, s, d) => a + s.table.size() - sizes[d], 0) === new Set(absent.keys).size);
      await settle();
    }
    // 32 MiB: the result cache's block, written in place (mod plans over 2 shards)
    if (placement === 'mod' && n === 2) {
      const large = bagOf(BIG, 0);
      const q = cacheRequests();
      const out = await core.lookupCombinedShards(shards, large, { combiner: 'sum' });
      report.cacheRequests.push(cacheRequests() - q); // 1
      check(out, large, 'sum', true);
      out.fill(NaN);
      await settle();
    }
    for (const s of shards) s.table.dispose();
  }
  console.log(JSON.stringify(report));
})();
`;

describe('lookupCombinedShards without out: the Promise result written in place', () => {
  it('floorMod and range plans, sum and mean, inserts and a 32 MiB result are right in recycled memory full of NaNs, with no copy of the result', () => {
    const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 240_000, env: { ...process.env, EMBEDSTACK_CPU_RESULT_CACHE_MB: undefined } });
    expect(r.status, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout.trim()) as { wrong: number; shape: number; copied: boolean[]; copiedOut: boolean[]; cacheRequests: number[]; inserted: boolean[]; notReturned: number; checked: number };
    expect(report.wrong).toBe(0);
    expect(report.shape).toBe(0);
    // 4 splits x 2 combiners x (2 fresh + out + inline) + 2 insert calls + 1 large
    expect(report.checked).toBe(4 * 2 * 4 + 2 + 1);
    expect(report.notReturned).toBe(0);
    // nothing copied beyond the ids and their row splits: never the 4 MiB result (which a caller's out is)
    expect(report.copied).toEqual(new Array(4 * 2 * 2).fill(true));
    expect(report.copiedOut).toEqual(new Array(4 * 2).fill(true));
    // the 4 MiB results are JS memory (no request to the result cache); the 32 MiB one is the cache's
    expect(report.cacheRequests).toEqual([0, 0, 0, 0, 1, ...new Array(3 * 2 * 2).fill(0)]);
    expect(report.inserted).toEqual([true, true]);
  }, 240_000);
});
