import { describe, expect, it } from 'vitest';
import type { Combiner } from '../../combiners.js';
import type { KeyDtype } from '../../dtypes.js';
import { initializers } from '../../initializers.js';
import { type OptimizerSpec, optimizers } from '../../optimizers.js';
import { RaggedTensor } from '../../sparse.js';
import { referenceBackend } from '../../reference/backend.js';
import type { EmbeddingTable } from '../../table.js';
import { expectClose, expectRejected, type Form, INT64_MAX, INT64_MIN, type Ops, opsFor, type SuiteContext } from '../harness.js';
import {
  DIM,
  denominator,
  entryGradient,
  INIT,
  type Placement,
  placeKey,
  planFor,
  pooled,
  rowOf,
  summedGradients,
} from './shardModel.js';

interface Case {
  kind: 'dynamic' | 'static';
  placement: Placement;
  keyDtype: KeyDtype;
  /** Shards (1 for localized). */
  n: number;
  /** range: shard d holds [starts[d], starts[d + 1]). */
  starts: number[];
  /** Global keys written to their shards. */
  written: bigint[];
  /** Global keys never written (their initial value is read). */
  missing: bigint[];
  /** static: global rows. */
  rows: number;
}

const CASES: Case[] = [
  {
    kind: 'dynamic',
    placement: 'mod',
    keyDtype: 'int64',
    n: 3,
    starts: [],
    written: [-7n, -1n, 0n, 1n, 2n, 5n, 8n, (1n << 40n) + 1n, INT64_MIN, INT64_MAX, 1000003n],
    missing: [11n, -13n],
    rows: 0,
  },
  { kind: 'dynamic', placement: 'mod', keyDtype: 'int32', n: 4, starts: [], written: [-9n, -6n, -5n, -1n, 0n, 3n, 7n, 2147483647n, -2147483648n], missing: [6n, -2n], rows: 0 },
  { kind: 'dynamic', placement: 'range', keyDtype: 'int64', n: 3, starts: [-1000, 0, 10, 2000000], written: [-999n, -1n, 0n, 9n, 10n, 1999999n], missing: [5n], rows: 0 },
  { kind: 'dynamic', placement: 'localized', keyDtype: 'int64', n: 1, starts: [], written: [-3n, 0n, 4n, INT64_MIN], missing: [7n], rows: 0 },
  { kind: 'static', placement: 'mod', keyDtype: 'int64', n: 3, starts: [], written: [0n, 1n, 2n, 3n, 5n, 6n, 7n, 8n], missing: [4n, 9n], rows: 10 },
  { kind: 'static', placement: 'range', keyDtype: 'int32', n: 3, starts: [0, 4, 7, 10], written: [0n, 1n, 2n, 3n, 5n, 6n, 7n, 8n], missing: [4n, 9n], rows: 10 },
];

interface Sharded {
  c: Case;
  tables: EmbeddingTable[];
  plans: ReturnType<typeof planFor>[];
  /** The value a global key reads. */
  value: (k: bigint) => number[];
  place: (k: bigint) => { shard: number; local: bigint };
  keys: (ks: bigint[]) => bigint[] | number[];
}

/** Shard d's table of a case (on `backend`, default the suite's), holding its written keys. */
async function shardTable(ctx: SuiteContext, ops: Ops, c: Case, d: number, backend = ctx.backend, optimizer: OptimizerSpec = optimizers.sgd({ learningRate: 1 })): Promise<EmbeddingTable> {
  const roundRobin = c.kind === 'static' && c.placement === 'mod';
  let vocab = 0;
  if (c.kind === 'static') vocab = c.placement === 'range' ? c.starts[d + 1]! - c.starts[d]! : Math.ceil((c.rows - d) / c.n);
  const t =
    c.kind === 'static'
      ? ctx.make({ kind: 'static', dim: DIM, vocabularySize: vocab, keyDtype: c.keyDtype, initializer: initializers.row(INIT), optimizer }, backend)
      : ctx.make({ dim: DIM, keyDtype: c.keyDtype, initializer: initializers.row(INIT), optimizer }, backend);
  for (const k of c.written) {
    const p = placeKey(k, c.placement, c.n, c.starts, roundRobin);
    if (p.shard === d) await ops.upsert(t, c.keyDtype === 'int64' ? [p.local] : [Number(p.local)], rowOf(k));
  }
  return t;
}

