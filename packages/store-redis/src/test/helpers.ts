// Helpers of this package's tests: independent re-statements of TFRA's layout rules
// (never calling the code under test) and small utilities.
import { EmbeddingError } from '@embedstack/core';
import { expect } from 'vitest';

/** Bitwise CRC16-XMODEM % 16384: the cluster slot of a hash tag's text. */
export function refSlot(text: string | Buffer): number {
  let crc = 0;
  for (const byte of typeof text === 'string' ? Buffer.from(text) : text) {
    for (let bit = 7; bit >= 0; bit--) {
      const top = ((crc >> 15) & 1) ^ ((byte >> bit) & 1);
      crc = (crc << 1) & 0xffff;
      if (top) crc ^= 0x1021;
    }
  }
  return crc % 16384;
}

/** The smallest integer whose decimal string hashes to `slot` (TFRA's redis_slots_tab entry). */
export function smallestTag(slot: number): number {
  for (let n = 0; ; n++) if (refSlot(String(n)) === slot) return n;
}

/** TFRA bucket of an int64 key: (key & 0xFFFFFFFF) % storageSlice. */
export function refBucket(key: bigint, storageSlice: number): number {
  return Number(key & 0xffffffffn) % storageSlice;
}

/** Standalone bucket names: `${model}:${name}{tag}` with tags at slot step*i + 16384 % S. */
export function refBucketNames(model: string, name: string, storageSlice: number): string[] {
  const step = Math.floor(16384 / storageSlice);
  const rem = 16384 % storageSlice;
  return Array.from({ length: storageSlice }, (_, i) => `${model}:${name}{${smallestTag(step * i + rem)}}`);
}

export function int64Field(key: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64LE(key);
  return b;
}

export function float32Bytes(values: number[]): Buffer {
  const b = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => b.writeFloatLE(v, i * 4));
  return b;
}

/** Awaits `p`, expects an EmbeddingError with `code`; returns it. */
export async function rejection(p: Promise<unknown>, code: string): Promise<EmbeddingError> {
  let err: unknown;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  expect(err, `expected a ${code} rejection`).toBeInstanceOf(EmbeddingError);
  expect((err as EmbeddingError).code, (err as Error).message).toBe(code);
  return err as EmbeddingError;
}

export const INT64_MIN = -(1n << 63n);
export const INT64_MAX = (1n << 63n) - 1n;
