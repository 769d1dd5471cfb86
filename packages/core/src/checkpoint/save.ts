import { join, resolve } from 'node:path';
import { FailedPreconditionError, InternalError, InvalidArgumentError, InvalidTypeError, invalidParameter } from '../errors.js';
import type { EmbeddingTable } from '../table.js';
import { checkBatchSize, checkDir, checkKnownKeys, checkOptions, checkTable } from './args.js';
import { DataFileWriter, leBytes, writeSmallFile } from './fsio.js';
import { MANIFEST_FILE } from './layout.js';
import { commitVersion } from './versionedDir.js';
import {
  CHECKPOINT_FORMAT,
  CHECKPOINT_FORMAT_VERSION,
  type CheckpointDtype,
  type CheckpointFileInfo,
  initializerToJson,
  KEYS_FILE,
  manifestToJson,
  SCORES_FILE,
  slotFileName,
  type TableManifest,
  VALUES_FILE,
} from './manifest.js';

/** Options of {@link saveTable}. */
export interface SaveTableOptions {
  /** Rows per exported batch (memory: one batch of keys, values, slots, scores). Default 65536. */
  batchSize?: number | null;
  /** Shard layout recorded in the manifest. Default { index: 0, count: 1 }. */
  shard?: {
    /** This shard's index, in [0, count). */
    index: number;
    /** Number of shards, >= 1. */
    count: number;
  } | null;
  /** Facade data stored in the manifest; must be JSON-serialisable. Default {}. */
  extra?: Record<string, unknown> | null;
}

function checkShard(v: unknown): { index: number; count: number } {
  if (v === undefined || v === null) return { index: 0, count: 1 };
  const s = v as { index?: unknown; count?: unknown };
  if (typeof s === 'object' && !Array.isArray(s)) checkKnownKeys(s, ['index', 'count'], 'shard', 'fields');
  const ok =
    typeof s === 'object' &&
    Number.isSafeInteger(s.count) &&
    (s.count as number) >= 1 &&
    Number.isSafeInteger(s.index) &&
    (s.index as number) >= 0 &&
    (s.index as number) < (s.count as number);
  if (!ok) {
    const wrongType = typeof s !== 'object' || typeof s.count !== 'number' || typeof s.index !== 'number';
    throw invalidParameter('shard', '{ index, count } with integers 0 <= index < count', v, wrongType ? InvalidTypeError : InvalidArgumentError);
  }
  return { index: s.index as number, count: s.count as number };
}

function checkExtra(v: unknown): Record<string, unknown> {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalidParameter('extra', 'a plain JSON object', v, InvalidTypeError);
  try {
    return JSON.parse(JSON.stringify(v)) as Record<string, unknown>;
  } catch (e) {
    throw invalidParameter('extra', `JSON-serialisable (${(e as Error).message})`, v);
  }
}

/**
 * Starts watching `table` for writes while it is exported: throws now when a write is
 * still running, and the returned check throws when one started since. Either way the
 * export would hold rows of two states, or skip rows (its order changes).
 * A table without writeState (another copy of core) is not watched.
 */
export function watchWrites(table: EmbeddingTable, what: string): () => void {
  if (typeof table.writeState !== 'function') return () => undefined;
  const before = table.writeState();
  const fail = (detail: string): FailedPreconditionError =>
    new FailedPreconditionError(
      `Cannot ${what}: table "${table.name}" was written during it (${detail}), so its rows would come from two states or be skipped; ` +
        'nothing was saved. Await every write to the table before saving',
    );
  if (before.inFlight > 0) throw fail(`${before.inFlight} write(s) still running when the export began`);
  return () => {
    const after = table.writeState();
    if (after.started !== before.started) throw fail(`${after.started - before.started} write(s) started during the export`);
  };
}

