import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

/**
 * The Promise forms without `out` that run on the pool (find, findOrInsert, lookupCombined;
 * cpuTable.ts and the binding's CallCopies::fresh) write their result in place: an array the
 * addon makes in JS memory when the call starts (below 32 MiB), or takes from its result
 * cache (from 32 MiB), never a private copy copied back. Each result is checked element by
 * element against values computed here, then scribbled over with NaNs and dropped, so the
 * next call's memory (the C heap's, or the cache's block) holds garbage the kernel must
 * overwrite: absent keys and empty bags included. A rejected call changes nothing. In a
 * child process with --expose-gc, so the collection (and Node's finalizer, as the event
 * loop turns) can be forced.
 */
const require = createRequire(import.meta.url);
const cpuPackage = require.resolve('@embedstack/cpu-backend');
const corePackage = require.resolve('@embedstack/core');

const script = `
const cpu = require(${JSON.stringify(cpuPackage)});
const core = require(${JSON.stringify(corePackage)});
const b = cpu.loadAddon().binding;
const DIM = 64, B = 16384; // 16384 x 64 floats: a 4 MiB result, on the pool (ASYNC_MIN_WORK)
const BIG = 131072; // 32 MiB of floats: from the result cache
const value = (k, c) => (k % 89) * 0.25 + c * 0.125 - 3;
const t = core.createTable({ dim: DIM, initCapacity: 2 * BIG, name: 'fresh' }, { backend: cpu.cpuBackend });
// keys 0, 2, 4, ... (BIG of them) are present; odd keys are absent
const present = new BigInt64Array(BIG).map((_, i) => BigInt(2 * i));
const rows = new Float32Array(BIG * DIM);
for (let i = 0; i < BIG; i++) for (let c = 0; c < DIM; c++) rows[i * DIM + c] = value(2 * i, c);
t.upsertSync(present, rows);
const turn = () => new Promise((r) => setImmediate(r));
const report = { wrong: 0, shape: 0, copied: [], hits: [], cacheRequests: [], sizes: [], rejected: [] };
const cacheRequests = () => b.info().resultCache.hits + b.info().resultCache.misses;
const copiedBytes = () => b.info().asyncCopies.bytes;
const settle = async () => { for (let k = 0; k < 20; k++) { global.gc(); await turn(); } };
// a result is an array of its own plain ArrayBuffer, exactly its bytes
const whole = (a, n) => { if (a.length !== n || a.byteOffset !== 0 || !(a.buffer instanceof ArrayBuffer) || a.buffer.byteLength !== a.byteLength) report.shape++; };
// each call checks, scribbles and drops its result in a function of its own (nothing keeps it alive)
const findRound = async (round, n) => {
  const keys = new BigInt64Array(n).map((_, i) => BigInt(round * 7 + i));
  const before = copiedBytes();
  const r = await t.find(keys);
  report.copied.push(copiedBytes() - before); // the keys' copy only
  whole(r.values, n * DIM); whole(r.exists, n);
  for (let i = 0; i < n; i++) {
    const k = round * 7 + i, has = k % 2 === 0 && k < 2 * BIG;
    if (r.exists[i] !== (has ? 1 : 0)) report.wrong++;
    for (let c = 0; c < DIM; c++) if (!Object.is(r.values[i * DIM + c], has ? Math.fround(value(k, c)) : 0)) report.wrong++;
  }
  r.values.fill(NaN); r.exists.fill(7);
};
// bag r holds r % 3 ids (every third bag empty), sum and mean
const splits = new Int32Array(B + 1), list = [];
for (let r = 0; r < B; r++) { for (let j = 0; j < r % 3; j++) list.push(BigInt(2 * ((r * 5 + j * 11) % BIG))); splits[r + 1] = list.length; }
const ids = BigInt64Array.from(list);
const bagRound = async (round) => {
  const combiner = round % 2 ? 'mean' : 'sum';
  const before = copiedBytes();
  const out = await t.lookupCombined({ rowSplits: splits, keys: ids, weights: null }, { combiner });
  report.copied.push(copiedBytes() - before); // the ids' (and splits') copies only
  whole(out, B * DIM);
  for (let r = 0; r < B; r++) {
    const n = r % 3;
    for (let c = 0; c < DIM; c++) {
      let s = 0;
      for (let j = 0; j < n; j++) s += Math.fround(value(2 * ((r * 5 + j * 11) % BIG), c));
      const want = n === 0 ? 0 : Math.fround(combiner === 'mean' ? s / n : s);
      if (!Object.is(out[r * DIM + c], want)) report.wrong++;
    }
  }
  out.fill(NaN);
};
// findOrInsert: absent (odd) keys are inserted with the initial value (zeros)
const odd = new BigInt64Array(B).map((_, i) => BigInt(2 * i + 1));
const insertRound = async (round) => {
  const r = await t.findOrInsert(odd);
  whole(r.values, B * DIM); whole(r.exists, B);
  for (let i = 0; i < B; i++) {
    if (r.exists[i] !== round) report.wrong++;
    for (let c = 0; c < DIM; c++) if (!Object.is(r.values[i * DIM + c], 0)) report.wrong++;
  }
  r.values.fill(NaN);
};
(async () => {
  report.cacheRequests.push(cacheRequests());
  for (let round = 0; round < 3; round++) { await findRound(round, B); await settle(); }
  report.cacheRequests.push(cacheRequests());
  // 32 MiB results: the result cache's blocks (the second call takes the first one's)
  for (let round = 0; round < 2; round++) {
    await findRound(round, BIG);
    report.hits.push(b.info().resultCache.hits);
    for (let k = 0; k < 200 && b.info().resultCache.heldBytes < BIG * DIM * 4; k++) { global.gc(); await turn(); }
  }
  report.cacheRequests.push(cacheRequests());
  for (let round = 0; round < 4; round++) { await bagRound(round); await settle(); }
  for (let round = 0; round < 2; round++) { await insertRound(round); report.sizes.push(t.size()); await settle(); }
  report.cacheRequests.push(cacheRequests());
  // rejected calls change nothing: keys of the wrong type to the raw table, then a disposed table
  const before = t.size();
  for (const call of [() => t.raw.async.findOrInsert(new Int32Array(B), null, null, null), () => t.raw.async.find(new Int32Array(B), null, null)]) {
    try { await call(); report.rejected.push('resolved'); } catch (e) { report.rejected.push(e.code); }
  }
  report.sizes.push(t.size() - before);
  t.dispose();
  try { await t.find(present); report.rejected.push('resolved'); } catch (e) { report.rejected.push(e.code); }
  console.log(JSON.stringify(report));
})();
`;

