import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type CheckpointBatch,
  checkOptions,
  type EmbeddingTable,
  floorMod,
  InvalidTypeError,
  invalidParameter,
  IOError,
  type Keys,
  NotFoundError,
  readCheckpointBatches,
  readTableManifest,
  saveTable,
  sameSlotLayout,
} from '@embedstack/core';
import { takeKeys } from './keys.js';
import { Optimizer } from './optimizers.js';
import { gatherRows } from './partition.js';
import { bind } from './training.js';
import type { VariableState } from './variableState.js';

/** Options of `saveToFileSystem` (TFRA's `save_to_file_system(proc_size, proc_rank)`). */
export interface SaveOptions {
  /** Processes of the job (each saves its own shards). Default 1. */
  procSize?: number | null;
  /** This process's rank in [0, procSize). Default 0. */
  procRank?: number | null;
}

/** Options of `loadFromFileSystem` (TFRA's `load_from_file_system(optimizer, proc_size, proc_rank)`). */
export interface LoadOptions {
  /**
   * Bind this optimizer (a DynamicEmbeddingOptimizer) to the variable before
   * loading, so that saved slots are restored beside the rows. Without it, slots
   * are restored only when the variable is already bound to a matching optimizer.
   */
  optimizer?: Optimizer | null;
  /** With procRank: load only keys with floorMod(key, procSize) === procRank. Default: every key. */
  procSize?: number | null;
  /** With procSize: this process's rank in [0, procSize). Default: every key. */
  procRank?: number | null;
}

const PROC_RE = /^proc_(\d+)_of_(\d+)$/;
const SHARD_RE = /^(shard|slots)_(\d+)_of_(\d+)$/;

/** Folder of a variable under a save directory ('/' in names becomes '_'). */
export function variableFolder(dir: string, name: string): string {
  return join(dir, name.replaceAll('/', '_'));
}

function procArgs(o: { procSize?: number | null; procRank?: number | null }, required: boolean): { size: number; rank: number } | null {
  if ((o.procSize ?? null) === null && (o.procRank ?? null) === null) return required ? { size: 1, rank: 0 } : null;
  const size = o.procSize ?? 1;
  const rank = o.procRank ?? 0;
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 1) throw invalidParameter('procSize', 'an integer >= 1', size);
  if (typeof rank !== 'number' || !Number.isSafeInteger(rank) || rank < 0 || rank >= size) {
    throw invalidParameter('procRank', `an integer in [0, ${size})`, rank);
  }
  return { size, rank };
}

function checkDir(dir: unknown): string {
  if (typeof dir !== 'string' || dir.length === 0) throw invalidParameter('dir', 'a directory path', dir, InvalidTypeError);
  return dir;
}

/**
 * Saves every shard of `v` (values, slots beside rows, scores) with core's
 * crash-safe `saveTable`: `dir/<name>/proc_<rank>_of_<size>/shard_<i>_of_<N>`;
 * slots held in companion tables go to `slots_<i>_of_<N>` beside them.
 */
export async function saveVariable(v: VariableState, dir: string, options: SaveOptions): Promise<void> {
  checkDir(dir);
  const o = checkOptions<SaveOptions>(options, ['procSize', 'procRank']);
  const proc = procArgs(o, true)!;
  if (!v.cfg.checkpoint) return;
  const internal = v;
  const root = join(variableFolder(dir, v.name), `proc_${proc.rank}_of_${proc.size}`);
  const extra = { tfra: { variable: v.name, keyDtype: v.cfg.keyDtype, procRank: proc.rank, procSize: proc.size } };
  const n = v.shardNum;
  for (let i = 0; i < n; i++) {
    const table = await internal.stores[i]!.ready();
    if (table && v.cfg.kvCreator.savesRows) await saveTable(table, join(root, `shard_${i}_of_${n}`), { shard: { index: i, count: n }, extra });
    const state = internal.binding?.stateTables?.[i];
    if (state) await saveTable(state, join(root, `slots_${i}_of_${n}`), { shard: { index: i, count: n }, extra });
  }
}

