import type { KeyDtype } from '../dtypes.js';
import { CheckpointCorruptError, InvalidArgumentError } from '../errors.js';
import type { ResolvedInitializer } from '../initializers.js';
import { SCORE_POLICIES, type ScorePolicy } from '../scores.js';
import type { EmbeddingTable } from '../table.js';
import { crc32c } from './crc32c.js';
import { hex32 } from './fsio.js';

/**
 * manifest.json of a table checkpoint: what the data files hold and their checksums.
 * Field-by-field description in docs/checkpoint-format.md.
 */

/** The `format` string of every table checkpoint manifest. */
export const CHECKPOINT_FORMAT = 'embedstack.table-checkpoint';
/** The manifest `formatVersion` this library writes; it reads versions 1 up to this one. */
export const CHECKPOINT_FORMAT_VERSION = 1;

/** Element type of a checkpoint data file (little-endian): keys int64 / int32, values and slots float32, scores uint64. */
export type CheckpointDtype = 'int64' | 'int32' | 'float32' | 'uint64';

/** One data file: raw little-endian elements, no header. */
export interface CheckpointFileInfo {
  /** Element type of the file. */
  dtype: CheckpointDtype;
  /** [rows] or [rows, width] */
  shape: number[];
  /** Exact file length in bytes (= product(shape) * element size). */
  bytes: number;
  /** CRC-32C of the whole file, unsigned 32-bit. */
  crc32c: number;
}

/** One optimizer slot stored in a checkpoint (an entry of `TableManifest.slots`). */
export interface CheckpointSlot {
  /** Optimizer slot name, e.g. 'accumulators'. */
  name: string;
  /** Floats per row: dim, or 1 for row-wise slots. */
  width: number;
  /** The slot's initial value in the saving table. */
  initial: number;
  /** Data file name (`slot-<name>`). */
  file: string;
}

/** The initializer, as JSON: `row` values as a number array; `array` without its values. */
export type ManifestInitializer =
  | Exclude<
      ResolvedInitializer,
      | {
          /** Replaced by the JSON form below (values as a number array). */
          kind: 'row';
        }
      | {
          /** Replaced by the form below without its values. */
          kind: 'array';
        }
    >
  | {
      /** The same row for every key. */
      kind: 'row';
      /** The row, [dim] numbers. */
      values: number[];
    }
  | {
      /** Static tables' per-row initial values (not stored in the manifest). */
      kind: 'array';
    };

/** The parsed `manifest.json` of a table checkpoint (written by {@link saveTable}, read by {@link readTableManifest} / {@link loadTable}). Field-by-field description in docs/checkpoint-format.md. */
export interface TableManifest {
  /** Always {@link CHECKPOINT_FORMAT}. */
  format: typeof CHECKPOINT_FORMAT;
  /** Version of the layout, 1 to {@link CHECKPOINT_FORMAT_VERSION}. */
  formatVersion: number;
  /** Byte order of every data file: always little-endian. */
  byteOrder: 'little';
  /** ISO time the save started. */
  createdAt: string;
  /** Library that wrote it and the table's backend. */
  writer: {
    /** The package that wrote the checkpoint ('@embedstack/core'). */
    library: string;
    /** Backend name of the saved table. */
    backend: string;
  };
  /** Name of the saved table. */
  name: string;
  /** Kind of the saved table. */
  kind: 'dynamic' | 'static';
  /** Key type of the saved table (and of the keys file). */
  keyDtype: KeyDtype;
  /** Row width (floats per row) of the saved table. */
  dim: number;
  /** static: number of rows of the table; dynamic: 0 */
  vocabularySize: number;
  /** Rows in the data files. */
  rows: number;
  /** dynamic: initial capacity (rows) of the saving table */
  initCapacity: number;
  /** dynamic: maximum capacity (rows) of the saving table; null = uncapped */
  maxCapacity: number | null;
  /** Score policy of the saving table. */
  scorePolicy: ScorePolicy;
  /** Initializer of the saving table (see {@link ManifestInitializer}). */
  initializer: ManifestInitializer;
  /** Random seed of the saving table's initializer. */
  seed: number;
  /** Random stream id of the saving table (by default fnv1a32 of its name). */
  stream: number;
  /** Optimizer slots stored beside each row, in the table's order. */
  slots: CheckpointSlot[];
  /** Which shard of a partitioned table this is (index in [0, count)). */
  shard: {
    /** This shard's index, in [0, count). */
    index: number;
    /** Number of shards, >= 1. */
    count: number;
  };
  /** Facade-owned data (configs, step counters...), JSON. */
  extra: Record<string, unknown>;
  /** Data files by name: keys, values, scores, slot-<name>. */
  files: Record<string, CheckpointFileInfo>;
  /** CRC-32C of this JSON written without this field (2-space indent); optional on read. */
  manifestCrc32c?: number;
}