async function build(ctx: SuiteContext, ops: Ops, c: Case): Promise<Sharded> {
  const roundRobin = c.kind === 'static' && c.placement === 'mod';
  const place = (k: bigint) => placeKey(k, c.placement, c.n, c.starts, roundRobin);
  const keys = (ks: bigint[]) => (c.keyDtype === 'int64' ? ks : ks.map(Number));
  const tables: EmbeddingTable[] = [];
  for (let d = 0; d < c.n; d++) tables.push(await shardTable(ctx, ops, c, d));
  const written = new Set(c.written.map(String));
  return {
    c,
    tables,
    plans: tables.map((_, d) => planFor(c.placement, c.n, d, c.starts)),
    value: (k) => (written.has(String(k)) ? rowOf(k) : INIT),
    place,
    keys,
  };
}

/** A bag over the case's keys: duplicates, an empty row, a missing key, a row whose weights sum to 0. */
function bagOf(c: Case): { ids: bigint[][]; weights: number[][] } {
  const w = c.written;
  const at = (i: number) => w[i % w.length]!;
  const ids = [[at(0), at(1), at(0)], [], [c.missing[0]!, at(2), at(3), at(4)], [at(5)], [at(6), at(7)], [at(2), c.missing[0]!]];
  const weights = [[0.5, 2, 1.5], [], [1, -0.25, 3, 0.75], [4], [1, -1], [2, 0.5]];
  return { ids, weights };
}

function ragged(c: Case, rows: bigint[][], dtype: 'ids' | 'weights', weights?: number[][]) {
  if (dtype === 'weights') return RaggedTensor.fromNestedArray(weights!, { dtype: 'float32' });
  const splits = [0];
  for (const r of rows) splits.push(splits[splits.length - 1]! + r.length);
  const flat = rows.flat();
  const values = c.keyDtype === 'int64' ? BigInt64Array.from(flat) : Int32Array.from(flat, Number);
  return RaggedTensor.fromRowSplits(values, Int32Array.from(splits));
}

/** A value lookupCombinedShards may give under core's contract (rawTable.ts), computed by the test's model. */
interface Candidate {
  name: string;
  values: Float32Array;
}

/**
 * The values core's contract allows a lookupCombinedShards call of case `s` to give, from
 * the test's model (pooled, not from any backend): the shards' float64 partials added
 * in shard order and rounded once; and, when `bagOrder` (a backend's own fused call over
 * 'mod' plans, every key of the bag with one owner), each row's entries in bag
 * order as one table holding every row computes it, rounded once.
 */
function shardCandidates(s: Sharded, ids: bigint[][], weights: number[][] | null, combiner: Combiner, maxNorm: number, bagOrder: boolean): Candidate[] {
  const partials = s.tables.map((_, d) => pooled(ids, weights, combiner, maxNorm, s.value, (r, j) => s.place(ids[r]![j]!).shard === d));
  const shardOrder = new Float32Array(ids.length * DIM);
  for (let i = 0; i < shardOrder.length; i++) {
    // A partial is ADDED into a zeroed float64 array (rawTable.ts): 0 + x, so a -0 share is +0.
    let acc = 0 + partials[0]![i]!;
    for (let d = 1; d < partials.length; d++) acc += 0 + partials[d]![i]!;
    shardOrder[i] = acc;
  }
  const out: Candidate[] = [{ name: 'the partials added in shard order', values: shardOrder }];
  if (bagOrder) out.push({ name: 'bag order (one table holding every row)', values: Float32Array.from(pooled(ids, weights, combiner, maxNorm, s.value)) });
  return out;
}