/** Writes the table's rows into `tmp` as data files; returns the files' info and the row count. */
async function writeDataFiles(table: EmbeddingTable, tmp: string, batchSize: number, what: string): Promise<[Record<string, CheckpointFileInfo>, number]> {
  const dim = table.dim;
  const widths = table.slotWidths;
  const slotFiles = table.slotNames.map(slotFileName);
  const names = [KEYS_FILE, VALUES_FILE, ...slotFiles, SCORES_FILE];
  const writers: DataFileWriter[] = [];
  try {
    for (const name of names) writers.push(await DataFileWriter.create(join(tmp, name)));
    let rows = 0;
    const keyType = table.keyDtype === 'int64' ? BigInt64Array : Int32Array;
    const unchanged = watchWrites(table, what);
    for await (const b of table.exportBatches(batchSize)) {
      const n = b.keys.length;
      const ok =
        b.keys instanceof keyType &&
        b.values.length === n * dim &&
        b.slots.length === widths.length &&
        b.slots.every((s, i) => s.length === n * widths[i]!) &&
        b.scores.length === n;
      if (!ok) throw new InternalError(`Backend "${table.backendName}" exported a malformed batch for table "${table.name}" (rows ${rows}..)`);
      const chunks = [leBytes(b.keys), leBytes(b.values), ...b.slots.map(leBytes), leBytes(b.scores)];
      await Promise.all(chunks.map((c, i) => writers[i]!.write(c)));
      rows += n;
    }
    unchanged();
    const done = await Promise.all(writers.map((w) => w.finish()));
    const files: Record<string, CheckpointFileInfo> = {};
    const dtypes: CheckpointDtype[] = [table.keyDtype, 'float32', ...slotFiles.map((): CheckpointDtype => 'float32'), 'uint64'];
    const shapes = [[rows], [rows, dim], ...widths.map((w) => [rows, w]), [rows]];
    names.forEach((name, i) => (files[name] = { dtype: dtypes[i]!, shape: shapes[i]!, ...done[i]! }));
    return [files, rows];
  } catch (e) {
    await Promise.all(writers.map((w) => w.abandon()));
    throw e;
  }
}

/**
 * Saves one table's rows, slots and scores into the checkpoint directory `dir`
 * (created if needed), crash-safely: the new version is written to a temp directory,
 * fsynced, renamed into place and made live by an atomic rename of `CURRENT`; a crash
 * at any point leaves the previous checkpoint loadable (docs/checkpoint-format.md).
 *
 * Streams the table with `exportBatches(batchSize)`: memory is one batch. The table
 * must not be written while it is saved (its export order would change): a write
 * still running when the export begins, or started during it, fails the save with
 * FailedPreconditionError and the previous checkpoint stays live; await every write
 * before saving. One save
 * per `dir` at a time: saves from this process run one after another in call order;
 * another live process saving into `dir` -> FailedPreconditionError.
 *
 * @returns the manifest written
 * @throws InvalidArgumentError / InvalidTypeError for bad arguments; IOError (with
 *   `cause`) for file-system failures; FailedPreconditionError (another process holds
 *   the lock, or the table was written during the save); the previous checkpoint is
 *   then still live
 */
export async function saveTable(table: EmbeddingTable, dir: string, options?: SaveTableOptions | null): Promise<TableManifest> {
  checkTable(table);
  checkDir(dir);
  const o = checkOptions<SaveTableOptions>(options, ['batchSize', 'shard', 'extra']);
  const batchSize = checkBatchSize(o.batchSize);
  const shard = checkShard(o.shard);
  const extra = checkExtra(o.extra);
  const root = resolve(dir);
  const what = `save into "${root}"`;
  const fill = async ({ tmp }: { tmp: string }): Promise<TableManifest> => {
    const createdAt = new Date().toISOString();
    const [files, rows] = await writeDataFiles(table, tmp, batchSize, what);
    const opts = table.options;
    const manifest: TableManifest = {
      format: CHECKPOINT_FORMAT,
      formatVersion: CHECKPOINT_FORMAT_VERSION,
      byteOrder: 'little',
      createdAt,
      writer: { library: '@embedstack/core', backend: table.backendName },
      name: table.name,
      kind: table.kind,
      keyDtype: table.keyDtype,
      dim: table.dim,
      vocabularySize: opts.vocabularySize,
      rows,
      initCapacity: opts.initCapacity,
      maxCapacity: Number.isFinite(opts.maxCapacity) ? opts.maxCapacity : null,
      scorePolicy: opts.scorePolicy,
      initializer: initializerToJson(opts.initializer),
      seed: opts.seed,
      stream: opts.stream,
      slots: table.slotNames.map((name, i) => ({
        name,
        width: table.slotWidths[i]!,
        initial: opts.slots.initial[i]!,
        file: slotFileName(name),
      })),
      shard,
      extra,
      files,
    };
    const json = manifestToJson(manifest);
    await writeSmallFile(join(tmp, MANIFEST_FILE), json);
    return JSON.parse(json) as TableManifest;
  };
  return (await commitVersion(root, what, fill)).value;
}
