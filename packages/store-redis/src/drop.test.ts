import { optimizers } from '@embedstack/core';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisRawTable, RedisStore } from './index.js';
import { rejection } from './test/helpers.js';
import { type RedisServerHandle, startRedisServer } from './testing/index.js';

let server: RedisServerHandle;
let store: RedisStore;
let plain: Redis;

beforeAll(async () => {
  server = await startRedisServer();
  store = new RedisStore({ hosts: [{ host: server.host, port: server.port }] });
  plain = new Redis({ host: server.host, port: server.port });
});

afterAll(async () => {
  await store?.close();
  plain?.disconnect();
  await server?.stop();
});

const rawOf = (t: { raw: unknown }) => t.raw as RedisRawTable;
/** Score of each key in an export, by key. */
const scoresOf = async (t: Awaited<ReturnType<RedisStore['openTable']>>) => {
  const e = await t.export();
  return new Map(Array.from(e.keys as BigInt64Array, (k, i) => [k, e.scores[i]!] as const));
};

describe('the score clock: clear keeps it, drop removes it', () => {
  // lru: every scored call INCRs the clock once and scores the rows it writes with the new value.
  const open = (tag: string) =>
    store.openTable({ dim: 1, name: 'c', scorePolicy: 'lru', optimizer: optimizers.adam() }, { modelTag: tag, storageSlice: 2 });

  it('clear keeps the clock: a score written after the clear is above every score exported before it', async () => {
    const t = await open('keep');
    await t.upsert([1n, 2n], [1, 2]); // clock 1
    await t.upsert([3n], [3]); // clock 2
    const before = await scoresOf(t);
    expect([...before.entries()].sort()).toEqual([[1n, 1n], [2n, 1n], [3n, 2n]]);
    await t.clear();
    expect(await plain.keys('keep:*')).toEqual(['keep:c{3560}:clock']);
    expect(await plain.get('keep:c{3560}:clock')).toBe('2');
    await t.upsert([4n], [4]); // clock 3
    expect([...(await scoresOf(t)).entries()]).toEqual([[4n, 3n]]);
  });

  it('drop unlinks every key of the table, the clock included, in both buckets; the table then starts a new clock at 1', async () => {
    const t = await open('gone');
    await t.upsert([1n, 2n, 3n, 4n], [1, 2, 3, 4]); // clock 1, rows in both buckets (with Adam's two slot hashes)
    await t.upsert([2n], [2]); // clock 2
    const keys = (await plain.keys('gone:*')).sort();
    expect(keys).toContain('gone:c{3560}:clock');
    expect(keys.length).toBeGreaterThan(4); // 2 buckets x (main, scores, 2 slots) + the clock
    await rawOf(t).drop();
    expect(await plain.keys('gone:*')).toEqual([]);
    expect(t.size()).toBe(0);
    await t.upsert([9n], [9]);
    expect([...(await scoresOf(t)).entries()]).toEqual([[9n, 1n]]);
    expect(await plain.get('gone:c{3560}:clock')).toBe('1');
  });

  it('drop of a disposed table is DISPOSED, and leaves Redis as it was', async () => {
    const t = await open('kept');
    await t.upsert([1n], [1]);
    const keys = (await plain.keys('kept:*')).sort();
    const raw = rawOf(t);
    t.dispose();
    await rejection(raw.drop(), 'DISPOSED');
    expect((await plain.keys('kept:*')).sort()).toEqual(keys);
  });
});
