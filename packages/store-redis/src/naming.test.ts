import { createHash } from 'node:crypto';
import { EmbeddingError } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import {
  braceTag,
  bucketKeys,
  crc16,
  keySlot,
  keysPrefix,
  parseClusterNodes,
  redisSlotsTab,
  resolveStoreOptions,
  resolveTableLayout,
  sequentialHashTags,
} from './index.js';
import { refSlot, smallestTag } from './test/helpers.js';

function expectError(fn: () => unknown, code: string, argument: string): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(EmbeddingError);
  expect((err as EmbeddingError).code).toBe(code);
  expect((err as EmbeddingError).message).toContain(argument);
}

describe('naming: TFRA key layout', () => {
  it('CRC16-XMODEM and key slots follow the Redis Cluster spec', () => {
    expect(crc16(Buffer.from('123456789'))).toBe(0x31c3); // the standard check value
    expect(keySlot(Buffer.from('foo'))).toBe(12182); // CLUSTER KEYSLOT foo
    expect(keySlot(Buffer.from('bar'))).toBe(5061);
    expect(keySlot(Buffer.from('{3560}'))).toBe(0);
    expect(keySlot(Buffer.from('test:emb{3560}'))).toBe(0);
    expect(keySlot(Buffer.from('a{bar}b{x}'))).toBe(5061); // first tag only
    expect(keySlot(Buffer.from('{}foo'))).toBe(refSlot('{}foo')); // empty tag: the whole key
    expect(keySlot(Buffer.from('x{foo'))).toBe(refSlot('x{foo')); // unclosed: the whole key
  });

  it("redis_slots_tab matches TFRA's table", () => {
    // The first 27 entries of redis_impl/redis_slots_tab.h.
    const tfra = [3560, 22179, 48756, 2977, 4569, 460, 4384, 41432, 46920, 9073, 2281, 15129, 5465, 18928, 5288, 4872, 4883, 5279, 40322, 5494, 23669, 2270, 6915, 49046, 50482, 1407, 491];
    expect(Array.from(redisSlotsTab().subarray(0, 27))).toEqual(tfra);
    for (const s of [0, 1, 777, 8191, 16383]) expect(redisSlotsTab()[s]).toBe(smallestTag(s));
  });

  it('sequential tags without cluster ranges: slot step*i + 16384 % storageSlice', () => {
    expect(sequentialHashTags(1, [])).toEqual(['3560']);
    const tags3 = sequentialHashTags(3, []); // step 5461, remainder 1
    expect(tags3.map((t) => refSlot(t))).toEqual([1, 5462, 10923]);
    expect(tags3.map(Number)).toEqual([1, 5462, 10923].map(smallestTag));
    expect(sequentialHashTags(4, []).map((t) => refSlot(t))).toEqual([0, 4096, 8192, 12288]);
  });

  it("sequential tags over cluster ranges (TFRA's BuildKeysPrefixNameSlices)", () => {
    const ranges = [
      { first: 0, last: 5460 },
      { first: 5461, last: 10922 },
      { first: 10923, last: 16383 },
    ];
    // 6 buckets over 3 masters: bucket i on master i % 3 at step floor(i / 3) * floor(span * 3 / 6).
    expect(sequentialHashTags(6, ranges).map((t) => refSlot(t))).toEqual([0, 5461, 10923, 2730, 8191, 13653]);
    // Fewer buckets than masters: each bucket at the start of a master's range.
    expect(sequentialHashTags(2, ranges).map((t) => refSlot(t))).toEqual([0, 5461]);
  });

  it('parses CLUSTER NODES: first slot range of every master, sorted', () => {
    const reply = [
      'e7d1 127.0.0.1:30002@40002 master - 0 1426238316232 2 connected 5461-10922',
      '67ed 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 [93->-292f]',
      '292f 127.0.0.1:30003@40003 master,fail - 0 1426238318243 3 connected 10923-16383',
      '6ec2 127.0.0.1:30004@40004 slave 292f 0 1426238317239 4 connected',
      'aaaa 127.0.0.1:30005@40005 master - 0 0 5 connected',
      '',
    ].join('\n');
    expect(parseClusterNodes(reply)).toEqual([
      { first: 0, last: 5460 },
      { first: 5461, last: 10922 },
      { first: 10923, last: 16383 },
    ]);
    expect(parseClusterNodes('x 1:1@2 master - 0 0 1 connected 42\n')).toEqual([{ first: 42, last: 42 }]);
  });

  it('prefix, bucket and companion names; companions keep the bucket slot whatever the prefix bytes', () => {
    expect(keysPrefix('m', 'emb', false).toString()).toBe('m:emb');
    expect(keysPrefix('m', 'emb', true).equals(createHash('md5').update('m:emb').digest())).toBe(true);
    expect(braceTag('3560')).toBe('{3560}');
    expect(braceTag('{3560}')).toBe('{3560}');
    const k = bucketKeys(Buffer.from('m:emb'), '{3560}', ['accumulators']);
    expect(k.main.toString()).toBe('m:emb{3560}');
    expect(k.slots[0]!.toString()).toBe('m:emb{3560}:slot:accumulators');
    expect(k.scores.toString()).toBe('m:emb{3560}:scores');
    for (const prefix of ['a{b', 'a{b}c', '}x{', '']) {
      const b = bucketKeys(Buffer.from(prefix), '{22179}', ['m']);
      expect(keySlot(b.slots[0]!)).toBe(keySlot(b.main));
      expect(keySlot(b.scores)).toBe(keySlot(b.main));
    }
  });
});

