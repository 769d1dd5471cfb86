import { type FileHandle, open, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Keys } from '../dtypes.js';
import { CheckpointCorruptError, OutOfRangeError } from '../errors.js';
import { takeKeys } from '../keys.js';
import type { ExportBatch } from '../rawTable.js';
import type { EmbeddingTable } from '../table.js';
import { checkBatchSize, checkBoolean, checkDir, checkFilter, checkOptions, checkTable, RowMask } from './args.js';
import { crc32c } from './crc32c.js';
import { errnoOf, hex32, io, ioError, readChunks, readExactly, toHostOrder } from './fsio.js';
import { MANIFEST_FILE, readCurrent, resolveLive } from './layout.js';
import { checkFitsTable, ELEMENT_BYTES, KEYS_FILE, parseManifest, SCORES_FILE, type TableManifest, VALUES_FILE } from './manifest.js';

/** One batch read back from a checkpoint: fresh arrays owned by the caller. */
export type CheckpointBatch = ExportBatch;

/** Options of {@link loadTable}. */
export interface LoadTableOptions {
  /** Rows per batch handed to `importRows`. Default 65536. */
  batchSize?: number | null;
  /** Load only the keys for which this returns true (re-sharding). Default: all. */
  filter?: ((key: bigint) => boolean) | null;
  /** Clear the table (after verification, before loading) for an exact restore. Default false: rows are added/overwritten. */
  clear?: boolean | null;
}

/** A checkpoint with its manifest read and every data file open (so a concurrent save cannot pull files away). */
interface OpenCheckpoint {
  path: string;
  manifest: TableManifest;
  handles: Map<string, FileHandle>;
}

async function closeAll(handles: Iterable<FileHandle>): Promise<void> {
  await Promise.all([...handles].map((h) => h.close().catch(() => undefined)));
}

/** How long a reader keeps following CURRENT forward while concurrent saves delete the versions it read. */
const FOLLOW_CURRENT_MS = 10_000;

/**
 * Reads the live manifest and opens every data file (or none, with `openFiles` false).
 * A version deleted by a concurrent save after CURRENT was read is followed to the new CURRENT.
 */
async function openCheckpoint(dir: string, openFiles = true): Promise<OpenCheckpoint> {
  const started = Date.now();
  for (let attempt = 0; ; attempt++) {
    const live = await resolveLive(dir);
    const handles = new Map<string, FileHandle>();
    let file = join(live.path, MANIFEST_FILE);
    try {
      const manifest = parseManifest(await readFile(file, 'utf8'), file);
      for (const name of openFiles ? Object.keys(manifest.files) : []) {
        file = join(live.path, name);
        handles.set(name, await open(file, 'r'));
      }
      return { path: live.path, manifest, handles };
    } catch (e) {
      await closeAll(handles.values());
      if (errnoOf(e) !== 'ENOENT') throw ioError('open', file, e);
      // A save in another process may have switched CURRENT and deleted this version meanwhile:
      // follow CURRENT while it moves (8 tries, or longer within FOLLOW_CURRENT_MS: a reader
      // starved on a loaded machine can see several saves go by between two of its steps).
      const mayRetry = attempt < 8 || Date.now() - started < FOLLOW_CURRENT_MS;
      if (mayRetry && (await readCurrent(dir)) !== live.version) continue;
      const msg =
        handles.size === 0 && file.endsWith(MANIFEST_FILE)
          ? `Checkpoint manifest "${file}" is missing`
          : `Checkpoint file "${file}" is missing (listed in the manifest of "${live.path}")`;
      throw new CheckpointCorruptError(msg, { cause: e });
    }
  }
}

/**
 * Checks every data file's length, then its CRC32C, before anything is loaded.
 * `inspectKeys` sees the keys file's chunks (as LE bytes) during the CRC pass.
 */
