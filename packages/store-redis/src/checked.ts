import { checkInteger, checkName, InvalidTypeError, invalidParameter, type Keys } from '@embedstack/core';
import * as naming from './naming.js';
import * as scan from './scanOps.js';

/**
 * The naming and decoding helpers as the public API sees them: each checks its
 * arguments (a coded error for junk), then calls the function store-redis uses
 * internally on validated data.
 */

function bytes(v: unknown, argument: string): Uint8Array {
  if (!(v instanceof Uint8Array)) throw invalidParameter(argument, 'a Uint8Array or Buffer', v, InvalidTypeError);
  return v;
}

function strings(v: unknown, argument: string): readonly string[] {
  if (!Array.isArray(v) || v.some((s) => typeof s !== 'string')) throw invalidParameter(argument, 'an array of strings', v, InvalidTypeError);
  return v;
}

function string(v: unknown, argument: string): string {
  if (typeof v !== 'string') throw invalidParameter(argument, 'a string', v, InvalidTypeError);
  return v;
}

/**
 * CRC16-CCITT (XMODEM) of `data`, the hash of Redis Cluster key slots.
 * @throws InvalidTypeError when `data` is not a Uint8Array / Buffer
 */
export function crc16(data: Uint8Array): number {
  return naming.crc16(bytes(data, 'bytes'));
}
/**
 * Redis Cluster slot (0..16383) of a key, hash tags honoured (the Redis Cluster spec's rule).
 * @throws InvalidTypeError when `key` is not a Uint8Array / Buffer
 */
export function keySlot(key: Uint8Array): number {
  return naming.keySlot(bytes(key, 'key'));
}
/**
 * TFRA's sequential hash tags (BuildKeysPrefixNameSlices), one per bucket: spread over all slots when `ranges` is empty (standalone, or hypodispersion), else over the masters' first slot ranges so buckets land on distinct masters.
 * @throws InvalidArgumentError when `storageSlice` is not an integer in [1, 16384]; InvalidTypeError when `ranges` is not an array of { first, last }
 */
export function sequentialHashTags(storageSlice: number, ranges: readonly naming.SlotRange[]): string[] {
  checkInteger(storageSlice, 'storageSlice', { min: 1, max: 16384 });
  const ok = Array.isArray(ranges) && ranges.every((r) => typeof r === 'object' && r !== null && Number.isSafeInteger(r.first) && Number.isSafeInteger(r.last));
  if (!ok) throw invalidParameter('ranges', 'an array of { first, last } slot ranges', ranges, InvalidTypeError);
  return naming.sequentialHashTags(storageSlice, ranges);
}
/**
 * The masters' first slot ranges from a CLUSTER NODES reply (TFRA's ClusterNodesSlots(false)): one [first, last] per master that serves slots, sorted and deduplicated.
 * @throws InvalidTypeError when `reply` is not a string
 */
export function parseClusterNodes(reply: string): naming.SlotRange[] {
  return naming.parseClusterNodes(string(reply, 'reply'));
}
/**
 * The prefix of a table's bucket keys: the UTF-8 bytes of `${modelTag}:${embeddingName}`, or their raw MD5 (16 bytes) when `usingMd5PrefixName`.
 * @throws InvalidTypeError naming the argument
 */
export function keysPrefix(modelTag: string, embeddingName: string, usingMd5PrefixName: boolean): Buffer {
  if (typeof usingMd5PrefixName !== 'boolean') throw invalidParameter('usingMd5PrefixName', 'a boolean', usingMd5PrefixName, InvalidTypeError);
  return naming.keysPrefix(string(modelTag, 'modelTag'), checkName(embeddingName, 'embeddingName'), usingMd5PrefixName);
}
/**
 * Wraps a hash tag in braces unless it already has them (`'3560'` -> `'{3560}'`), as TFRA does.
 * @throws InvalidTypeError when `tag` is not a string
 */
export function braceTag(tag: string): string {
  return naming.braceTag(string(tag, 'tag'));
}
/**
 * Names of every Redis key of one bucket: the TFRA hash `prefix + braced`, and the companion hashes `...:slot:<name>` (one per slot name) and `...:scores`.
 * @throws InvalidTypeError naming the argument
 */
export function bucketKeys(prefix: Buffer, braced: string, slotNames: readonly string[]): naming.BucketKeys {
  if (!Buffer.isBuffer(prefix)) throw invalidParameter('prefix', 'a Buffer', prefix, InvalidTypeError);
  return naming.bucketKeys(prefix, string(braced, 'braced'), strings(slotNames, 'slotNames'));
}
/**
 * Bucket of a key from its low 32 bits (TFRA's KBucketNumCommonHandle): `(low32 >>> 0) % storageSlice`.
 * @throws InvalidArgumentError when `low32` is not a 32-bit integer or `storageSlice` not an integer >= 1
 */
export function bucketOfLow32(low32: number, storageSlice: number): number {
  return naming.bucketOfLow32(checkInteger(low32, 'low32', { min: -2147483648, max: 0xffffffff }), checkInteger(storageSlice, 'storageSlice', { min: 1 }));
}
/**
 * Hash fields (raw key bytes: 8 per int64 key, 4 per int32 key) back to a keys array of `dtype`.
 * @throws InvalidTypeError when `dtype` is not 'int64' / 'int32' or a field is not a Buffer of that width
 */
export function decodeKeys(fields: readonly Buffer[], dtype: 'int64' | 'int32'): Keys {
  if (dtype !== 'int64' && dtype !== 'int32') throw invalidParameter('dtype', "'int64' or 'int32'", dtype, InvalidTypeError);
  const width = dtype === 'int64' ? 8 : 4;
  if (!Array.isArray(fields) || fields.some((f) => !Buffer.isBuffer(f) || f.length !== width)) {
    throw invalidParameter('fields', `an array of ${width}-byte Buffers`, fields, InvalidTypeError);
  }
  return scan.decodeKeys(fields, dtype);
}
