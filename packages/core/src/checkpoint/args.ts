import { DisposedError, InvalidTypeError, invalidParameter } from '../errors.js';
import type { EmbeddingTable } from '../table.js';
import { checkInteger } from '../validation.js';

export { checkBoolean, checkKnownKeys, checkOptions } from '../validation.js';

/** Argument checks shared by the checkpoint entry points (messages name the argument). */

/** Duck-typed so that tables from another copy of core (ESM vs CJS build) are accepted. */
export function checkTable(table: unknown, argument = 'table'): EmbeddingTable {
  const t = table as EmbeddingTable | null;
  if (typeof t !== 'object' || t === null || typeof t.exportBatches !== 'function' || typeof t.importRows !== 'function' || typeof t.options !== 'object') {
    throw invalidParameter(argument, 'an EmbeddingTable', table, InvalidTypeError);
  }
  if (t.disposed) throw invalidParameter(argument, 'a live (not disposed) EmbeddingTable', `disposed table "${t.name}"`, DisposedError);
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

/**
 * One bit per row of a checkpoint: the rows a key filter keeps. Filled in the pass that
 * verifies the keys, so the user's filter runs (once per key) before any row is written.
 */
export class RowMask {
  private readonly bits: Uint8Array;
  constructor(rows: number) {
    this.bits = new Uint8Array(Math.ceil(rows / 8));
  }
  set(row: number): void {
    this.bits[Math.floor(row / 8)]! |= 1 << row % 8;
  }
  has(row: number): boolean {
    return ((this.bits[Math.floor(row / 8)]! >> row % 8) & 1) === 1;
  }
  /** Indices i in [0, n) whose row `first + i` is kept. */
  kept(first: number, n: number): number[] {
    const out: number[] = [];
    for (let i = 0; i < n; i++) if (this.has(first + i)) out.push(i);
    return out;
  }
}
