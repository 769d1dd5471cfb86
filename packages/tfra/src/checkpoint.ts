import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  AlreadyExistsError,
  type CheckpointBatch,
  CheckpointCorruptError,
  checkOptions,
  crc32c,
  type EmbeddingTable,
  floorMod,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  IOError,
  type Keys,
  liveVersionDir,
  NotFoundError,
  readCheckpointBatches,
  readTableManifest,
  saveTable,
  saveVersionedDir,
  sameSlotLayout,
  type TableManifest,
  verifyCheckpoint,
  writeDurableFile,
} from '@embedstack/core';
import { takeKeys } from './keys.js';
import { Optimizer } from './optimizers.js';
import { gatherRows } from './partition.js';
import { bind, checkBindable } from './training.js';
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
   * Bind this optimizer (a DynamicEmbeddingOptimizer) to the variable when the
   * checkpoint has passed every check, so that saved slots are restored beside the
   * rows. Without it, slots are restored only when the variable is already bound to
   * a matching optimizer.
   */
  optimizer?: Optimizer | null;
  /** With procRank: load only keys with floorMod(key, procSize) === procRank. Default: every key. */
  procSize?: number | null;
  /** With procSize: this process's rank in [0, procSize). Default: every key. */
  procRank?: number | null;
}

const PROC_RE = /^proc_(\d+)_of_(\d+)$/;
const SHARD_RE = /^(shard|slots)_(\d+)_of_(\d+)$/;
/** The manifest of one process's save, written last into its version directory. */
const SAVE_MANIFEST = 'tfra-variable.json';
const SAVE_FORMAT = 'embedstack.tfra-variable';

/** Folder of a variable under a save directory ('/' in names becomes '_', as in TFRA). */
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

