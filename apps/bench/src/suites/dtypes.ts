/**
 * Reduced-precision storage (core's `storageDtype`) in the find and bag suites: the same
 * op on float32, bfloat16 and float16 tables (same keys, ids and value pattern), interleaved
 * with PyTorch at the same dtype (index_select / nn.EmbeddingBag on a tensor of that dtype, the
 * tables' values; each checked by the sum of one call's output), and the bytes each table takes per key.
 */
import type { Bag, EmbeddingTable, StorageDtype } from '@embedstack/core';
import { closeStarted, startTorchBag, startTorchIndexSelect, type TorchChecked, type TorchPeer } from '../peers/torch.js';
import { type Figure, type Group, ratioTarget, requireSameOutput, type Target, valueTarget } from '../report.js';
import { drawIndices, pickKeys } from '../rng.js';
import { formatCount } from '../format.js';
import { dynamicTable, staticTable } from '../tables.js';
import { BATCH, type Entry, figure, findEntry, POOL_BATCHES, runEntries, threadLabel } from './common.js';
import type { SuiteContext } from './types.js';

export const STORAGE_DTYPES: readonly StorageDtype[] = ['float32', 'bfloat16', 'float16'];
/** The find dtype rows run on a 1M-key dim-64 table (three tables are built). */
export const DTYPE_FIND = { dim: 64, keys: 1 << 20 } as const;

interface Peer {
  dtype: StorageDtype;
  name: string;
  peer: TorchPeer | string;
}

function torchEntries(peers: readonly Peer[], label: string, items: number, unit: string, note: (p: TorchPeer) => string): Entry[] {
  return peers.flatMap((p) => (typeof p.peer === 'string' ? [] : [{ job: p.peer.peer.job(`${label}: ${p.name}`, items), name: p.name, kind: 'peer' as const, unit, note: note(p.peer) }]));
}

/** Stops the started peers and waits for their processes to exit (the next suite's timing must not see their teardown). */
async function stopPeers(peers: readonly Peer[]): Promise<void> {
  await Promise.all(peers.map((p) => (typeof p.peer === 'string' ? undefined : p.peer.stop())));
}

/** Measured figures in entry order, with a NaN figure (and its reason) for each unavailable peer. */
function withMissing(measured: Figure[], peers: readonly Peer[], unit: string): Figure[] {
  return [...measured, ...peers.flatMap((p) => (typeof p.peer === 'string' ? [figure(p.name, 'peer', NaN, unit, { note: p.peer })] : []))];
}

/**
 * Whether PyTorch's output sum `theirs` matches ours within `relative` of ours (at least 1 in
 * magnitude): false for a missing or non-finite checksum, so a peer whose output was not seen
 * never counts as computing what we compute.
 */
export function sumsAgree(ours: number, theirs: number, relative: number): boolean {
  return Number.isFinite(ours) && Number.isFinite(theirs) && Math.abs(ours - theirs) <= relative * Math.max(1, Math.abs(ours));
}

/** Bytes per key of each table, beyond nothing (the whole table / keys), and its ratio to float32's. */
function bytesGroup(title: string, tables: readonly EmbeddingTable[], keys: number, targets: Target[]): Group {
  const bytes = tables.map((t) => t.memoryUsage() / keys);
  const dim = tables[0]!.dim;
  STORAGE_DTYPES.forEach((d, i) => {
    if (d !== 'float32') targets.push(valueTarget(bytes[i]! / bytes[0]!, '<=', 0.6, 'ratio', `${title}: ${d} bytes per key <= 0.6x float32's (dim ${dim})`));
  });
  return {
    title: `${title}: bytes per key (memoryUsage / keys)`,
    params: { dim, keys },
    figures: STORAGE_DTYPES.map((d, i) =>
      figure(`${d} table`, 'ours', bytes[i]!, 'B/key', { lowerIsBetter: true, note: `values ${dim} x ${d === 'float32' ? 4 : 2} B = ${dim * (d === 'float32' ? 4 : 2)} B/key` }),
    ),
  };
}

/**
 * A PyTorch peer's note `what`, followed by whether its output sum `theirs` agrees with ours
 * (`mine`, the same call's; see sumsAgree).
 */
export function sumNote(what: string, mine: number, theirs: number, relative: number): { agree: boolean; note: string } {
  const agree = sumsAgree(mine, theirs, relative);
  return { agree, note: `${what}; output sum ${agree ? 'agrees with ours' : `DIFFERS: ${theirs} vs ours ${mine}`}` };
}

