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

export function crc16(data: Uint8Array): number {
  return naming.crc16(bytes(data, 'bytes'));
}
export function keySlot(key: Uint8Array): number {
  return naming.keySlot(bytes(key, 'key'));
}
export function sequentialHashTags(storageSlice: number, ranges: readonly naming.SlotRange[]): string[] {
  checkInteger(storageSlice, 'storageSlice', { min: 1, max: 16384 });
  const ok = Array.isArray(ranges) && ranges.every((r) => typeof r === 'object' && r !== null && Number.isSafeInteger(r.first) && Number.isSafeInteger(r.last));
  if (!ok) throw invalidParameter('ranges', 'an array of { first, last } slot ranges', ranges, InvalidTypeError);
  return naming.sequentialHashTags(storageSlice, ranges);
}
export function parseClusterNodes(reply: string): naming.SlotRange[] {
  return naming.parseClusterNodes(string(reply, 'reply'));
}
export function keysPrefix(modelTag: string, embeddingName: string, usingMd5PrefixName: boolean): Buffer {
  if (typeof usingMd5PrefixName !== 'boolean') throw invalidParameter('usingMd5PrefixName', 'a boolean', usingMd5PrefixName, InvalidTypeError);
  return naming.keysPrefix(string(modelTag, 'modelTag'), checkName(embeddingName, 'embeddingName'), usingMd5PrefixName);
}
export function braceTag(tag: string): string {
  return naming.braceTag(string(tag, 'tag'));
}
export function bucketKeys(prefix: Buffer, braced: string, slotNames: readonly string[]): naming.BucketKeys {
  if (!Buffer.isBuffer(prefix)) throw invalidParameter('prefix', 'a Buffer', prefix, InvalidTypeError);
  return naming.bucketKeys(prefix, string(braced, 'braced'), strings(slotNames, 'slotNames'));
}
export function bucketOfLow32(low32: number, storageSlice: number): number {
  return naming.bucketOfLow32(checkInteger(low32, 'low32', { min: -2147483648, max: 0xffffffff }), checkInteger(storageSlice, 'storageSlice', { min: 1 }));
}
export function decodeKeys(fields: readonly Buffer[], dtype: 'int64' | 'int32'): Keys {
  if (dtype !== 'int64' && dtype !== 'int32') throw invalidParameter('dtype', "'int64' or 'int32'", dtype, InvalidTypeError);
  const width = dtype === 'int64' ? 8 : 4;
  if (!Array.isArray(fields) || fields.some((f) => !Buffer.isBuffer(f) || f.length !== width)) {
    throw invalidParameter('fields', `an array of ${width}-byte Buffers`, fields, InvalidTypeError);
  }
  return scan.decodeKeys(fields, dtype);
}
