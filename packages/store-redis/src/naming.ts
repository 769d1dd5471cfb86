import { createHash } from 'node:crypto';

/**
 * TFRA's Redis key layout (tensorflow_recommenders_addons redis_table_op and
 * redis_impl/redis_table_op_util.hpp), reproduced byte for byte so that tables
 * written here can be read by TFRA and the other way round:
 *
 * - prefix = `${modelTag}:${embeddingName}`, or, with `usingMd5PrefixName`, the 16
 *   raw bytes of MD5 of that string;
 * - bucket i (0 <= i < storageSlice) is one Redis hash named `${prefix}{${tag_i}}`;
 * - a key goes to bucket `(key & 0xFFFFFFFF) % storageSlice` (int32 keys: their
 *   uint32 bit pattern);
 * - field = the key's raw little-endian bytes (8 for int64, 4 for int32);
 *   value = `dim` float32 little-endian bytes.
 *
 * Hash tags (`tag_i`): the caller's `hashTags` when given (one per bucket, braces
 * optional); otherwise numbers chosen from TFRA's `redis_slots_tab` (for each
 * cluster slot s, the smallest non-negative integer whose decimal string hashes to
 * s): spread evenly over the 16384 slots, or, in cluster mode, over the masters'
 * slot ranges reported by CLUSTER NODES (see {@link sequentialHashTags}).
 *
 * Companion keys of embedstack (not part of TFRA) put their suffix AFTER the hash
 * tag, so they always hash to the bucket's slot whatever bytes the prefix holds:
 * `${bucket}:slot:${slotName}` (optimizer slots), `${bucket}:scores` (scores as
 * decimal uint64 strings) and `${bucket0}:clock` (the table's score clock).
 */

/** CRC16-CCITT (XMODEM), the hash of Redis Cluster key slots. */
export function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (let i = 0; i < bytes.length; i++) {
    crc ^= bytes[i]! << 8;
    for (let b = 0; b < 8; b++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** Number of Redis Cluster key slots (16384). */
export const CLUSTER_SLOTS = 16384;

/** Cluster slot of a Redis key, hash tags honoured (the Redis Cluster spec's rule). */
export function keySlot(key: Uint8Array): number {
  const open = key.indexOf(0x7b);
  if (open >= 0) {
    const close = key.indexOf(0x7d, open + 1);
    if (close > open + 1) return crc16(key.subarray(open + 1, close)) % CLUSTER_SLOTS;
  }
  return crc16(key) % CLUSTER_SLOTS;
}

let slotsTab: Uint32Array | null = null;

/** TFRA's `redis_slots_tab`: entry s = the smallest integer n >= 0 whose decimal string is in slot s. */
export function redisSlotsTab(): Uint32Array {
  if (slotsTab) return slotsTab;
  const table = new Uint32Array(CLUSTER_SLOTS).fill(0xffffffff);
  let found = 0;
  for (let n = 0; found < CLUSTER_SLOTS; n++) {
    const s = crc16(Buffer.from(String(n), 'latin1')) % CLUSTER_SLOTS;
    if (table[s] === 0xffffffff) {
      table[s] = n;
      found++;
    }
  }
  slotsTab = table;
  return table;
}

/** A master's slot range [first, last], as TFRA reads it from CLUSTER NODES. */
export interface SlotRange {
  /** First slot (inclusive). */
  first: number;
  /** Last slot (inclusive). */
  last: number;
}

/**
 * TFRA's sequential hash tags (BuildKeysPrefixNameSlices) when no explicit tags are
 * given. `ranges` empty: tags spread over all slots (standalone, or
 * `redis_hash_tags_hypodispersion`); else over the masters' first slot ranges,
 * sorted, so that the buckets land on distinct masters.
 */
export function sequentialHashTags(storageSlice: number, ranges: readonly SlotRange[]): string[] {
  const tab = redisSlotsTab();
  const tags: string[] = [];
  const n = ranges.length;
  if (n === 0) {
    const step = Math.floor(CLUSTER_SLOTS / storageSlice);
    const rem = CLUSTER_SLOTS % storageSlice;
    for (let i = 0; i < storageSlice; i++) tags.push(String(tab[step * i + rem]));
  } else if (n < storageSlice) {
    for (let i = 0; i < storageSlice; i++) {
      const r = ranges[i % n]!;
      const stride = Math.floor(((r.last - r.first) * n) / storageSlice);
      tags.push(String(tab[r.first + Math.floor(i / n) * stride]));
    }
  } else {
    for (let i = 0; i < storageSlice; i++) tags.push(String(tab[ranges[i]!.first]));
  }
  return tags;
}

/**
 * The masters' first slot ranges from a CLUSTER NODES reply (TFRA's
 * ClusterNodesSlots(false)): one [first, last] per master that serves slots, sorted
 * and deduplicated.
 */
export function parseClusterNodes(reply: string): SlotRange[] {
  const out: SlotRange[] = [];
  for (const line of reply.split('\n')) {
    const cols = line.trim().split(' ');
    if (cols.length < 9) continue;
    if (!cols[2]!.split(',').includes('master')) continue;
    const spec = cols[8]!;
    if (spec.startsWith('[')) continue;
    const [a, b] = spec.split('-');
    const first = Number(a);
    const last = b === undefined ? first : Number(b);
    if (Number.isInteger(first) && Number.isInteger(last)) out.push({ first, last });
  }
  out.sort((x, y) => x.first - y.first || x.last - y.last);
  return out.filter((r, i) => i === 0 || r.first !== out[i - 1]!.first || r.last !== out[i - 1]!.last);
}

/** The prefix of a table's buckets: `${modelTag}:${embeddingName}` or its raw MD5. */
export function keysPrefix(modelTag: string, embeddingName: string, usingMd5PrefixName: boolean): Buffer {
  const text = `${modelTag}:${embeddingName}`;
  return usingMd5PrefixName ? createHash('md5').update(text, 'utf8').digest() : Buffer.from(text, 'utf8');
}

/** Wraps a tag in braces unless it already has them (TFRA adds missing ones). */
export function braceTag(tag: string): string {
  let t = tag;
  if (!t.startsWith('{')) t = '{' + t;
  if (!t.endsWith('}')) t = t + '}';
  return t;
}

/** Names of every Redis key of one bucket. */
export interface BucketKeys {
  /** The TFRA hash: field = key bytes, value = dim float32. */
  main: Buffer;
  /** One companion hash per optimizer slot, in the table's slot order. */
  slots: Buffer[];
  /** Companion hash of scores (decimal uint64). */
  scores: Buffer;
}

export function bucketKeys(prefix: Buffer, braced: string, slotNames: readonly string[]): BucketKeys {
  const main = Buffer.concat([prefix, Buffer.from(braced, 'utf8')]);
  const suffix = (s: string) => Buffer.concat([main, Buffer.from(s, 'utf8')]);
  return { main, slots: slotNames.map((n) => suffix(`:slot:${n}`)), scores: suffix(':scores') };
}

/** Bucket of a key by its low 32 bits (TFRA's KBucketNumCommonHandle). */
export function bucketOfLow32(low32: number, storageSlice: number): number {
  return (low32 >>> 0) % storageSlice;
}

/** A printable form of a (possibly binary) key name for messages. */
export function printableKey(name: Buffer): string {
  let out = '';
  for (const b of name) out += b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`;
  return out;
}