describe('Promise forms without out: results written in place', () => {
  it('find, lookupCombined and findOrInsert are right in recycled memory full of NaNs, with no copy of the result; rejected calls change nothing', () => {
    const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, EMBEDSTACK_CPU_RESULT_CACHE_MB: undefined } });
    expect(r.status, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout.trim()) as { wrong: number; shape: number; copied: number[]; hits: number[]; cacheRequests: number[]; sizes: number[]; rejected: string[] };
    expect(report.wrong).toBe(0);
    expect(report.shape).toBe(0);
    const B = 16384, BIG = 131072, DIM = 64;
    const splitsBytes = (B + 1) * 4, idsBytes = (B / 3) * 8; // B / 3 bags of each size 0, 1, 2: B ids
    // what was copied: the keys (ids, splits), never the 4 MiB result
    expect(report.copied.slice(0, 5)).toEqual([B * 8, B * 8, B * 8, BIG * 8, BIG * 8]);
    for (const c of report.copied.slice(5)) expect(c).toBeLessThanOrEqual(splitsBytes + idsBytes * 3);
    expect(report.copied).toHaveLength(9);
    expect(B * DIM * 4).toBeGreaterThan(splitsBytes + idsBytes * 3);
    // 4 MiB results are JS memory: no request to the result cache (the 32 MiB ones made 2 each: values, and exists is below 1 MiB)
    const q = report.cacheRequests;
    expect(q[1]! - q[0]!).toBe(0);
    expect(q[3]! - q[2]!).toBe(0);
    expect(q[2]! - q[1]!).toBe(2);
    // the second 32 MiB result took the block the first one left in the cache
    expect(report.hits[1]! - report.hits[0]!).toBe(1);
    expect(report.sizes).toEqual([BIG + B, BIG + B, 0]);
    expect(report.rejected).toEqual(['INVALID_TYPE', 'INVALID_TYPE', 'DISPOSED']);
  }, 120_000);
});