describe('options', () => {
  it('resolves defaults', () => {
    const o = resolveStoreOptions();
    expect(o).toMatchObject({ mode: 'standalone', hosts: [{ host: '127.0.0.1', port: 6379 }], db: 0, keysSendingSize: 1024 });
    expect(resolveStoreOptions({ mode: 0, hosts: [{ host: 'h', port: 1 }] }).mode).toBe('cluster');
    expect(resolveStoreOptions({ mode: 2 }).mode).toBe('standalone');
    const l = resolveTableLayout({}, 'user', o);
    expect(l).toEqual({
      embeddingName: 'user',
      modelTag: 'test',
      storageSlice: 1,
      keysSendingSize: 1024,
      hashTags: null,
      hashTagsHypodispersion: false,
      usingMd5PrefixName: false,
      trackScores: true,
    });
  });

  it('rejects bad options naming them; sentinel is UNSUPPORTED', () => {
    expectError(() => resolveStoreOptions({ mode: 1 }), 'UNSUPPORTED', 'mode');
    expectError(() => resolveStoreOptions({ mode: 5 as never }), 'INVALID_ARGUMENT', 'mode');
    expectError(() => resolveStoreOptions({ hosts: [] }), 'INVALID_ARGUMENT', 'hosts');
    expectError(() => resolveStoreOptions({ hosts: [{ host: 'a', port: 70000 }] }), 'INVALID_ARGUMENT', 'hosts[0].port');
    expectError(() => resolveStoreOptions({ hosts: [{ host: 'a', port: 1 }, { host: 'b', port: 2 }] }), 'INVALID_ARGUMENT', 'hosts');
    expectError(() => resolveStoreOptions({ mode: 'cluster', db: 2 }), 'INVALID_ARGUMENT', 'db');
    expectError(() => resolveStoreOptions({ keysSendingSize: 0 }), 'INVALID_ARGUMENT', 'keysSendingSize');
    expectError(() => resolveStoreOptions({ retry: { attempts: -1 } }), 'INVALID_ARGUMENT', 'retry.attempts');
    expectError(() => resolveStoreOptions({ colour: 1 } as never), 'INVALID_ARGUMENT', 'options.colour');
    const o = resolveStoreOptions();
    expectError(() => resolveTableLayout({ storageSlice: 0 }, 't', o), 'INVALID_ARGUMENT', 'layout.storageSlice');
    expectError(() => resolveTableLayout({ storageSlice: 2, hashTags: ['{1}'] }, 't', o), 'INVALID_ARGUMENT', 'layout.hashTags');
    expectError(() => resolveTableLayout({ trackScores: 1 as never }, 't', o), 'INVALID_TYPE', 'layout.trackScores');
  });
});
