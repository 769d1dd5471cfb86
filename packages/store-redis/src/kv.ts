import { FailedPreconditionError } from '@embedstack/core';
import type { Batch } from './batch.js';
import type { RedisArg } from './connection.js';
import { chunks, type KeyPlan } from './keyPlan.js';
import { type BucketKeys, printableKey } from './naming.js';
import type { ScriptName } from './scripts.js';

/**
 * Batched hash primitives over a table's buckets. Each adds commands to a
 * {@link Batch} (one command per bucket per `keysSendingSize` keys) and returns a
 * reader that decodes the batch's replies. Input is trusted (validated by core).
 */

const LE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export interface KvContext {
  buckets: readonly BucketKeys[];
  /** Keys per command per bucket. */
  chunk: number;
  /** Table name, for messages. */
  table: string;
}

/** Selects one of a bucket's hashes (main, a slot hash, scores). */
export type HashOf = (b: BucketKeys) => Buffer;
export const mainHash: HashOf = (b) => b.main;
export const scoresHash: HashOf = (b) => b.scores;
export const slotHash =
  (s: number): HashOf =>
  (b) =>
    b.slots[s]!;

/** Row i of a row-major [n * width] float32 array as little-endian bytes (a view when possible). */
export function rowBytes(values: Float32Array, i: number, width: number): Buffer {
  if (LE) return Buffer.from(values.buffer, values.byteOffset + i * width * 4, width * 4);
  const b = Buffer.alloc(width * 4);
  for (let c = 0; c < width; c++) b.writeFloatLE(values[i * width + c]!, c * 4);
  return b;
}

/**
 * Decodes a stored row into out[offset .. offset + width), bit for bit (a byte copy on
 * little-endian hosts: reading through a JS number would quiet signalling NaNs).
 * @throws FailedPreconditionError when the stored value does not hold `width` float32
 */
export function decodeRow(buf: Buffer, out: Float32Array, offset: number, width: number, where: () => string): void {
  if (buf.length !== width * 4) {
    throw new FailedPreconditionError(
      `Expected ${width * 4} bytes (${width} float32) for ${where()} but Redis holds ${buf.length} bytes: ` +
        'the table was written with another dim or layout',
    );
  }
  if (LE) new Uint8Array(out.buffer, out.byteOffset + offset * 4, width * 4).set(buf);
  else for (let c = 0; c < width; c++) out[offset + c] = buf.readFloatLE(c * 4);
}

/** Describes key i of a plan in a bucket hash, for messages. */
export function describeField(ctx: KvContext, plan: KeyPlan, i: number, hash: HashOf = mainHash): string {
  return `key ${plan.key(i)} in ${printableKey(hash(ctx.buckets[plan.bucket[i]!]!))}`;
}

type Reader<T> = (replies: readonly unknown[]) => T;

/** HMGET of the given key indices; the reader returns a sparse [n] array (null = absent). */
export function addHmget(batch: Batch, ctx: KvContext, plan: KeyPlan, hash: HashOf, idx: Iterable<number>): Reader<(Buffer | null)[]> {
  const parts: [number, number[]][] = [];
  for (const [b, list] of plan.byBucket(idx)) {
    const key = hash(ctx.buckets[b]!);
    for (const c of chunks(list, ctx.chunk)) {
      parts.push([batch.add(b, { route: key, name: 'HMGET', args: [key, ...c.map((i) => plan.field(i))] }, c), c]);
    }
  }
  return (replies) => {
    const out: (Buffer | null)[] = new Array(plan.n);
    for (const [r, c] of parts) {
      const vals = replies[r] as (Buffer | null)[];
      c.forEach((i, j) => (out[i] = vals[j] ?? null));
    }
    return out;
  };
}

/** HSET field/value pairs (later duplicates win, as sequential writes). */
export function addHset(batch: Batch, ctx: KvContext, plan: KeyPlan, hash: HashOf, idx: Iterable<number>, value: (i: number) => RedisArg): void {
  for (const [b, list] of plan.byBucket(idx)) {
    const key = hash(ctx.buckets[b]!);
    for (const c of chunks(list, ctx.chunk)) {
      const args: RedisArg[] = [key];
      for (const i of c) args.push(plan.field(i), value(i));
      batch.add(b, { route: key, name: 'HSET', args }, c);
    }
  }
}

/** HDEL; the reader returns how many fields were removed. */
export function addHdel(batch: Batch, ctx: KvContext, plan: KeyPlan, hash: HashOf, idx: Iterable<number>): Reader<number> {
  const parts: number[] = [];
  for (const [b, list] of plan.byBucket(idx)) {
    const key = hash(ctx.buckets[b]!);
    for (const c of chunks(list, ctx.chunk)) {
      parts.push(batch.add(b, { route: key, name: 'HDEL', args: [key, ...c.map((i) => plan.field(i))] }, c));
    }
  }
  return (replies) => parts.reduce((s, r) => s + Number(replies[r]), 0);
}

/**
 * A script per bucket chunk: KEYS = `keys(bucket)`, ARGV = `head` then `args(i)`
 * for each key index. The reader returns each command's reply with its indices.
 */
export function addScript(
  batch: Batch,
  ctx: KvContext,
  plan: KeyPlan,
  name: ScriptName,
  keys: (b: BucketKeys) => Buffer[],
  idx: Iterable<number>,
  head: RedisArg[],
  args: (i: number) => RedisArg[],
): Reader<[unknown, number[]][]> {
  const parts: [number, number[]][] = [];
  for (const [b, list] of plan.byBucket(idx)) {
    const ks = keys(ctx.buckets[b]!);
    for (const c of chunks(list, ctx.chunk)) {
      const argv: RedisArg[] = [...ks, ...head];
      for (const i of c) argv.push(...args(i));
      parts.push([batch.add(b, { route: ks[0]!, name, script: true, args: argv }, c), c]);
    }
  }
  return (replies) => parts.map(([r, c]) => [replies[r], c]);
}

/** HLEN of buckets; the reader returns [bucket, count] pairs. */
export function addHlen(batch: Batch, ctx: KvContext, buckets: Iterable<number>): Reader<[number, number][]> {
  const parts: [number, number][] = [];
  for (const b of buckets) {
    const key = ctx.buckets[b]!.main;
    parts.push([batch.add(b, { route: key, name: 'HLEN', args: [key] }), b]);
  }
  return (replies) => parts.map(([r, b]) => [b, Number(replies[r])]);
}
