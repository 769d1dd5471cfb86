import { InvalidTypeError, invalidParameter } from '../errors.js';
import type { EmbeddingTable } from '../table.js';

/** Argument checks shared by the checkpoint entry points (messages name the argument). */

/** Duck-typed so that tables from another copy of core (ESM vs CJS build) are accepted. */
export function checkTable(table: unknown, argument = 'table'): EmbeddingTable {
  const t = table as EmbeddingTable | null;
  if (typeof t !== 'object' || t === null || typeof t.exportBatches !== 'function' || typeof t.importRows !== 'function' || typeof t.options !== 'object') {
    throw invalidParameter(argument, 'an EmbeddingTable', table, InvalidTypeError);
  }
  if (t.disposed) throw invalidParameter(argument, 'a live (not disposed) EmbeddingTable', `disposed table "${t.name}"`);
  return t;
}

export function checkDir(dir: unknown, argument = 'dir'): string {
  if (typeof dir !== 'string' || dir.length === 0 || dir.includes('\u0000')) {
    throw invalidParameter(argument, 'a non-empty directory path string', dir, typeof dir === 'string' ? undefined : InvalidTypeError);
  }
  return dir;
}

export const DEFAULT_BATCH_SIZE = 65536;

export function checkBatchSize(v: unknown): number {
  if (v === undefined || v === null) return DEFAULT_BATCH_SIZE;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) throw invalidParameter('batchSize', 'an integer >= 1', v);
  return v;
}

export function checkOptions<T extends object>(options: unknown, known: readonly string[]): Partial<T> {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object' || Array.isArray(options)) throw invalidParameter('options', 'an options object', options, InvalidTypeError);
  for (const k of Object.keys(options)) {
    if (!known.includes(k)) throw invalidParameter(`options.${k}`, `one of the known options (${known.join(', ')})`, k);
  }
  return options as Partial<T>;
}

export function checkFilter(v: unknown): ((key: bigint) => boolean) | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'function') throw invalidParameter('filter', 'a function (key: bigint) => boolean', v, InvalidTypeError);
  return v as (key: bigint) => boolean;
}

export function checkBoolean(v: unknown, argument: string, fallback: boolean): boolean {
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'boolean') throw invalidParameter(argument, 'a boolean', v, InvalidTypeError);
  return v;
}