async function verifyFiles(c: OpenCheckpoint, inspectKeys?: (chunk: Uint8Array, firstRow: number) => void): Promise<void> {
  const files = Object.entries(c.manifest.files);
  for (const [name, info] of files) {
    const path = join(c.path, name);
    const { size } = await io('stat', path, () => c.handles.get(name)!.stat());
    if (size !== info.bytes) {
      const what = size < info.bytes ? 'truncated' : `${size - info.bytes} bytes too long`;
      throw new CheckpointCorruptError(`Checkpoint file "${path}" is ${what}: expected ${info.bytes} bytes (manifest) but found ${size}`);
    }
  }
  for (const [name, info] of files) {
    const path = join(c.path, name);
    let crc = 0;
    let row = 0;
    const keyBytes = ELEMENT_BYTES[c.manifest.keyDtype];
    for await (const chunk of readChunks(c.handles.get(name)!, path, info.bytes)) {
      crc = crc32c(chunk, crc);
      if (name === KEYS_FILE && inspectKeys) {
        inspectKeys(chunk, row);
        row += chunk.length / keyBytes;
      }
    }
    if (crc !== info.crc32c) {
      throw new CheckpointCorruptError(
        `Checkpoint file "${path}" is corrupt: expected CRC32C ${hex32(info.crc32c)} (manifest) but computed ${hex32(crc)}`,
      );
    }
  }
}

async function readRows<T>(c: OpenCheckpoint, name: string, row: number, n: number, width: number, make: (b: ArrayBuffer) => T): Promise<T> {
  const elem = ELEMENT_BYTES[c.manifest.files[name]!.dtype];
  const buf = new ArrayBuffer(n * width * elem);
  const bytes = new Uint8Array(buf);
  await readExactly(c.handles.get(name)!, join(c.path, name), bytes, bytes.length, row * width * elem);
  toHostOrder(bytes, elem);
  return make(buf);
}

async function* batches(c: OpenCheckpoint, batchSize: number): AsyncGenerator<CheckpointBatch> {
  const m = c.manifest;
  const f32 = (b: ArrayBuffer): Float32Array => new Float32Array(b);
  for (let row = 0; row < m.rows; row += batchSize) {
    const n = Math.min(batchSize, m.rows - row);
    const keys: Keys = await readRows(c, KEYS_FILE, row, n, 1, (b) => (m.keyDtype === 'int64' ? new BigInt64Array(b) : new Int32Array(b)));
    const values = await readRows(c, VALUES_FILE, row, n, m.dim, f32);
    const slots: Float32Array[] = [];
    for (const s of m.slots) slots.push(await readRows(c, s.file, row, n, s.width, f32));
    const scores = await readRows(c, SCORES_FILE, row, n, 1, (b) => new BigUint64Array(b));
    yield { keys, values, slots, scores };
  }
}

/**
 * Reads and checks the manifest of the live checkpoint in `dir` (data files are not read).
 * @throws NotFoundError (no checkpoint), CheckpointCorruptError, IOError
 */
export async function readTableManifest(dir: string): Promise<TableManifest> {
  checkDir(dir);
  return (await openCheckpoint(resolve(dir), false)).manifest;
}

/**
 * Verifies every file of the checkpoint in `dir` (lengths and CRC32C) and returns its manifest.
 * @throws CheckpointCorruptError naming the file, expected vs found
 */
export async function verifyCheckpoint(dir: string): Promise<TableManifest> {
  checkDir(dir);
  const c = await openCheckpoint(resolve(dir));
  try {
    await verifyFiles(c);
    return c.manifest;
  } finally {
    await closeAll(c.handles.values());
  }
}

/**
 * Streams a checkpoint's rows in batches of `batchSize` (default 65536), for facades
 * that re-partition rows themselves. Every file is verified before the first batch is
 * yielded; memory is one batch.
 * @throws (on the first `next()`) NotFoundError, CheckpointCorruptError, IOError
 */
export async function* readCheckpointBatches(dir: string, batchSize?: number | null): AsyncGenerator<CheckpointBatch> {
  checkDir(dir);
  const size = checkBatchSize(batchSize);
  const c = await openCheckpoint(resolve(dir));
  try {
    await verifyFiles(c);
    yield* batches(c, size);
  } finally {
    await closeAll(c.handles.values());
  }
}

