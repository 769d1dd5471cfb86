import { type FileHandle, open, readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { CheckpointCorruptError, InvalidArgumentError, invalidParameter, NotFoundError, OutOfRangeError } from '../errors.js';
import type { EmbeddingTable } from '../table.js';
import { checkBatchSize, checkBoolean, checkDir, checkFilter, checkOptions, checkTable, RowMask } from './args.js';
import { DataFileWriter, errnoOf, HOST_IS_LE, io, ioError, leBytes, readChunks, readExactly, toHostOrder } from './fsio.js';
import { liveFolder, replaceFolder } from './layout.js';
import { checkInteger, errorClassFor } from '../validation.js';
import { watchWrites } from './save.js';

/**
 * HugeCTR's sparse model layout: a folder with `key` (raw int64 LE, or uint32 LE when
 * the model was trained with `supportlonglong: false`) and `emb_vector` (raw float32 LE
 * [n, dim]), same row order, no header. HPS reads these folders unchanged.
 */

/** Name of the keys file in a HugeCTR sparse model folder: `'key'`. */
export const HUGECTR_KEY_FILE = 'key';
/** Name of the vectors file in a HugeCTR sparse model folder: `'emb_vector'` (float32 LE, [rows, dim]). */
export const HUGECTR_VECTOR_FILE = 'emb_vector';
/** Files an existing folder may hold for exportHugeCTR to replace it. */
const HUGECTR_FILES = new Set([HUGECTR_KEY_FILE, HUGECTR_VECTOR_FILE, 'meta', 'slot_id']);

/** Key width of a HugeCTR `key` file: 8-byte signed (`'int64'`) or 4-byte unsigned (`'uint32'`, models trained with `supportlonglong: false`), little-endian. */
export type HugeCTRKeyFormat = 'int64' | 'uint32';

/** Options of {@link inspectHugeCTRModel} and {@link readHugeCTRModel}. */
export interface HugeCTRReadOptions {
  /** Rows per batch. Default 65536. */
  batchSize?: number | null;
  /** Key width of the files: 'int64' (default) or 'uint32' (HugeCTR with supportlonglong false). */
  keyFormat?: HugeCTRKeyFormat | null;
  /** Accept a folder with zero rows. Default true (HPS passes false: HugeCTR refuses empty files). */
  allowEmpty?: boolean | null;
}

/** Sizes of a HugeCTR sparse model folder, as {@link inspectHugeCTRModel} returns them. */
export interface HugeCTRModelInfo {
  /** The folder actually read (the target, or its complete replacement after a crashed export). */
  folder: string;
  /** Number of rows (keys) in the model. */
  rows: number;
  /** Length of the `key` file in bytes (rows * 8, or rows * 4 for uint32 keys). */
  keyBytes: number;
  /** Length of the `emb_vector` file in bytes (rows * dim * 4). */
  vectorBytes: number;
}

/** One batch of rows read by {@link readHugeCTRModel}: fresh host arrays owned by the caller. */
export interface HugeCTRBatch {
  /** [n] keys (uint32 files are widened to int64). */
  keys: BigInt64Array;
  /** [n * dim] */
  values: Float32Array;
}

function checkKeyFormat(v: unknown): HugeCTRKeyFormat {
  if (v === undefined || v === null) return 'int64';
  if (v !== 'int64' && v !== 'uint32') throw invalidParameter('keyFormat', "'int64' or 'uint32'", v, errorClassFor(v, 'string'));
  return v;
}

const checkDim = (v: unknown): number => checkInteger(v, 'dim', { min: 1 });

interface OpenModel extends HugeCTRModelInfo {
  key: FileHandle;
  vec: FileHandle;
  keyWidth: number;
}

async function openModel(dir: string, dim: number, keyFormat: HugeCTRKeyFormat, allowEmpty: boolean): Promise<OpenModel> {
  const folder = await liveFolder(resolve(dir));
  if (folder === null) throw new NotFoundError(`Expected dir to be a HugeCTR sparse model folder but "${dir}" does not exist`, { argument: 'dir' });
  const handles: FileHandle[] = [];
  const openFile = async (name: string): Promise<FileHandle> => {
    const path = join(folder, name);
    try {
      const h = await open(path, 'r');
      handles.push(h);
      return h;
    } catch (e) {
      if (errnoOf(e) === 'ENOENT') throw new CheckpointCorruptError(`HugeCTR model file "${path}" is missing`, { cause: e });
      throw ioError('open', path, e);
    }
  };
  try {
    const key = await openFile(HUGECTR_KEY_FILE);
    const vec = await openFile(HUGECTR_VECTOR_FILE);
    const keyPath = join(folder, HUGECTR_KEY_FILE);
    const vecPath = join(folder, HUGECTR_VECTOR_FILE);
    const keyBytes = (await io('stat', keyPath, () => key.stat())).size;
    const vectorBytes = (await io('stat', vecPath, () => vec.stat())).size;
    const keyWidth = keyFormat === 'int64' ? 8 : 4;
    if (keyBytes % keyWidth !== 0) {
      throw new CheckpointCorruptError(`HugeCTR model file "${keyPath}" has ${keyBytes} bytes, expected a multiple of ${keyWidth} (${keyFormat} keys)`);
    }
    const rows = keyBytes / keyWidth;
    if (vectorBytes !== rows * dim * 4) {
      throw new CheckpointCorruptError(
        `HugeCTR model file "${vecPath}" has ${vectorBytes} bytes, expected ${rows * dim * 4} (${rows} keys in "${keyPath}" x dim ${dim} x 4 bytes)`,
      );
    }
    if (rows === 0 && !allowEmpty) throw new CheckpointCorruptError(`HugeCTR model file "${keyPath}" is empty`);
    return { folder, rows, keyBytes, vectorBytes, key, vec, keyWidth };
  } catch (e) {
    await Promise.all(handles.map((h) => h.close().catch(() => undefined)));
    throw e;
  }
}

async function closeModel(m: OpenModel): Promise<void> {
  await Promise.all([m.key.close().catch(() => undefined), m.vec.close().catch(() => undefined)]);
}

async function* modelBatches(m: OpenModel, dim: number, batchSize: number): AsyncGenerator<HugeCTRBatch> {
  const keyPath = join(m.folder, HUGECTR_KEY_FILE);
  const vecPath = join(m.folder, HUGECTR_VECTOR_FILE);
  for (let row = 0; row < m.rows; row += batchSize) {
    const n = Math.min(batchSize, m.rows - row);
    const kb = new Uint8Array(n * m.keyWidth);
    await readExactly(m.key, keyPath, kb, kb.length, row * m.keyWidth);
    toHostOrder(kb, m.keyWidth);
    const keys = m.keyWidth === 8 ? new BigInt64Array(kb.buffer) : BigInt64Array.from(new Uint32Array(kb.buffer), (k) => BigInt(k));
    const vb = new Uint8Array(n * dim * 4);
    await readExactly(m.vec, vecPath, vb, vb.length, row * dim * 4);
    toHostOrder(vb, 4);
    yield { keys, values: new Float32Array(vb.buffer) };
  }
}

/**
 * Sizes of a HugeCTR sparse model folder, checked (`key` a multiple of the key width,
 * `emb_vector` = rows * dim * 4 bytes). Cheap: reads no data. For progress reporting.
 * @throws NotFoundError (no folder), CheckpointCorruptError naming the file and sizes
 */
export async function inspectHugeCTRModel(dir: string, dim: number, options?: HugeCTRReadOptions | null): Promise<HugeCTRModelInfo> {
  checkDir(dir);
  const d = checkDim(dim);
  const o = checkOptions<HugeCTRReadOptions>(options, ['batchSize', 'keyFormat', 'allowEmpty']);
  const m = await openModel(dir, d, checkKeyFormat(o.keyFormat), checkBoolean(o.allowEmpty, 'allowEmpty', true));
  await closeModel(m);
  return { folder: m.folder, rows: m.rows, keyBytes: m.keyBytes, vectorBytes: m.vectorBytes };
}

/**
 * Streams a HugeCTR sparse model folder in batches (memory: one batch), after checking
 * the file sizes agree. Validation happens on the first `next()`.
 * @throws NotFoundError, CheckpointCorruptError naming the file and sizes, IOError
 */
export async function* readHugeCTRModel(dir: string, dim: number, options?: HugeCTRReadOptions | null): AsyncGenerator<HugeCTRBatch> {
  checkDir(dir);
  const d = checkDim(dim);
  const o = checkOptions<HugeCTRReadOptions>(options, ['batchSize', 'keyFormat', 'allowEmpty']);
  const batchSize = checkBatchSize(o.batchSize);
  const m = await openModel(dir, d, checkKeyFormat(o.keyFormat), checkBoolean(o.allowEmpty, 'allowEmpty', true));
  try {
    yield* modelBatches(m, d, batchSize);
  } finally {
    await closeModel(m);
  }
}

/** Options of {@link importHugeCTR}: the read options plus a key filter. */
export interface ImportHugeCTROptions extends HugeCTRReadOptions {
  /** Import only the keys for which this returns true. Default: all. */
  filter?: ((key: bigint) => boolean) | null;
}

/**
 * Before anything is loaded: runs `filter` over every key (once each; the rows it keeps
 * are returned as a mask) and checks every kept key fits the table (int32 range, static
 * row range). Null when there is nothing to check and no filter.
 */
async function scanKeys(m: OpenModel, table: EmbeddingTable, filter: ((key: bigint) => boolean) | null): Promise<RowMask | null> {
  const [lo, hi] =
    table.kind === 'static'
      ? [0n, BigInt(table.options.vocabularySize) - 1n]
      : table.keyDtype === 'int32'
        ? [-(1n << 31n), (1n << 31n) - 1n]
        : [null, null];
  if ((lo === null || hi === null) && filter === null) return null;
  const mask = filter ? new RowMask(m.rows) : null;
  const path = join(m.folder, HUGECTR_KEY_FILE);
  let row = 0;
  for await (const chunk of readChunks(m.key, path, m.keyBytes)) {
    const dv = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    for (let off = 0; off < chunk.length; off += m.keyWidth, row++) {
      const k = m.keyWidth === 8 ? dv.getBigInt64(off, true) : BigInt(dv.getUint32(off, true));
      if (filter !== null && !filter(k)) continue;
      mask?.set(row);
      if (lo !== null && hi !== null && (k < lo || k > hi)) {
        throw new OutOfRangeError(
          `HugeCTR model file "${path}" holds key ${k} (row ${row}), outside [${lo}, ${hi}] of ${table.kind} ${table.keyDtype} table "${table.name}"`,
          { argument: 'dir' },
        );
      }
    }
  }
  return mask;
}

/**
 * Imports a HugeCTR sparse model folder into `table` (values only: slots get their
 * initial values, scores the policy's defaults). Before anything is loaded: the sizes
 * are checked, `filter` runs over every key (once each; an error it throws propagates
 * then), and (for int32 or static tables) every kept key's range is checked. The data
 * is then read again to load it: if the files change meanwhile (truncated, rewritten),
 * or the backend fails, the rows of the batches before the failure stay imported.
 * @returns the number of rows imported
 * @throws NotFoundError, CheckpointCorruptError, OutOfRangeError, IOError — the table is
 *   unchanged when the failure is found before loading (everything above)
 */
export async function importHugeCTR(dir: string, table: EmbeddingTable, options?: ImportHugeCTROptions | null): Promise<number> {
  checkDir(dir);
  checkTable(table);
  const o = checkOptions<ImportHugeCTROptions>(options, ['batchSize', 'keyFormat', 'allowEmpty', 'filter']);
  const batchSize = checkBatchSize(o.batchSize);
  const filter = checkFilter(o.filter);
  const m = await openModel(dir, table.dim, checkKeyFormat(o.keyFormat), checkBoolean(o.allowEmpty, 'allowEmpty', true));
  try {
    const mask = await scanKeys(m, table, filter);
    let imported = 0;
    let row = 0;
    const dim = table.dim;
    for await (const b of modelBatches(m, dim, batchSize)) {
      let { keys, values } = b;
      const first = row;
      row += keys.length;
      if (mask) {
        const keep = mask.kept(first, keys.length);
        if (keep.length < keys.length) {
          keys = BigInt64Array.from(keep, (r) => b.keys[r]!);
          values = new Float32Array(keep.length * dim);
          keep.forEach((r, j) => values.set(b.values.subarray(r * dim, (r + 1) * dim), j * dim));
        }
      }
      if (keys.length === 0) continue;
      await table.importRows(table.keyDtype === 'int32' ? Int32Array.from(keys, Number) : keys, values);
      imported += keys.length;
    }
    return imported;
  } finally {
    await closeModel(m);
  }
}

/** Options of {@link exportHugeCTR}. */
export interface ExportHugeCTROptions {
  /** Rows per exported batch. Default 65536. */
  batchSize?: number | null;
  /** Key width to write: 'int64' (default) or 'uint32' (keys must then be in [0, 2^32)). */
  keyFormat?: HugeCTRKeyFormat | null;
}

async function checkReplaceable(path: string): Promise<void> {
  let entries;
  try {
    entries = await readdir(path, { withFileTypes: true });
  } catch (e) {
    if (errnoOf(e) === 'ENOTDIR') throw invalidParameter('dir', 'a folder path (it names a file)', path);
    throw ioError('list', path, e);
  }
  const foreign = entries.filter((e) => !e.isFile() || !HUGECTR_FILES.has(e.name)).map((e) => e.name);
  if (foreign.length > 0) {
    throw new InvalidArgumentError(
      `Expected dir to be a new or HugeCTR sparse model folder (only ${[...HUGECTR_FILES].join(', ')}) but "${path}" also holds ${foreign.slice(0, 5).join(', ')}; refusing to replace it`,
      { argument: 'dir' },
    );
  }
}

/**
 * Writes `table` as a HugeCTR sparse model folder `dir` (in the table's export order),
 * crash-safely: files go to a temp folder beside `dir`, are fsynced, and replace `dir`
 * by renames (see replaceFolder); an existing `dir` may hold only HugeCTR files.
 * Slots and scores are not part of the layout and are not written. The table must not
 * be written meanwhile (as for saveTable: FailedPreconditionError).
 * @throws InvalidArgumentError, OutOfRangeError (uint32 keys), IOError, FailedPreconditionError — `dir` is then unchanged
 */
export async function exportHugeCTR(table: EmbeddingTable, dir: string, options?: ExportHugeCTROptions | null): Promise<void> {
  checkTable(table);
  checkDir(dir);
  const o = checkOptions<ExportHugeCTROptions>(options, ['batchSize', 'keyFormat']);
  const batchSize = checkBatchSize(o.batchSize);
  const keyFormat = checkKeyFormat(o.keyFormat);
  await replaceFolder(dir, checkReplaceable, async (tmp) => {
    const kw = await DataFileWriter.create(join(tmp, HUGECTR_KEY_FILE));
    const vw = await DataFileWriter.create(join(tmp, HUGECTR_VECTOR_FILE));
    try {
      let row = 0;
      const unchanged = watchWrites(table, `export to "${resolve(dir)}"`);
      for await (const b of table.exportBatches(batchSize)) {
        await kw.write(keyBytes(b.keys, keyFormat, row, table.name));
        await vw.write(leBytes(b.values));
        row += b.keys.length;
      }
      unchanged();
      await kw.finish();
      await vw.finish();
    } catch (e) {
      await Promise.all([kw.abandon(), vw.abandon()]);
      throw e;
    }
  });
}

function keyBytes(keys: BigInt64Array | Int32Array, format: HugeCTRKeyFormat, firstRow: number, table: string): Uint8Array {
  if (format === 'int64') return leBytes(keys instanceof BigInt64Array ? keys : BigInt64Array.from(keys, (k) => BigInt(k)));
  const out = new Uint32Array(keys.length);
  for (let i = 0; i < keys.length; i++) {
    const k = BigInt(keys[i]!);
    if (k < 0n || k > 0xffffffffn) {
      throw new OutOfRangeError(`Expected every key of table "${table}" to fit uint32 (keyFormat 'uint32') but row ${firstRow + i} has key ${k}`, {
        argument: 'keyFormat',
      });
    }
    out[i] = Number(k);
  }
  return HOST_IS_LE ? new Uint8Array(out.buffer) : leBytes(new Int32Array(out.buffer));
}