export const KEYS_FILE = 'keys';
export const VALUES_FILE = 'values';
export const SCORES_FILE = 'scores';

/** File name of a slot: `slot-<name>`, with characters outside [A-Za-z0-9_.-] as %XX. */
export function slotFileName(name: string): string {
  return `slot-${name.replace(/[^A-Za-z0-9_.-]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`)}`;
}

export const ELEMENT_BYTES: Record<CheckpointDtype, number> = { int64: 8, int32: 4, float32: 4, uint64: 8 };

export function initializerToJson(init: ResolvedInitializer): ManifestInitializer {
  if (init.kind === 'row') return { kind: 'row', values: Array.from(init.values) };
  if (init.kind === 'array') return { kind: 'array' };
  return { ...init };
}

/** Serialises with the self-checksum (over the JSON written without it). */
export function manifestToJson(m: TableManifest): string {
  const { manifestCrc32c: _, ...rest } = m;
  const body = JSON.stringify(rest, null, 2);
  const crc = crc32c(new TextEncoder().encode(body));
  return JSON.stringify({ ...rest, manifestCrc32c: crc }, null, 2) + '\n';
}

// ---- reading -------------------------------------------------------------------

function corrupt(path: string, what: string): CheckpointCorruptError {
  return new CheckpointCorruptError(`Checkpoint manifest "${path}" is corrupt: ${what}`);
}

function isInt(v: unknown, min = 0): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= min;
}

/**
 * Parses and checks a manifest: format and version, field types, the self-checksum
 * when present, and that every file's byte length agrees with rows, dim and widths.
 * @throws CheckpointCorruptError naming `path` and the field
 */
export function parseManifest(text: string, path: string): TableManifest {
  let m: TableManifest;
  try {
    m = JSON.parse(text) as TableManifest;
  } catch (e) {
    throw corrupt(path, `not valid JSON (${(e as Error).message})`);
  }
  if (typeof m !== 'object' || m === null || Array.isArray(m)) throw corrupt(path, 'expected a JSON object');
  if (m.format !== CHECKPOINT_FORMAT) {
    throw corrupt(path, `expected format "${CHECKPOINT_FORMAT}" but found ${JSON.stringify(m.format)}`);
  }
  if (!isInt(m.formatVersion, 1) || m.formatVersion > CHECKPOINT_FORMAT_VERSION) {
    throw corrupt(path, `expected formatVersion 1..${CHECKPOINT_FORMAT_VERSION} (this library) but found ${JSON.stringify(m.formatVersion)}`);
  }
  if (m.manifestCrc32c !== undefined) {
    const { manifestCrc32c: stored, ...rest } = m;
    const computed = crc32c(new TextEncoder().encode(JSON.stringify(rest, null, 2)));
    if (computed !== stored) {
      throw corrupt(path, `expected manifestCrc32c ${hex32(Number(stored))} (stored) but the content hashes to ${hex32(computed)}`);
    }
  }
  const need = (ok: boolean, field: string, expected: string, found: unknown): void => {
    if (!ok) throw corrupt(path, `expected ${field} to be ${expected} but found ${JSON.stringify(found)}`);
  };
  need(m.byteOrder === 'little', 'byteOrder', '"little"', m.byteOrder);
  need(m.kind === 'dynamic' || m.kind === 'static', 'kind', '"dynamic" or "static"', m.kind);
  need(m.keyDtype === 'int64' || m.keyDtype === 'int32', 'keyDtype', '"int64" or "int32"', m.keyDtype);
  need(isInt(m.dim, 1), 'dim', 'an integer >= 1', m.dim);
  need(isInt(m.rows), 'rows', 'an integer >= 0', m.rows);
  need(isInt(m.vocabularySize), 'vocabularySize', 'an integer >= 0', m.vocabularySize);
  need(SCORE_POLICIES.includes(m.scorePolicy), 'scorePolicy', 'a score policy', m.scorePolicy);
  need(typeof m.name === 'string', 'name', 'a string', m.name);
  need(Array.isArray(m.slots), 'slots', 'an array', m.slots);
  need(typeof m.files === 'object' && m.files !== null, 'files', 'an object', m.files);
  const s = m.shard as TableManifest['shard'] | undefined;
  need(typeof s === 'object' && s !== null && isInt(s.count, 1) && isInt(s.index) && s.index < s.count, 'shard', '{ index, count } with 0 <= index < count', s);
  need(typeof m.extra === 'object' && m.extra !== null && !Array.isArray(m.extra), 'extra', 'an object', m.extra);

  const expectFile = (name: string, dtype: CheckpointDtype, width: number | null): void => {
    const f = m.files[name];
    need(typeof f === 'object' && f !== null, `files.${name}`, 'an object', f);
    need(f!.dtype === dtype, `files.${name}.dtype`, `"${dtype}"`, f!.dtype);
    need(isInt(f!.crc32c) && f!.crc32c <= 0xffffffff, `files.${name}.crc32c`, 'a uint32', f!.crc32c);
    const bytes = m.rows * (width ?? 1) * ELEMENT_BYTES[dtype];
    need(f!.bytes === bytes, `files.${name}.bytes`, `${bytes} (rows ${m.rows} x ${width ?? 1} x ${ELEMENT_BYTES[dtype]} bytes)`, f!.bytes);
    const shape = width === null ? [m.rows] : [m.rows, width];
    need(Array.isArray(f!.shape) && f!.shape.join() === shape.join(), `files.${name}.shape`, JSON.stringify(shape), f!.shape);
  };
  expectFile(KEYS_FILE, m.keyDtype, null);
  expectFile(VALUES_FILE, 'float32', m.dim);
  expectFile(SCORES_FILE, 'uint64', null);
  m.slots.forEach((slot, i) => {
    need(typeof slot === 'object' && slot !== null && typeof slot.name === 'string', `slots[${i}].name`, 'a string', slot?.name);
    need(slot.width === m.dim || slot.width === 1, `slots[${i}].width`, `${m.dim} (dim) or 1`, slot.width);
    need(slot.file === slotFileName(slot.name), `slots[${i}].file`, JSON.stringify(slotFileName(slot.name)), slot.file);
    expectFile(slot.file, 'float32', slot.width);
  });
  return m;
}

/**
 * Checks that a checkpoint fits `table`: kind, key dtype, dim, slot names and widths,
 * and (static, unless `subset`) vocabularySize.
 * @throws InvalidArgumentError naming the field, the table's value and the checkpoint's
 */
export function checkFitsTable(m: TableManifest, table: EmbeddingTable, path: string, subset: boolean): void {
  const mismatch = (field: string, expected: unknown, found: unknown): InvalidArgumentError =>
    new InvalidArgumentError(
      `Checkpoint "${path}" does not fit table "${table.name}": expected ${field} to be ${JSON.stringify(expected)} (the table's) but the manifest has ${JSON.stringify(found)}`,
      { argument: field },
    );
  if (m.kind !== table.kind) throw mismatch('kind', table.kind, m.kind);
  if (m.keyDtype !== table.keyDtype) throw mismatch('keyDtype', table.keyDtype, m.keyDtype);
  if (m.dim !== table.dim) throw mismatch('dim', table.dim, m.dim);
  const names = m.slots.map((s) => s.name);
  if (names.join('\u0000') !== table.slotNames.join('\u0000')) throw mismatch('slots', table.slotNames, names);
  const widths = m.slots.map((s) => s.width);
  if (widths.join() !== table.slotWidths.join()) throw mismatch('slot widths', table.slotWidths, widths);
  if (m.kind === 'static' && !subset && m.vocabularySize !== table.options.vocabularySize) {
    throw mismatch('vocabularySize', table.options.vocabularySize, m.vocabularySize);
  }
}
