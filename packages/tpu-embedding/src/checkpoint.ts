import { mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import {
  AlreadyExistsError,
  CheckpointCorruptError,
  crc32c,
  fileNameOf,
  InvalidArgumentError,
  InvalidTypeError,
  IOError,
  invalidParameter,
  loadTable,
  NotFoundError,
  saveTable,
  verifyCheckpoint,
  writeDurableFile,
} from '@embedstack/core';
import type { ShardedTable } from './shardedTable.js';

/**
 * `TPUEmbedding.save` / `restore` on disk:
 *
 *   <dir>/tpu_embedding.json   this package's manifest (written last)
 *   <dir>/<table name>/        one core table checkpoint per table (saveTable):
 *                              int64 row keys, values, one file per optimizer slot
 *
 * Each table is saved unsharded (global row keys), so a checkpoint restores into a
 * TPUEmbedding with any numHosts. Table directory names are the table names with
 * `encodeURIComponent` (and '.' escaped).
 *
 * The manifest carries `manifestCrc32c`, the CRC-32C of its JSON written without that
 * field (2-space indent), as core's table manifests do; restore refuses a manifest whose
 * content does not hash to it (CHECKPOINT_CORRUPT). Manifests written before the field
 * existed have none and still load.
 */
export const MANIFEST = 'tpu_embedding.json';
export const FORMAT = 'embedstack.tpu-embedding';
export const FORMAT_VERSION = 1;

interface TableEntry {
  name: string;
  dir: string;
  vocabularySize: number;
  dim: number;
  combiner: string;
  optimizer: string | null;
  slots: string[];
}

interface Manifest {
  format: typeof FORMAT;
  formatVersion: number;
  /** Optimizer steps applied so far (the next step is step + 1). */
  step: number;
  numHosts: number;
  tables: TableEntry[];
  /** CRC-32C of this JSON written without this field (2-space indent); absent in older checkpoints. */
  manifestCrc32c?: number;
}

const hex32 = (n: number): string => `0x${(n >>> 0).toString(16).padStart(8, '0')}`;

/** CRC-32C of the manifest's JSON without its checksum field (the text core's table manifests hash too). */
function manifestCrc(m: Omit<Manifest, 'manifestCrc32c'>): number {
  return crc32c(new TextEncoder().encode(JSON.stringify(m, null, 2)));
}

export function checkDir(dir: unknown): string {
  if (typeof dir !== 'string' || dir.length === 0) throw invalidParameter('dir', 'a non-empty path string', dir, InvalidTypeError);
  return resolve(dir);
}

function entryOf(t: ShardedTable): TableEntry {
  return {
    name: t.name,
    dir: fileNameOf(t.name),
    vocabularySize: t.vocabularySize,
    dim: t.dim,
    combiner: t.config.combiner,
    optimizer: t.optimizer?.kind ?? null,
    slots: [...(t.optimizer?.slotNames ?? [])],
  };
}

/**
 * Writes every table and then the manifest into `dir`, which is created, or must be
 * an empty directory. A save that fails removes what it wrote (and the directories it
 * created), so `dir` is as before and the save can be retried there.
 * @throws AlreadyExistsError when `dir` exists and is not empty; InvalidArgumentError
 *   when it is not a directory; IOError for file-system failures
 */
export async function saveTables(dir: string, tables: readonly ShardedTable[], step: number): Promise<void> {
  const root = checkDir(dir);
  const s = await stat(root).catch(() => null);
  if (s) {
    if (!s.isDirectory()) throw invalidParameter('dir', 'a directory path (or a path to create)', `a file at ${root}`);
    const entries = await readdir(root);
    if (entries.length > 0) {
      throw new AlreadyExistsError(`Expected dir to be a new or empty directory but "${root}" holds ${entries.length} entries`, { argument: 'dir' });
    }
  }
  // the topmost directory this save creates (mkdir's answer), or undefined when dir existed
  const created = s
    ? undefined
    : await mkdir(root, { recursive: true }).catch((e: unknown) => {
        throw new IOError(`Could not create checkpoint directory "${root}": ${(e as Error).message}`, { cause: e });
      });
  try {
    await writeAll(root, tables, step);
  } catch (e) {
    // dir was new or empty: everything in it is this save's
    if (created !== undefined) await rm(created, { recursive: true, force: true }).catch(() => undefined);
    else for (const entry of await readdir(root).catch(() => [] as string[])) await rm(join(root, entry), { recursive: true, force: true }).catch(() => undefined);
    throw e;
  }
}

async function writeAll(root: string, tables: readonly ShardedTable[], step: number): Promise<void> {
  for (const t of tables) {
    await saveTable(t.checkpointView(), join(root, fileNameOf(t.name)), {
      extra: { tpuEmbedding: { combiner: t.config.combiner, optimizer: t.optimizer?.kind ?? null } },
    });
  }
  const body: Omit<Manifest, 'manifestCrc32c'> = {
    format: FORMAT,
    formatVersion: FORMAT_VERSION,
    step,
    numHosts: tables[0]?.hosts ?? 1,
    tables: tables.map(entryOf),
  };
  const manifest: Manifest = { ...body, manifestCrc32c: manifestCrc(body) };
  const tmp = join(root, `${MANIFEST}.tmp`);
  try {
    await writeDurableFile(tmp, JSON.stringify(manifest, null, 2) + '\n');
    await rename(tmp, join(root, MANIFEST));
    const d = await open(root, 'r');
    await d.sync().finally(() => d.close());
  } catch (e) {
    await rm(tmp, { force: true });
    throw new IOError(`Could not write "${join(root, MANIFEST)}": ${(e as Error).message}`, { cause: e });
  }
}

async function readManifest(root: string): Promise<Manifest> {
  const path = join(root, MANIFEST);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new NotFoundError(`Expected dir to hold a TPUEmbedding checkpoint but "${path}" does not exist`, { argument: 'dir' });
    }
    throw new IOError(`Could not read "${path}": ${(e as Error).message}`, { cause: e });
  }
  let m: Manifest;
  try {
    m = JSON.parse(text) as Manifest;
  } catch (e) {
    throw new CheckpointCorruptError(`"${path}" is not valid JSON: ${(e as Error).message}`, { cause: e });
  }
  if (typeof m === 'object' && m !== null && m.manifestCrc32c !== undefined) {
    const { manifestCrc32c: stored, ...rest } = m;
    const computed = manifestCrc(rest);
    if (computed !== stored) {
      throw new CheckpointCorruptError(
        `"${path}" is corrupt: expected manifestCrc32c ${typeof stored === 'number' ? hex32(stored) : JSON.stringify(stored)} (stored) but the content hashes to ${hex32(computed)}`,
      );
    }
  }
  const ok =
    typeof m === 'object' &&
    m !== null &&
    m.format === FORMAT &&
    m.formatVersion === FORMAT_VERSION &&
    Number.isSafeInteger(m.step) &&
    m.step >= 0 &&
    Array.isArray(m.tables);
  if (!ok) throw new CheckpointCorruptError(`"${path}" is not a ${FORMAT} manifest of version ${FORMAT_VERSION}`);
  return m;
}