async function listDirs(path: string): Promise<string[]> {
  try {
    return (await readdir(path, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return [];
    throw new IOError(`Could not list "${path}": ${(e as Error).message}`, { cause: e });
  }
}

// ---- what one save holds ---------------------------------------------------------

/** One process's part of a save: its shard and slot checkpoints. */
interface ProcPart {
  procRank: number;
  procSize: number;
  /** Name of the variable that saved it. */
  variable: string;
  /** ISO time of the save (the newest complete set of processes is loaded). */
  createdAt: string;
  /** Table checkpoint folders (absolute), with their kind. */
  folders: { path: string; kind: 'shard' | 'slots' }[];
}

/** The JSON of {@link SAVE_MANIFEST}. */
interface SaveManifest {
  format: typeof SAVE_FORMAT;
  formatVersion: 1;
  variable: string;
  keyDtype: string;
  dim: number;
  procRank: number;
  procSize: number;
  shardCount: number;
  createdAt: string;
  /** Folder names in the version directory: shard_<i>_of_<N>, slots_<i>_of_<N>. */
  folders: string[];
  manifestCrc32c?: number;
}

function saveManifestJson(m: SaveManifest): string {
  const body = JSON.stringify(m, null, 2);
  return JSON.stringify({ ...m, manifestCrc32c: crc32c(new TextEncoder().encode(body)) }, null, 2) + '\n';
}

async function readSaveManifest(version: string, rank: number, size: number): Promise<ProcPart> {
  const path = join(version, SAVE_MANIFEST);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw new CheckpointCorruptError(`Checkpoint manifest "${path}" is missing or unreadable: ${(e as Error).message}`, { cause: e });
  }
  const bad = (what: string): CheckpointCorruptError => new CheckpointCorruptError(`Checkpoint manifest "${path}" is corrupt: ${what}`);
  let m: SaveManifest;
  try {
    m = JSON.parse(text) as SaveManifest;
  } catch (e) {
    throw bad(`not valid JSON (${(e as Error).message})`);
  }
  if (typeof m !== 'object' || m === null || m.format !== SAVE_FORMAT || m.formatVersion !== 1) throw bad(`expected format "${SAVE_FORMAT}" version 1`);
  const { manifestCrc32c: stored, ...rest } = m;
  if (crc32c(new TextEncoder().encode(JSON.stringify(rest, null, 2))) !== stored) throw bad('its manifestCrc32c does not match its content');
  const ok =
    typeof m.variable === 'string' &&
    typeof m.createdAt === 'string' &&
    m.procRank === rank &&
    m.procSize === size &&
    Array.isArray(m.folders) &&
    m.folders.every((f) => typeof f === 'string' && SHARD_RE.test(f));
  if (!ok) throw bad(`expected variable, createdAt, procRank ${rank}, procSize ${size} and shard folders`);
  return part(rank, size, m.variable, m.createdAt, version, m.folders);
}

function part(procRank: number, procSize: number, variable: string, createdAt: string, dir: string, names: string[]): ProcPart {
  const folders = names.map((n) => ({ path: join(dir, n), kind: SHARD_RE.exec(n)![1] as 'shard' | 'slots' }));
  return { procRank, procSize, variable, createdAt, folders };
}

/**
 * A process folder of the first layout (shard folders directly in proc_<r>_of_<s>,
 * before saves were versioned): the newest complete shard count is its save.
 */
async function readLegacyPart(procDir: string, rank: number, size: number): Promise<ProcPart | null> {
  const byCount = new Map<number, { names: string[]; createdAt: string; variable: string }>();
  for (const name of await listDirs(procDir)) {
    const m = SHARD_RE.exec(name);
    if (!m) continue;
    const manifest = await readTableManifest(join(procDir, name));
    const count = Number(m[3]);
    const g = byCount.get(count) ?? { names: [], createdAt: '', variable: '' };
    g.names.push(name);
    if (manifest.createdAt >= g.createdAt) {
      g.createdAt = manifest.createdAt;
      g.variable = String((manifest.extra.tfra as { variable?: unknown } | undefined)?.variable ?? '');
    }
    byCount.set(count, g);
  }
  let best: { count: number; names: string[]; createdAt: string; variable: string } | null = null;
  for (const [count, g] of byCount) {
    const complete = Array.from({ length: count }, (_, i) => `shard_${i}_of_${count}`).every((n) => g.names.includes(n));
    const onlySlots = g.names.every((n) => n.startsWith('slots_'));
    if ((complete || onlySlots) && (best === null || g.createdAt > best.createdAt)) best = { count, ...g };
  }
  return best && part(rank, size, best.variable, best.createdAt, procDir, best.names);
}

/** Every process folder's committed part under a variable folder (`tolerant`: unreadable parts are skipped). */
async function readParts(base: string, tolerant = false): Promise<ProcPart[]> {
  const parts: ProcPart[] = [];
  for (const name of await listDirs(base)) {
    const m = PROC_RE.exec(name);
    if (!m) continue;
    const rank = Number(m[1]);
    const size = Number(m[2]);
    const procDir = join(base, name);
    const read = async (): Promise<ProcPart | null> => {
      const live = await liveVersionDir(procDir);
      return live === null ? readLegacyPart(procDir, rank, size) : readSaveManifest(live, rank, size);
    };
    const part = tolerant ? await read().catch(() => null) : await read();
    if (part) parts.push(part);
  }
  return parts;
}

/**
 * The parts of the newest save: among process counts whose every rank has a
 * committed part, the one saved last. Folders of earlier saves with another process
 * count are ignored. Null when there is no part at all.
 * @throws CheckpointCorruptError when parts exist but no process count is complete
 */
function newestSave(parts: ProcPart[], base: string): ProcPart[] | null {
  if (parts.length === 0) return null;
  const bySize = new Map<number, ProcPart[]>();
  for (const p of parts) bySize.set(p.procSize, [...(bySize.get(p.procSize) ?? []), p]);
  const newest = (group: ProcPart[]): string => group.reduce((t, p) => (p.createdAt > t ? p.createdAt : t), '');
  let best: ProcPart[] | null = null;
  for (const [size, group] of bySize) {
    if (group.length === size && (best === null || newest(group) > newest(best))) best = group;
  }
  if (best === null) {
    const [size, group] = [...bySize.entries()].sort((a, b) => (newest(a[1]) > newest(b[1]) ? -1 : 1))[0]!;
    const missing = Array.from({ length: size }, (_, r) => r).filter((r) => !group.some((p) => p.procRank === r));
    throw new CheckpointCorruptError(
      `Checkpoint "${base}" is incomplete: the save of ${size} processes has no part of rank ${missing.join(', ')} (proc_${missing[0]}_of_${size})`,
    );
  }
  return best.sort((a, b) => a.procRank - b.procRank);
}

function otherVariable(mine: string, parts: ProcPart[]): ProcPart | undefined {
  return parts.find((p) => p.variable !== mine);
}

// ---- save ----------------------------------------------------------------------

/**
 * Saves every shard of `v` (values, slots beside rows, scores) as one unit:
 * `dir/<name>/proc_<rank>_of_<size>/` is a core versioned directory (CURRENT names
 * the live `ckpt-N`) whose version holds `shard_<i>_of_<N>` (core table checkpoints;
 * companion slot tables: `slots_<i>_of_<N>`) and, written last, a manifest naming
 * them. A crash leaves the previous or the new save, never a mix; folders of earlier
 * saves are never loaded.
 * @throws AlreadyExistsError when the folder holds a checkpoint of another variable
 *   (names differing only in '/' vs '_' share a folder); IOError
 */
export async function saveVariable(v: VariableState, dir: string, options: SaveOptions): Promise<void> {
  checkDir(dir);
  const o = checkOptions<SaveOptions>(options, ['procSize', 'procRank']);
  const proc = procArgs(o, true)!;
  if (!v.cfg.checkpoint) return;
  const base = variableFolder(dir, v.name);
  const procDir = join(base, `proc_${proc.rank}_of_${proc.size}`);
  const extra = { tfra: { variable: v.name, keyDtype: v.cfg.keyDtype, procRank: proc.rank, procSize: proc.size } };
  const n = v.shardNum;
  const refuseOther = (parts: ProcPart[]): void => {
    const other = otherVariable(v.name, parts);
    if (other) {
      throw new AlreadyExistsError(
        `Cannot save variable "${v.name}" into "${base}": it holds a checkpoint of variable "${other.variable}" ` +
          `(names that differ only in '/' and '_' share one folder); save into another dir`,
        { argument: 'dir' },
      );
    }
  };
  refuseOther(await readParts(base, true));
  await saveVersionedDir(procDir, async ({ tmp }) => {
    refuseOther(await readParts(base, true)); // again, under this process folder's lock
    const folders: string[] = [];
    for (let i = 0; i < n; i++) {
      const table = await v.stores[i]!.ready();
      const shard = { index: i, count: n };
      if (table && v.cfg.kvCreator.savesRows) {
        await saveTable(table, join(tmp, `shard_${i}_of_${n}`), { shard, extra });
        folders.push(`shard_${i}_of_${n}`);
      }
      const state = v.binding?.stateTables?.[i];
      if (state) {
        await saveTable(state, join(tmp, `slots_${i}_of_${n}`), { shard, extra });
        folders.push(`slots_${i}_of_${n}`);
      }
    }
    const manifest: SaveManifest = {
      format: SAVE_FORMAT,
      formatVersion: 1,
      variable: v.name,
      keyDtype: v.cfg.keyDtype,
      dim: v.dim,
      procRank: proc.rank,
      procSize: proc.size,
      shardCount: n,
      createdAt: new Date().toISOString(),
      folders,
    };
    await writeDurableFile(join(tmp, SAVE_MANIFEST), saveManifestJson(manifest));
  });
  await removeStale(base, procDir, proc.size);
}

/**
 * Best effort, after a commit: deletes the shard folders of the first layout in this
 * process folder and, once every rank of this process count has committed, the
 * folders of other process counts. Loads ignore both anyway.
 */
async function removeStale(base: string, procDir: string, size: number): Promise<void> {
  const remove = (p: string): Promise<void> => rm(p, { recursive: true, force: true }).catch(() => undefined);
  for (const name of await listDirs(procDir)) if (SHARD_RE.test(name)) await remove(join(procDir, name));
  const procs = (await listDirs(base)).map((name) => ({ name, m: PROC_RE.exec(name) })).filter((p) => p.m !== null);
  const mine = procs.filter((p) => Number(p.m![2]) === size);
  const committed = await Promise.all(mine.map((p) => liveVersionDir(join(base, p.name)).catch(() => null)));
  if (new Set(mine.filter((_, i) => committed[i] !== null).map((p) => Number(p.m![1]))).size !== size) return;
  for (const p of procs) if (Number(p.m![2]) !== size) await remove(join(base, p.name));
}

// ---- load ----------------------------------------------------------------------

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
 * Loads the newest save of `v` under `dir` (every process's part of it), routing
 * each key to this variable's shard by its partitioner (re-partitioning when the
 * saved shard count differs) and upserting it (`importRows`; nothing is cleared).
 * Before anything is written: the folder must belong to `v`, every table checkpoint
 * must fit (dim, key dtype) and every data file must match its size and CRC32C; only
 * then is the optimizer bound. Slots are restored when the saved layout equals the
 * bound optimizer's; scores when the saved score policy equals the table's.
 * @throws NotFoundError when `dir` holds no checkpoint of `v`; InvalidArgumentError
 *   (argument dir) for a checkpoint of another variable, dim or key dtype;
 *   CheckpointCorruptError; IOError
 */
export async function loadVariable(v: VariableState, dir: string, options: LoadOptions): Promise<void> {
  checkDir(dir);
  const o = checkOptions<LoadOptions>(options, ['optimizer', 'procSize', 'procRank']);
  const proc = procArgs(o, false);
  const opt = o.optimizer ?? null;
  if (opt !== null && !(opt instanceof Optimizer)) throw invalidParameter('optimizer', 'a de.optimizers optimizer', opt, InvalidTypeError);
  if (opt) checkBindable(v, opt);
  const base = variableFolder(dir, v.name);
  const parts = newestSave(await readParts(base), base) ?? [];
  const other = otherVariable(v.name, parts);
  if (other) {
    throw new InvalidArgumentError(
      `Expected dir to hold a checkpoint of variable "${v.name}" but "${base}" holds one of variable "${other.variable}" ` +
        `(names that differ only in '/' and '_' share one folder)`,
      { argument: 'dir' },
    );
  }
  const found = parts.flatMap((p) => p.folders);
  if (!found.some((f) => f.kind === 'shard') && v.cfg.kvCreator.savesRows) {
    throw new NotFoundError(`Expected dir to hold a checkpoint of variable "${v.name}" (${base}/proc_*) but found none`, { argument: 'dir' });
  }
  // Check every manifest, then every data file (sizes, CRC32C), before anything is written.
  const manifests: TableManifest[] = await Promise.all(found.map((f) => readTableManifest(f.path)));
  manifests.forEach((m, i) => {
    const path = found[i]!.path;
    if (m.dim !== v.dim) throw invalidParameter('dir', `checkpoints of dim ${v.dim} (variable "${v.name}")`, `dim ${m.dim} in ${path}`);
    if (m.keyDtype !== v.cfg.keyDtype) {
      throw invalidParameter('dir', `checkpoints of keyDtype ${v.cfg.keyDtype} (variable "${v.name}")`, `keyDtype ${m.keyDtype} in ${path}`);
    }
  });
  for (const f of found) await verifyCheckpoint(f.path);
  if (opt) await bind(v, opt, opt.spec, opt.slotNames, opt.name, v.cfg.bpV2 || opt.bpV2);
  for (const st of v.stores) await st.ready();
  const binding = v.binding;
  const keepProc = proc ? (k: bigint | number) => floorMod(k, proc.size) === proc.rank : () => true;
  for (let f = 0; f < found.length; f++) {
    const { path, kind } = found[f]!;
    const m = manifests[f]!;
    const targets: EmbeddingTable[] | null = kind === 'shard' ? v.tables : (binding?.stateTables ?? null);
    if (!targets) continue; // slots saved from companion tables, but this variable keeps none
    const savedLayout = { names: m.slots.map((s) => s.name), widths: m.slots.map((s) => (s.width === m.dim ? 'dim' : 1) as 'dim' | 1), initial: [] };
    const withSlots = m.slots.length > 0 && sameSlotLayout(savedLayout, targets[0]!.options.slots);
    const widths = m.slots.map((s) => s.width);
    for await (const raw of readCheckpointBatches(path)) {
      const b = filterBatch(raw, keepProc, m.dim, widths);
      if (!b) continue;
      const p = v.partition(b.keys as Keys);
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