/** sumNote of dtype d's peer; `agrees` records whether the sums agree. */
function checkedNote(what: string, d: StorageDtype, mine: number, theirs: number, relative: number, agrees: Map<StorageDtype, boolean>): string {
  const { agree, note } = sumNote(what, mine, theirs, relative);
  agrees.set(d, agree);
  return note;
}

/** The float64 sum of an output. */
export const outputSum = (out: Float32Array): number => out.reduce((a, x) => a + x, 0);

/**
 * find (findSync) on a float32, a bfloat16 and a float16 dynamic table vs PyTorch index_select at
 * each dtype. PyTorch's tensor holds the table's rows in the order they were filled (row i: keys[i]'s
 * values), so its first call's output sum must equal that of our find of the same keys: each
 * value is one stored value, so the sums agree exactly (to 1e-9 of ours here).
 */
export async function findDtypeGroups(ctx: SuiteContext): Promise<{ groups: Group[]; targets: Target[] }> {
  const { dim, keys: n } = DTYPE_FIND;
  const keys = ctx.fixtures.keys(n);
  const idx = drawIndices(POOL_BATCHES * BATCH, n, 'uniform', 23);
  // PyTorch's children start together and build their tensors while our tables fill (setup, untimed).
  const starts = STORAGE_DTYPES.map((d) => startTorchIndexSelect({ rows: n, dim, threads: ctx.threads, ids: idx, batch: BATCH, dtype: d }));
  try {
    return await findDtypeMeasured(ctx, keys, idx, starts);
  } finally {
    closeStarted(starts);
  }
}

/** findDtypeGroups once its PyTorch children are started: tables, measurement, targets. */
async function findDtypeMeasured(ctx: SuiteContext, keys: BigInt64Array, idx: Uint32Array, starts: readonly Promise<TorchChecked | string>[]): Promise<{ groups: Group[]; targets: Target[] }> {
  const { dim, keys: n } = DTYPE_FIND;
  const tables = STORAGE_DTYPES.map((d) => dynamicTable(ctx.backend, dim, keys, { storageDtype: d, name: `bench_${d}` }));
  const pool = pickKeys(keys, idx);
  const peers: Peer[] = [];
  const sums = new Map<StorageDtype, number>();
  for (const [i, d] of STORAGE_DTYPES.entries()) {
    const t = await starts[i]!;
    if (typeof t !== 'string') sums.set(d, t.checksum);
    peers.push({ dtype: d, name: `PyTorch index_select ${d} (${threadLabel(ctx.threads)})`, peer: t });
  }
  const title = `storage dtypes: find, dim ${dim}, ${formatCount(n)} keys, uniform, batch ${formatCount(BATCH)}`;
  const agrees = new Map<StorageDtype, boolean>();
  const entries = [
    ...STORAGE_DTYPES.map((d, i) => findEntry(`${title}: findSync ${d}`, tables[i]!, pool, BATCH, `findSync ${d}`)),
    ...torchEntries(peers, title, BATCH, 'keys/s', (p) => {
      const d = peers.find((x) => x.peer === p)!.dtype;
      const mine = outputSum(tables[STORAGE_DTYPES.indexOf(d)]!.findSync(pool.subarray(0, BATCH)).values);
      return checkedNote(`torch ${p.version}: rows of a dense tensor (the table's rows, in fill order) by row index, output per call`, d, mine, sums.get(d)!, 1e-9, agrees);
    }),
  ];
  const measured = await runEntries(entries, { minSamples: 10, minMs: 400 });
  await stopPeers(peers);
  const g: Group = { title, params: { dim, keys: n, batch: BATCH }, figures: withMissing(measured, peers, 'keys/s') };
  const targets: Target[] = [];
  for (const d of STORAGE_DTYPES.slice(1)) {
    targets.push(ratioTarget(g, `findSync ${d}`, 'findSync float32', '>=', 0.9, `find ${d} >= 0.9x find float32 (dim ${dim}, ${formatCount(n)} keys)`));
    const torch = peers.find((p) => p.dtype === d)!;
    if (typeof torch.peer !== 'string') {
      const t = ratioTarget(g, `findSync ${d}`, torch.name, '>=', 1, `find ${d} >= 1.0x PyTorch index_select ${d}`);
      targets.push(requireSameOutput(t, agrees.get(d) === true, "PyTorch's output sum differs from ours"));
    }
  }
  const bytes = bytesGroup(`storage dtypes: dynamic table, ${formatCount(n)} keys`, tables, n, targets);
  for (const t of tables) t.dispose();
  return { groups: [g, bytes], targets };
}