/**
 * Checks that the checkpoint in `dir` fits `tables` (names, shapes, combiners,
 * optimizer slots) and that every table's files are intact, then loads parameters
 * and slots into blank copies of the tables (`blankCopy`), which it returns: the
 * caller swaps them in, so `tables` never change, even when loading fails part-way
 * (the copies are then disposed).
 * @returns the step counter stored in the checkpoint and the loaded tables (in the order of `tables`)
 * @throws NotFoundError (no manifest), CheckpointCorruptError, InvalidArgumentError
 *   naming the table and field that differ, IOError
 */
export async function restoreTables(dir: string, tables: readonly ShardedTable[]): Promise<{ step: number; loaded: ShardedTable[] }> {
  const root = checkDir(dir);
  const m = await readManifest(root);
  const byName = new Map(m.tables.map((t) => [t.name, t]));
  if (m.tables.length !== tables.length || tables.some((t) => !byName.has(t.name))) {
    throw new InvalidArgumentError(
      `Expected the checkpoint in dir to hold the tables [${tables.map((t) => t.name).join(', ')}] but it holds [${m.tables.map((t) => t.name).join(', ')}]`,
      { argument: 'dir' },
    );
  }
  for (const t of tables) {
    const want = entryOf(t);
    const got = byName.get(t.name)!;
    for (const field of ['vocabularySize', 'dim', 'combiner', 'optimizer', 'slots'] as const) {
      if (JSON.stringify(want[field]) !== JSON.stringify(got[field])) {
        throw new InvalidArgumentError(
          `Expected table "${t.name}" in the checkpoint to have ${field} ${JSON.stringify(want[field])} (this TPUEmbedding's) but it has ${JSON.stringify(got[field])}`,
          { argument: 'dir' },
        );
      }
    }
  }
  for (const t of tables) await verifyCheckpoint(join(root, byName.get(t.name)!.dir));
  const loaded: ShardedTable[] = [];
  try {
    for (const t of tables) {
      const fresh = t.blankCopy();
      loaded.push(fresh);
      await loadTable(fresh.checkpointView(), join(root, byName.get(t.name)!.dir), { clear: true });
    }
  } catch (e) {
    for (const t of loaded) t.dispose();
    throw e;
  }
  return { step: m.step, loaded };
}