async function listDirs(path: string): Promise<string[]> {
  try {
    return (await readdir(path, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ENOENT') return [];
    throw new IOError(`Could not list "${path}": ${(e as Error).message}`, { cause: e });
  }
}

/** Keeps rows whose key passes `keep`; null when none does. */
function filterBatch(b: CheckpointBatch, keep: (k: bigint | number) => boolean, dim: number, widths: number[]): CheckpointBatch | null {
  const rows: number[] = [];
  for (let i = 0; i < b.keys.length; i++) if (keep(b.keys[i]!)) rows.push(i);
  if (rows.length === b.keys.length) return b;
  if (rows.length === 0) return null;
  return {
    keys: takeKeys(b.keys, rows),
    values: gatherRows(b.values, rows, dim),
    slots: b.slots.map((s, j) => gatherRows(s, rows, widths[j]!)),
    scores: BigUint64Array.from(rows, (r) => b.scores[r]!),
  };
}

/**
 * Loads every checkpoint of `v` under `dir` (all processes' shards), routing each
 * key to this variable's shard by its partitioner (re-partitioning when the
 * saved shard count differs) and upserting it (`importRows`; nothing is cleared).
 * Slots are restored when the saved layout equals the bound optimizer's; scores
 * when the saved score policy equals the table's.
 * @throws NotFoundError when `dir` holds no checkpoint of `v`; CheckpointCorruptError; IOError
 */
export async function loadVariable(v: VariableState, dir: string, options: LoadOptions): Promise<void> {
  checkDir(dir);
  const o = checkOptions<LoadOptions>(options, ['optimizer', 'procSize', 'procRank']);
  const proc = procArgs(o, false);
  const opt = o.optimizer ?? null;
  if (opt !== null && !(opt instanceof Optimizer)) throw invalidParameter('optimizer', 'a de.optimizers optimizer', opt, InvalidTypeError);
  if (opt) await bind(v, opt, opt.spec, opt.slotNames, opt.name, v.cfg.bpV2 || opt.bpV2);
  const base = variableFolder(dir, v.name);
  const found: { path: string; kind: string }[] = [];
  for (const p of await listDirs(base)) {
    if (!PROC_RE.test(p)) continue;
    for (const s of await listDirs(join(base, p))) {
      const m = SHARD_RE.exec(s);
      if (m) found.push({ path: join(base, p, s), kind: m[1]! });
    }
  }
  if (!found.some((f) => f.kind === 'shard') && v.cfg.kvCreator.savesRows) {
    throw new NotFoundError(`Expected dir to hold a checkpoint of variable "${v.name}" (${base}/proc_*/shard_*) but found none`, { argument: 'dir' });
  }
  // Verify every manifest fits before loading anything.
  const manifests = await Promise.all(found.map((f) => readTableManifest(f.path)));
  manifests.forEach((m, i) => {
    if (m.dim !== v.dim) throw invalidParameter('dir', `checkpoints of dim ${v.dim} (variable "${v.name}")`, `dim ${m.dim} in ${found[i]!.path}`);
  });
  const internal = v;
  for (const st of internal.stores) await st.ready();
  const binding = internal.binding;
  const keepProc = proc ? (k: bigint | number) => floorMod(k, proc.size) === proc.rank : () => true;
  for (let f = 0; f < found.length; f++) {
    const { path, kind } = found[f]!;
    const m = manifests[f]!;
    const targets: EmbeddingTable[] | null = kind === 'shard' ? internal.tables : (binding?.stateTables ?? null);
    if (!targets) continue; // slots saved from companion tables, but this variable keeps none
    const savedLayout = { names: m.slots.map((s) => s.name), widths: m.slots.map((s) => (s.width === m.dim ? 'dim' : 1) as 'dim' | 1), initial: [] };
    const withSlots = m.slots.length > 0 && sameSlotLayout(savedLayout, targets[0]!.options.slots);
    const widths = m.slots.map((s) => s.width);
    for await (const raw of readCheckpointBatches(path)) {
      const b = filterBatch(raw, keepProc, m.dim, widths);
      if (!b) continue;
      const p = internal.partition(b.keys as Keys);
      for (let s = 0; s < v.shardNum; s++) {
        const pos = p.positions[s]!;
        if (pos.length === 0) continue;
        const t = targets[s]!;
        const sameScores = t.options.scorePolicy === m.scorePolicy;
        await t.importRows(
          p.keys[s]!,
          gatherRows(b.values, pos, m.dim),
          withSlots ? b.slots.map((sl, j) => gatherRows(sl, pos, widths[j]!)) : null,
          sameScores ? BigUint64Array.from(pos, (r) => b.scores[r]!) : null,
        );
      }
    }
  }
}