/** The bag dtype rows' shape (the bag suite's static tables and ids). */
export interface BagDtypeShape {
  rows: number;
  dim: number;
  splits: Int32Array;
  ids: Uint32Array;
  perBag: number;
  title: string;
}

/**
 * Starts bagDtypeGroups's PyTorch children (nn.EmbeddingBag sum at each dtype), all at once: the bag
 * suite starts them before it fills its tables, so they build their weights meanwhile (setup, untimed).
 */
export function startBagDtypePeers(ctx: SuiteContext, o: BagDtypeShape): Promise<TorchChecked | string>[] {
  return STORAGE_DTYPES.map((d) => startTorchBag({ rows: o.rows, dim: o.dim, threads: ctx.threads, mode: 'sum', ids: o.ids, perBag: o.perBag, dtype: d }));
}

/**
 * Static-table bag sum on float32 (`stat`, already built), bfloat16 and float16 tables of the same
 * rows vs PyTorch nn.EmbeddingBag at each dtype (torch 1.13 has no CPU bfloat16 bag: that row says so),
 * the PyTorch children from startBagDtypePeers.
 */
export async function bagDtypeGroups(
  ctx: SuiteContext,
  o: BagDtypeShape & { stat: EmbeddingTable },
  started: readonly Promise<TorchChecked | string>[],
): Promise<{ groups: Group[]; targets: Target[] }> {
  const narrow = STORAGE_DTYPES.slice(1).map((d) => staticTable(ctx.backend, o.dim, o.rows, d));
  const tables = [o.stat, ...narrow];
  const bag: Bag<Int32Array> = { rowSplits: o.splits, keys: new Int32Array(o.ids.buffer, o.ids.byteOffset, o.ids.length), weights: null };
  const peers: Peer[] = [];
  const sums = new Map<StorageDtype, number>();
  const children = await Promise.all(started);
  for (const [i, d] of STORAGE_DTYPES.entries()) {
    const t = children[i]!;
    if (typeof t !== 'string') sums.set(d, t.checksum);
    peers.push({ dtype: d, name: `PyTorch EmbeddingBag ${d} (${threadLabel(ctx.threads)})`, peer: t });
  }
  const title = `storage dtypes: sum, ${o.title}`;
  const ours = (t: EmbeddingTable): number => outputSum(t.lookupCombinedSync(bag, { combiner: 'sum' }));
  // torch accumulates half types in their own precision; ours in double from the stored values
  const agrees = new Map<StorageDtype, boolean>();
  const entries: Entry[] = [
    ...STORAGE_DTYPES.map((d, i) => ({
      job: { label: `${title}: ${d}`, fn: () => void tables[i]!.lookupCombinedSync(bag, { combiner: 'sum' }), items: o.ids.length },
      name: `static lookupCombinedSync ${d}`,
      kind: 'ours' as const,
      unit: 'rows/s',
    })),
    ...torchEntries(peers, title, o.ids.length, 'rows/s', (p) => {
      const d = peers.find((x) => x.peer === p)!.dtype;
      const mine = ours(tables[STORAGE_DTYPES.indexOf(d)]!);
      return checkedNote(`torch ${p.version}, mode=sum, weight of dtype ${d}, no_grad`, d, mine, sums.get(d)!, d === 'float32' ? 1e-5 : 2e-2, agrees);
    }),
  ];
  const measured = await runEntries(entries, { minSamples: 3 });
  await stopPeers(peers);
  const g: Group = { title, params: { rows: o.rows, dim: o.dim, ids: o.ids.length }, figures: withMissing(measured, peers, 'rows/s') };
  const targets: Target[] = [];
  for (const d of STORAGE_DTYPES.slice(1)) {
    targets.push(ratioTarget(g, `static lookupCombinedSync ${d}`, 'static lookupCombinedSync float32', '>=', 0.9, `bag sum ${d} (static) >= 0.9x float32`));
    const torch = peers.find((p) => p.dtype === d)!;
    if (typeof torch.peer !== 'string') {
      const t = ratioTarget(g, `static lookupCombinedSync ${d}`, torch.name, '>=', 1, `bag sum ${d} (static) >= 1.0x PyTorch EmbeddingBag ${d}`);
      targets.push(requireSameOutput(t, agrees.get(d) === true, "PyTorch's output sum differs from ours"));
    }
  }
  const bytes = bytesGroup(`storage dtypes: static table, ${formatCount(o.rows)} rows`, tables, o.rows, targets);
  for (const t of narrow) t.dispose();
  return { groups: [g, bytes], targets };
}
