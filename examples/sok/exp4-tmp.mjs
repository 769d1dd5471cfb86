import * as sok from '@embedstack/sok';
import { RaggedTensor } from '@embedstack/core';
const ROWS = 1 << 20, DIM = 64, IDS = 26, bags = 512;
const n = Number(process.argv[2] ?? 2);
await sok.init({ numDevices: n });
const keys = BigInt64Array.from({ length: ROWS }, (_, i) => BigInt(i) * 7919n + 13n);
const splits = Int32Array.from({ length: bags + 1 }, (_, r) => r * IDS);
let s = 1;
const R = Array.from({ length: 8 }, () => RaggedTensor.fromRowSplits(BigInt64Array.from({ length: bags * IDS }, () => keys[(s = (Math.imul(s, 1664525) + 1013904223) >>> 0) % ROWS]), splits));
const v = new sok.DynamicVariable({ dimension: DIM, initializer: 'zeros', initCapacity: ROWS });
for (let b = 0; b < ROWS; b += 65536) await sok.assign(v, keys.subarray(b, b + 65536), new Float32Array(65536 * DIM).fill(0.5));
const m = async (name, fn, iters = 200) => { for (let i = 0; i < 5; i++) await fn(i); const c0 = process.cpuUsage(); const t0 = performance.now(); for (let i = 0; i < iters; i++) await fn(i); const c = process.cpuUsage(c0); return [name, Math.round((performance.now() - t0) * 1000 / iters), Math.round((c.user + c.system) / iters)]; };
console.log((await m('nd' + n, (i) => sok.lookupSparse([v], [R[i % 8]], { combiners: ['sum'] }))).join('\t'));
if (n > 1) {
  const bag = (i) => ({ rowSplits: splits, keys: R[i % 8].values, weights: null });
  console.log((await m('direct shards concurrent', (i) => Promise.all(v.shards.map((s) => s.table.lookupCombinedPartial(bag(i), { combiner: 'sum', plan: s.plan, out: new Float64Array(bags * DIM) }))))).join('\t'));
  console.log((await m('direct shard0', (i) => v.shards[0].table.lookupCombinedPartial(bag(i), { combiner: 'sum', plan: v.shards[0].plan, out: new Float64Array(bags * DIM) }))).join('\t'));
  console.log(v.shards.map((s) => s.table.size()), JSON.stringify(v.shards[0].plan), v.shards[0].table.options ?? '');
}
console.log((await m('nd' + n, (i) => sok.lookupSparse([v], [R[i % 8]], { combiners: ['sum'] }))).join('\t'));
