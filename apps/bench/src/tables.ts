/**
 * Filling embedstack tables for the benchmarks (untimed setup): batches of keys
 * upserted with a fixed value pattern, so every page of the table is written
 * and resident (a zero-filled table would read the shared zero page and flatter
 * every figure).
 */
import { createTable, type EmbeddingBackend, type EmbeddingTable, type OptimizerSpec, type StorageDtype } from '@embedstack/core';
import { progress } from './progress.js';

export const FILL_BATCH = 65536;

/** The pattern's period: value j depends on j mod 1000 only ((j * 7919) mod 1000 does). */
const PATTERN_PERIOD = 1000;

/**
 * A [rows * dim] value pattern (every value distinct enough, none zero): value j is
 * ((j * 7919) mod 1000) / 1000 - 0.4995 in float32 (PyTorch's peers compute the same). One period
 * is computed and copied in doubling blocks: the per-value loop took ~1.8 s for 1M x 64 (its
 * float modulo), the copies ~30 ms.
 */
export function valuePattern(rows: number, dim: number): Float32Array {
  const v = new Float32Array(rows * dim);
  const head = Math.min(v.length, PATTERN_PERIOD);
  for (let j = 0; j < head; j++) v[j] = ((j * 7919) % 1000) / 1000 - 0.4995;
  // v[0..filled) holds whole periods: copying it after itself keeps value j at index j
  for (let filled = head; filled < v.length; filled *= 2) v.copyWithin(filled, 0, Math.min(filled, v.length - filled));
  return v;
}

/** Upserts keys[from..to) in batches. Returns the seconds spent upserting. */
export function fillTable(table: EmbeddingTable, keys: BigInt64Array | Int32Array, from = 0, to = keys.length): number {
  const values = valuePattern(FILL_BATCH, table.dim);
  let seconds = 0;
  for (let b = from; b < to; b += FILL_BATCH) {
    const e = Math.min(to, b + FILL_BATCH);
    const v = e - b === FILL_BATCH ? values : values.subarray(0, (e - b) * table.dim);
    const t0 = performance.now();
    table.upsertSync(keys.subarray(b, e), v);
    seconds += (performance.now() - t0) / 1000;
  }
  return seconds;
}

export interface DynamicTableOptions {
  optimizer?: OptimizerSpec;
  /** Reserve room for all keys up front (default) instead of growing by doubling. */
  presize?: boolean;
  name?: string;
  /** Value storage (default float32). */
  storageDtype?: StorageDtype;
}

/** A dynamic int64 table holding `keys`. */
export function dynamicTable(backend: EmbeddingBackend, dim: number, keys: BigInt64Array, o: DynamicTableOptions = {}): EmbeddingTable {
  progress.label(`building a ${keys.length.toLocaleString('en-US')}-key dim-${dim} table`);
  const table = createTable(
    {
      dim,
      name: o.name ?? 'bench',
      ...(o.presize === false ? {} : { initCapacity: Math.max(1024, keys.length) }),
      ...(o.optimizer ? { optimizer: o.optimizer } : {}),
      ...(o.storageDtype ? { storageDtype: o.storageDtype } : {}),
    },
    { backend },
  );
  fillTable(table, keys);
  return table;
}

/** A static table of `rows` rows (int32 row indices), every row written. */
export function staticTable(backend: EmbeddingBackend, dim: number, rows: number, storageDtype: StorageDtype = 'float32'): EmbeddingTable {
  progress.label(`building a ${rows.toLocaleString('en-US')}-row dim-${dim} ${storageDtype} static table`);
  const table = createTable({ kind: 'static', dim, vocabularySize: rows, keyDtype: 'int32', name: 'bench_static', storageDtype }, { backend });
  const idx = new Int32Array(rows);
  for (let i = 0; i < rows; i++) idx[i] = i;
  fillTable(table, idx);
  return table;
}