/**
 * Whether a lookupCombinedShards call over case `s`'s shards may pool in bag order: only a
 * backend's own fused call (the promise form, on a table with a `lookupCombinedShards`;
 * otherwise core adds the partials in shard order) over 'mod' plans, where every key has
 * exactly one owner.
 */
function bagOrderAllowed(s: Sharded, form: Form): boolean {
  return form === 'promise' && s.c.placement === 'mod' && typeof s.tables[0]!.raw.lookupCombinedShards === 'function';
}

/** `got` equals one of the candidates bit for bit, as a whole (NaN matching any NaN). */
function expectShardSum(got: Float32Array, candidates: readonly Candidate[], label: string): void {
  const same = (a: number, b: number) => Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));
  if (candidates.some((k) => k.values.length === got.length && got.every((g, i) => same(g, k.values[i]!)))) return;
  const report = candidates.map((k) => {
    const bad: string[] = [];
    for (let i = 0; i < got.length && bad.length < 4; i++) if (!same(got[i]!, k.values[i]!)) bad.push(`[${i}] ${got[i]} vs ${k.values[i]}`);
    return `${k.name}: ${bad.join(', ')}`;
  });
  expect(report, `${label}: the values are none of the allowed results exactly`).toEqual([]);
}

/** Shard plans: find, findOrInsert, the partial bag, the backward and training on N shards against the test's model. */
export function shardPlansSection(ctx: SuiteContext): void {
  for (const form of ctx.forms) {
    const ops = opsFor(form);
    for (const c of CASES) {
      describe(`${c.kind} ${c.keyDtype} tables sharded by '${c.placement}' over ${c.n}, ${form} form`, () => {
        it('find with a plan writes only the owned entries; together the shards read every key', async () => {
          const s = await build(ctx, ops, c);
          const all = [...c.written, ...c.missing, c.written[0]!];
          const values = new Float32Array(all.length * DIM).fill(99);
          const exists = new Uint8Array(all.length).fill(7);
          for (let d = 0; d < c.n; d++) {
            const before = Array.from(values);
            await ops.find(s.tables[d]!, s.keys(all), { plan: s.plans[d]!, out: { values, exists } });
            all.forEach((k, i) => {
              const mine = s.place(k).shard === d;
              const got = Array.from(values.subarray(i * DIM, (i + 1) * DIM));
              expect(got, `key ${k} after shard ${d}`).toEqual(mine ? s.value(k) : before.slice(i * DIM, (i + 1) * DIM));
            });
          }
          const missing = new Set(c.missing.map(String));
          expect(Array.from(exists)).toEqual(all.map((k) => (c.kind === 'static' || !missing.has(String(k)) ? 1 : 0)));
          // Without `out`, a planned find returns zeros and exists 0 for entries other shards own.
          if (c.n > 1) {
            const r = await ops.find(s.tables[0]!, s.keys(all), { plan: s.plans[0]! });
            all.forEach((k, i) => {
              if (s.place(k).shard !== 0) expect(Array.from(r.values.subarray(i * DIM, (i + 1) * DIM))).toEqual([0, 0, 0]);
            });
          }
        });

        if (c.kind === 'dynamic') {
          it('findOrInsert with a plan inserts only owned missing keys', async () => {
            const s = await build(ctx, ops, c);
            const sizes = s.tables.map((t) => t.size());
            for (let d = 0; d < c.n; d++) await ops.findOrInsert(s.tables[d]!, s.keys([...c.missing, ...c.missing]), { plan: s.plans[d]! });
            const added = s.tables.map((t, d) => t.size() - sizes[d]!);
            expect(added).toEqual(s.tables.map((_, d) => c.missing.filter((k) => s.place(k).shard === d).length));
          });
        }

        for (const combiner of ['sum', 'mean', 'sqrtn'] as Combiner[]) {
          it(`${combiner}: the shards' partial bags add up to the whole bag; each is its owned entries over the whole denominator`, async () => {
            const s = await build(ctx, ops, c);
            const { ids, weights } = bagOf(c);
            for (const [w, maxNorm] of [[null, 0], [weights, 0], [weights, 4.5]] as const) {
              const o = { combiner, maxNorm: maxNorm || null, weights: w ? ragged(c, ids, 'weights', w) : undefined };
              const total = new Float64Array(ids.length * DIM);
              for (let d = 0; d < c.n; d++) {
                const part = await ops.lookupCombinedPartial(s.tables[d]!, ragged(c, ids, 'ids'), { ...o, plan: s.plans[d]! });
                const mine = pooled(ids, w ? [...w] : null, combiner, maxNorm, s.value, (r, j) => s.place(ids[r]![j]!).shard === d);
                expectClose(part, mine, `shard ${d} partial (weights ${w !== null}, maxNorm ${maxNorm})`, 1e-12, 1e-12);
                await ops.lookupCombinedPartial(s.tables[d]!, ragged(c, ids, 'ids'), { ...o, plan: s.plans[d]!, out: total });
              }
              const rounded = new Float32Array(total.length);
              rounded.set(total);
              expectClose(rounded, pooled(ids, w ? [...w] : null, combiner, maxNorm, s.value), `sum of partials (weights ${w !== null}, maxNorm ${maxNorm})`, 1e-6, 1e-7);
            }
          });
        }

        for (const combiner of ['sum', 'mean', 'sqrtn'] as Combiner[]) {
          it(`${combiner}: lookupCombinedShards is the shards' partials added (in shard order, or each row's entries in bag order) and rounded once, in one call`, async () => {
            const s = await build(ctx, ops, c);
            const { ids, weights } = bagOf(c);
            const shards = s.tables.map((table, d) => ({ table, plan: s.plans[d]! }));
            for (const [w, maxNorm] of [[null, 0], [weights, 0], [weights, 4.5]] as const) {
              const o = { combiner, maxNorm: maxNorm || null, weights: w ? ragged(c, ids, 'weights', w) : undefined };
              const got = await ops.lookupCombinedShards(shards, ragged(c, ids, 'ids'), o);
              expectShardSum(got, shardCandidates(s, ids, w ? [...w] : null, combiner, maxNorm, bagOrderAllowed(s, form)), `weights ${w !== null}, maxNorm ${maxNorm}`);
              expectClose(got, pooled(ids, w ? [...w] : null, combiner, maxNorm, s.value), `against the model (weights ${w !== null}, maxNorm ${maxNorm})`, 1e-6, 1e-7);
              const out = new Float32Array(ids.length * DIM).fill(7);
              expect(await ops.lookupCombinedShards(shards, ragged(c, ids, 'ids'), { ...o, out })).toBe(out);
              expect(Array.from(out)).toEqual(Array.from(got));
            }
          });
        }

        it('lookupCombinedShards inserts owned missing keys with insertMissing (only then), on their owner', async () => {
          const s = await build(ctx, ops, c);
          const shards = s.tables.map((table, d) => ({ table, plan: s.plans[d]! }));
          const ids = [[c.written[1]!, c.missing[0]!], [c.missing[0]!]];
          const sizes = s.tables.map((t) => t.size());
          const read = await ops.lookupCombinedShards(shards, ragged(c, ids, 'ids'), { combiner: 'sum' });
          expectShardSum(read, shardCandidates(s, ids, null, 'sum', 0, bagOrderAllowed(s, form)), 'without insertMissing');
          expect(s.tables.map((t) => t.size())).toEqual(sizes);
          const got = await ops.lookupCombinedShards(shards, ragged(c, ids, 'ids'), { combiner: 'sum', insertMissing: true });
          expect(Array.from(got)).toEqual(Array.from(read));
          const owner = s.place(c.missing[0]!).shard;
          if (c.kind === 'dynamic') expect(s.tables.map((t) => t.size())).toEqual(sizes.map((n, d) => n + (d === owner ? 1 : 0)));
        });

        if (c.n > 1) {
          it('lookupCombinedShards where a row\'s terms cancel across shards: exactly the shard order, or where allowed the bag order', async () => {
            const s = await build(ctx, ops, c);
            const a = c.written.find((k) => s.value(k).every((x) => x !== 0))!;
            const b = c.written.find((k) => s.place(k).shard !== s.place(a).shard)!;
            // a + 2^-60 b - a: bag order rounds the small term away (0), shard order keeps it (a's shard gives a - a = 0)
            const ids = [[a, b, a], [b]];
            const w = [[1, 2 ** -60, -1], [1]];
            const shards = s.tables.map((table, d) => ({ table, plan: s.plans[d]! }));
            const got = await ops.lookupCombinedShards(shards, ragged(c, ids, 'ids'), { combiner: 'sum', weights: ragged(c, ids, 'weights', w) });
            const allowed = shardCandidates(s, ids, w, 'sum', 0, bagOrderAllowed(s, form));
            expect(Array.from(shardCandidates(s, ids, w, 'sum', 0, true)[1]!.values.subarray(0, DIM)), 'bag order').toEqual([0, 0, 0]);
            expect(Array.from(allowed[0]!.values.subarray(0, DIM)), 'shard order').toEqual(s.value(b).map((x) => Math.fround(x * 2 ** -60)));
            expectShardSum(got, allowed, 'cancelling terms');
          });

          it('lookupCombinedShards with a shard on the reference backend: core adds the partials in shard order', async () => {
            const s = await build(ctx, ops, c);
            // shard 1 on a reference-backend table holding the same rows
            const other = await shardTable(ctx, ops, c, 1, referenceBackend);
            const { ids, weights } = bagOf(c);
            const o = { combiner: 'mean' as const, weights: ragged(c, ids, 'weights', weights) };
            const same = await ops.lookupCombinedShards(s.tables.map((table, d) => ({ table, plan: s.plans[d]! })), ragged(c, ids, 'ids'), o);
            const mixed = await ops.lookupCombinedShards(
              s.tables.map((table, d) => ({ table: d === 1 ? other : table, plan: s.plans[d]! })),
              ragged(c, ids, 'ids'),
              o,
            );
            expectShardSum(mixed, shardCandidates(s, ids, weights, 'mean', 0, false), 'a shard on the reference backend');
            expectShardSum(same, shardCandidates(s, ids, weights, 'mean', 0, bagOrderAllowed(s, form)), 'one backend');
          });
        }

        it('lookupCombinedPartial adds to out (it does not overwrite) and inserts owned missing keys with insertMissing', async () => {
          const s = await build(ctx, ops, c);
          const ids = [[c.written[1]!, c.missing[0]!]];
          const out = new Float64Array(DIM).fill(1.5);
          const owner = s.place(c.missing[0]!).shard;
          const size = s.tables[owner]!.size();
          for (let d = 0; d < c.n; d++) {
            await ops.lookupCombinedPartial(s.tables[d]!, ragged(c, ids, 'ids'), { plan: s.plans[d]!, combiner: 'sum', out, insertMissing: true });
          }
          expectClose(out, pooled(ids, null, 'sum', 0, s.value).map((x) => x + 1.5), 'accumulated', 1e-12, 1e-12);
          if (c.kind === 'dynamic') expect(s.tables[owner]!.size()).toBe(size + 1);
        });

        it('lookupCombinedBackward with a plan writes each owned entry\'s gradient; the shards together write every entry', async () => {
          const s = await build(ctx, ops, c);
          const { ids, weights } = bagOf(c);
          const grads = ids.flatMap((_, r) => [r + 1, -0.5 * r, 2]);
          for (const combiner of ['sum', 'mean', 'sqrtn'] as Combiner[]) {
            for (const maxNorm of [0, 4.5]) {
              const nnz = ids.flat().length;
              const out = new Float32Array(nnz * DIM).fill(42);
              for (let d = 0; d < c.n; d++) {
                const before = Array.from(out);
                await ops.lookupCombinedBackward(s.tables[d]!, ragged(c, ids, 'ids'), grads, {
                  plan: s.plans[d]!,
                  combiner,
                  maxNorm: maxNorm || null,
                  weights: ragged(c, ids, 'weights', weights),
                  out,
                });
                let j = 0;
                ids.forEach((row, r) => {
                  const den = denominator(weights[r]!, combiner);
                  row.forEach((k, e) => {
                    const got = Array.from(out.subarray(j * DIM, (j + 1) * DIM));
                    if (s.place(k).shard === d) {
                      const g = grads.slice(r * DIM, (r + 1) * DIM);
                      expectClose(got, entryGradient(s.value(k), g, weights[r]![e]!, den, maxNorm), `${combiner} maxNorm ${maxNorm} entry ${j}`, 1e-5, 1e-6);
                    } else expect(got).toEqual(before.slice(j * DIM, (j + 1) * DIM));
                    j++;
                  });
                });
              }
            }
          }
        });

        for (const how of ['each shard', 'applyCombinedGradientsShards'] as const) {
          it(`applyCombinedGradients with a plan (${how}) trains each shard\'s owned rows by their summed per-entry gradients`, async () => {
            const s = await build(ctx, ops, c);
            const { ids, weights } = bagOf(c);
            const grads = ids.flatMap((_, r) => [1, r - 2, 0.25 * r]);
            const o = { combiner: 'mean' as const, weights: ragged(c, ids, 'weights', weights) };
            if (how === 'each shard') {
              for (let d = 0; d < c.n; d++) await ops.applyCombinedGradients(s.tables[d]!, ragged(c, ids, 'ids'), grads, optimizers.sgd({ learningRate: 1 }), 1, { ...o, plan: s.plans[d]! });
            } else {
              const shards = s.tables.map((table, d) => ({ table, plan: s.plans[d]! }));
              // the last shard's table with Adagrad's slots: an SGD step fits every table but that
              // one, and is refused before any shard trains (not only tables[0] checked, nor each
              // table just before it trains)
              const odd = await shardTable(ctx, ops, c, c.n - 1, ctx.backend, optimizers.adagrad());
              const mixed = shards.map((p, d) => (d === c.n - 1 ? { ...p, table: odd } : p));
              const before = await Promise.all(mixed.map((p) => ops.export(p.table)));
              await expectRejected(odd, () => ops.applyCombinedGradientsShards(mixed, ragged(c, ids, 'ids'), grads, optimizers.sgd({ learningRate: 1 }), 1, o), 'INVALID_ARGUMENT', `shards[${c.n - 1}].table's layout`);
              expect(await Promise.all(mixed.map((p) => ops.export(p.table))), 'a refused call changes nothing').toEqual(before);
              // a learning-rate function runs once per step, not once per shard
              let lrCalls = 0;
              const counted = optimizers.sgd({ learningRate: () => (lrCalls++, 1) });
              const sizes = s.tables.map((t) => t.size());
              await ops.applyCombinedGradientsShards(shards, ragged(c, ids, 'ids'), grads, counted, 1, o);
              expect(lrCalls, 'learning-rate calls in one step').toBe(1);
              // only the owner of the bag's missing key grows (a dynamic shard inserts only what it owns)
              const grown = s.tables.map((t, d) => t.size() - sizes[d]!);
              const owner = s.place(c.missing[0]!).shard;
              expect(grown, 'rows each shard gained').toEqual(s.tables.map((_, d) => (c.kind === 'dynamic' && d === owner ? 1 : 0)));
            }
            const flat: bigint[] = [];
            const per: number[][] = [];
            ids.forEach((row, r) => {
              const den = denominator(weights[r]!, 'mean');
              row.forEach((k, e) => {
                flat.push(k);
                per.push(entryGradient(s.value(k), grads.slice(r * DIM, (r + 1) * DIM), weights[r]![e]!, den, 0));
              });
            });
            const sums = summedGradients(flat, per);
            for (const [key, g] of sums) {
              const k = BigInt(key);
              const p = s.place(k);
              const got = (await ops.find(s.tables[p.shard]!, s.keys([p.local]))).values;
              expectClose(got, s.value(k).map((x, i) => x - g[i]!), `row of key ${key}`, 1e-6, 1e-6);
            }
            if (c.kind === 'dynamic') {
              const owner = s.place(c.missing[0]!).shard;
              expect((await ops.find(s.tables[owner]!, s.keys([c.missing[0]!]))).exists[0], 'missing key inserted by training').toBe(1);
            }
          });
        }

        it('applyGradients with a plan updates only owned keys, under their local keys', async () => {
          const s = await build(ctx, ops, c);
          const keys = [c.written[0]!, c.written[2]!, c.written[0]!, c.written[3]!];
          const grads = [1, 2, 3, 0.5, 0.5, 0.5, -1, 0, 1, 4, 4, 4];
          for (let d = 0; d < c.n; d++) await ops.applyGradients(s.tables[d]!, s.keys(keys), grads, optimizers.sgd({ learningRate: 1 }), 1, { plan: s.plans[d]! });
          const sums = summedGradients(keys, [0, 1, 2, 3].map((i) => grads.slice(i * DIM, (i + 1) * DIM)));
          for (const [key, g] of sums) {
            const k = BigInt(key);
            const p = s.place(k);
            expectClose((await ops.find(s.tables[p.shard]!, s.keys([p.local]))).values, s.value(k).map((x, i) => x - g[i]!), `key ${key}`);
          }
        });

        if (c.kind === 'static' && c.placement === 'mod') {
          it('owned keys past the shard\'s rows are OUT_OF_RANGE; keys other shards own are not checked', async () => {
            const s = await build(ctx, ops, c);
            const n = BigInt(c.n);
            const rows0 = BigInt(Math.ceil(c.rows / c.n));
            const t = s.tables[0]!;
            await expectRejected(t, () => ops.find(t, s.keys([0n, rows0 * n]), { plan: s.plans[0]! }), 'OUT_OF_RANGE', 'keys[1]');
            await expectRejected(t, () => ops.find(t, s.keys([-n]), { plan: s.plans[0]! }), 'OUT_OF_RANGE', 'keys[0]');
            // rows0 * n + 1 belongs to shard 1 (past its rows too): shard 0 ignores it.
            const r = await ops.find(t, s.keys([rows0 * n + 1n, 3n]), { plan: s.plans[0]! });
            expect(Array.from(r.values)).toEqual([0, 0, 0, ...s.value(3n)]);
          });
        }
        if (c.kind === 'static' && c.placement === 'range') {
          it('keys outside every range are owned by no shard and read by none', async () => {
            const s = await build(ctx, ops, c);
            const values = new Float32Array(2 * DIM).fill(5);
            for (let d = 0; d < c.n; d++) await ops.find(s.tables[d]!, s.keys([BigInt(c.starts[c.n]!), -1n]), { plan: s.plans[d]!, out: { values } });
            expect(Array.from(values)).toEqual(new Array(2 * DIM).fill(5));
          });
        }
      });
    }

    describe(`shard plans are validated, ${form} form`, () => {
      it('bad plans are rejected and change nothing', async () => {
        const t = ctx.make({ dim: DIM });
        const st = ctx.make({ kind: 'static', dim: DIM, vocabularySize: 4 });
        const bag = RaggedTensor.fromNestedArray([[1, 2]]);
        await expectRejected(t, () => ops.find(t, [1], { plan: 'mod' as never }), 'INVALID_TYPE', 'plan');
        await expectRejected(t, () => ops.find(t, [1], { plan: { placement: 'hash' } as never }), 'INVALID_ARGUMENT', 'plan.placement');
        await expectRejected(t, () => ops.find(t, [1], { plan: { placement: 'mod', numShards: 2, shard: 2 } }), 'INVALID_ARGUMENT', 'plan.shard');
        await expectRejected(t, () => ops.find(t, [1], { plan: { placement: 'mod', numShards: 0, shard: 0 } }), 'INVALID_ARGUMENT', 'plan.numShards');
        await expectRejected(t, () => ops.find(t, [1], { plan: { placement: 'range', start: 5, end: 4 } }), 'INVALID_ARGUMENT', 'plan.end');
        await expectRejected(st, () => ops.find(st, [1], { plan: { placement: 'range', start: 0, end: 5 } }), 'INVALID_ARGUMENT', 'plan.end');
        await expectRejected(t, () => ops.lookupCombinedPartial(t, bag, {} as never), 'INVALID_TYPE', 'plan');
        await expectRejected(
          t,
          () => ops.lookupCombinedPartial(t, bag, { plan: { placement: 'localized' }, out: new Float64Array(2) }),
          'SHAPE_MISMATCH',
          'out',
        );
        await expectRejected(
          t,
          () => ops.lookupCombinedPartial(t, bag, { plan: { placement: 'localized' }, out: new Float32Array(DIM) as never }),
          'INVALID_TYPE',
          'out',
        );
      });

      it('lookupCombinedShards validates its shards, ids and out before any shard works', async () => {
        const a = ctx.make({ dim: DIM });
        const b = ctx.make({ dim: DIM });
        const wide = ctx.make({ dim: DIM + 1 });
        const int32 = ctx.make({ dim: DIM, keyDtype: 'int32' });
        const st = ctx.make({ kind: 'static', dim: DIM, vocabularySize: 4 });
        const bag = RaggedTensor.fromNestedArray([[1, 2], [3]]);
        const mod = (shard: number) => ({ placement: 'mod' as const, numShards: 2, shard });
        await expectRejected(a, () => ops.lookupCombinedShards([], bag), 'INVALID_TYPE', 'shards');
        await expectRejected(a, () => ops.lookupCombinedShards('a' as never, bag), 'INVALID_TYPE', 'shards');
        await expectRejected(a, () => ops.lookupCombinedShards([{ table: a, plan: mod(0) }, { table: {} as never, plan: mod(1) }], bag), 'INVALID_TYPE', 'shards[1].table');
        await expectRejected(a, () => ops.lookupCombinedShards([{ table: a, plan: mod(0) }, { table: wide, plan: mod(1) }], bag), 'SHAPE_MISMATCH', 'shards[1].table');
        await expectRejected(a, () => ops.lookupCombinedShards([{ table: a, plan: mod(0) }, { table: int32, plan: mod(1) }], bag), 'SHAPE_MISMATCH', 'shards[1].table');
        await expectRejected(a, () => ops.lookupCombinedShards([{ table: a, plan: mod(0) }, { table: b, plan: mod(2) }], bag), 'INVALID_ARGUMENT', 'shards[1].plan.shard');
        await expectRejected(a, () => ops.lookupCombinedShards([{ table: a, plan: mod(0) }, { table: b, plan: mod(1) }], bag, { out: new Float32Array(DIM) }), 'SHAPE_MISMATCH', 'out');
        await expectRejected(a, () => ops.lookupCombinedShards([{ table: a, plan: mod(0) }, { table: b, plan: mod(1) }], bag, { combiner: 'max' as never }), 'INVALID_ARGUMENT', 'combiner');
        await expectRejected(
          a,
          () => ops.lookupCombinedShards([{ table: a, plan: mod(0) }, { table: b, plan: mod(1) }], bag, { insertMissing: true, weights: new Float32Array(2) }),
          'SHAPE_MISMATCH',
          'weights',
        );
        // a static shard's owned rows are checked (row 9 is local row 4 of shard 1: out of range), and nothing is inserted on the other
        const st0 = ctx.make({ kind: 'static', dim: DIM, vocabularySize: 4 });
        await expectRejected(a, () => ops.lookupCombinedShards([{ table: st0, plan: mod(0) }, { table: st, plan: mod(1) }], RaggedTensor.fromNestedArray([[0, 9]], { dtype: 'int32' }), { insertMissing: true }), 'OUT_OF_RANGE', 'ids');
        a.dispose();
        await expectRejected(null, () => ops.lookupCombinedShards([{ table: b, plan: mod(0) }, { table: a, plan: mod(1) }], bag), 'DISPOSED', /.*/);
      });
    });
  }
}