/**
 * The keys pass of the verification: runs `filter` over every key (once each, marking
 * the kept rows in `mask`) and, for static tables, checks every kept key is a row index.
 */
function keyInspector(c: OpenCheckpoint, table: EmbeddingTable, filter: ((key: bigint) => boolean) | null, mask: RowMask | null) {
  const n = table.options.vocabularySize;
  const wide = c.manifest.keyDtype === 'int64';
  const ranged = table.kind === 'static';
  if (!ranged && filter === null) return undefined;
  return (chunk: Uint8Array, firstRow: number): void => {
    const dv = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const count = chunk.length / (wide ? 8 : 4);
    for (let i = 0; i < count; i++) {
      const k = wide ? dv.getBigInt64(i * 8, true) : BigInt(dv.getInt32(i * 4, true));
      if (filter !== null && !filter(k)) continue;
      mask?.set(firstRow + i);
      if (ranged && (k < 0n || k >= BigInt(n))) {
        throw new OutOfRangeError(
          `Checkpoint "${c.path}" holds key ${k} (row ${firstRow + i}), outside [0, ${n}) of static table "${table.name}"`,
          { argument: 'dir' },
        );
      }
    }
  };
}

/** The rows of batch `b` (rows first.. of the checkpoint) that `mask` keeps, or null when none. */
function applyMask(b: CheckpointBatch, mask: RowMask, first: number, dim: number, widths: number[]): CheckpointBatch | null {
  const keep = mask.kept(first, b.keys.length);
  if (keep.length === b.keys.length) return b;
  if (keep.length === 0) return null;
  const gather = (src: Float32Array, w: number): Float32Array => {
    const out = new Float32Array(keep.length * w);
    keep.forEach((r, j) => out.set(src.subarray(r * w, (r + 1) * w), j * w));
    return out;
  };
  const keys = takeKeys(b.keys, keep);
  return {
    keys,
    values: gather(b.values, dim),
    slots: b.slots.map((s, i) => gather(s, widths[i]!)),
    scores: BigUint64Array.from(keep, (r) => b.scores[r]!),
  };
}

/**
 * Loads the live checkpoint in `dir` into `table` with `importRows`, in batches.
 * Before anything is loaded: the manifest must fit the table (kind, keyDtype, dim,
 * slots; vocabularySize for static tables unless `filter` is set), and every file's
 * length and CRC32C must match (static tables: every key loaded must be a row index);
 * `filter` runs then, once per key (an error it throws propagates before any write).
 * Scores are loaded when the table's score policy equals the checkpoint's (dynamic
 * tables); otherwise the policy's defaults apply. Rows already in the table and absent
 * from the checkpoint stay unless `clear` is set.
 *
 * @returns the checkpoint's manifest
 * @throws InvalidArgumentError naming the mismatched field; CheckpointCorruptError
 *   naming the file, expected vs found; NotFoundError; IOError — the table is then unchanged
 */
export async function loadTable(table: EmbeddingTable, dir: string, options?: LoadTableOptions | null): Promise<TableManifest> {
  checkTable(table);
  checkDir(dir);
  const o = checkOptions<LoadTableOptions>(options, ['batchSize', 'filter', 'clear']);
  const batchSize = checkBatchSize(o.batchSize);
  const filter = checkFilter(o.filter);
  const clear = checkBoolean(o.clear, 'clear', false);
  const c = await openCheckpoint(resolve(dir));
  try {
    const m = c.manifest;
    checkFitsTable(m, table, c.path, filter !== null);
    const mask = filter ? new RowMask(m.rows) : null;
    await verifyFiles(c, keyInspector(c, table, filter, mask));
    if (clear) await table.clear();
    const withScores = table.kind === 'dynamic' && table.options.scorePolicy === m.scorePolicy;
    const widths = table.slotWidths;
    let row = 0;
    for await (const raw of batches(c, batchSize)) {
      const b = mask ? applyMask(raw, mask, row, m.dim, widths) : raw;
      row += raw.keys.length;
      if (b) await table.importRows(b.keys, b.values, b.slots, withScores ? b.scores : null);
    }
    return m;
  } finally {
    await closeAll(c.handles.values());
  }
}
