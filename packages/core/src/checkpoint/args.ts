import { InvalidTypeError, invalidParameter } from '../errors.js';
import type { EmbeddingTable } from '../table.js';
import { checkInteger } from '../validation.js';

export { checkBoolean, checkOptions } from '../validation.js';

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
  return checkInteger(v, 'batchSize', { min: 1, fallback: DEFAULT_BATCH_SIZE });
}

export function checkFilter(v: unknown): ((key: bigint) => boolean) | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'function') throw invalidParameter('filter', 'a function (key: bigint) => boolean', v, InvalidTypeError);
  return v as (key: bigint) => boolean;
}
