// Test helpers of the checkpoint tests (not exported from the package).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddingError } from '../../src/errors.js';
import type { EmbeddingTable } from '../../src/table.js';

export interface Row {
  values: number[];
  slots: number[][];
  score: bigint;
}

/** Every row of a table, by key (read through the table's own export). */
export async function rowsOf(table: EmbeddingTable): Promise<Map<bigint, Row>> {
  const out = new Map<bigint, Row>();
  const dim = table.dim;
  const widths = table.slotWidths;
  for await (const b of table.exportBatches(7)) {
    for (let i = 0; i < b.keys.length; i++) {
      out.set(BigInt(b.keys[i]!), {
        values: Array.from(b.values.subarray(i * dim, (i + 1) * dim)),
        slots: b.slots.map((s, j) => Array.from(s.subarray(i * widths[j]!, (i + 1) * widths[j]!))),
        score: b.scores[i]!,
      });
    }
  }
  return out;
}

export async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'embedstack-ckpt-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Awaits `p`, expecting an EmbeddingError; returns it (fails the test otherwise). */
export async function rejection(p: Promise<unknown>): Promise<EmbeddingError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof EmbeddingError) return e;
    throw new Error(`expected an EmbeddingError but got ${String(e)}`);
  }
  throw new Error('expected a rejection but the call succeeded');
}

/** A float32-exact value for (key, column, generation): a small integer plus a binary fraction. */
export function f32Value(key: bigint, col: number, gen = 0): number {
  return Number(BigInt.asIntN(16, key)) + col * 0.25 + gen * 1024;
}

/** Bitwise CRC-32C, straight from the definition (reflected poly 0x82F63B78); independent of crc32c.ts. */
export function crcBitwise(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}
