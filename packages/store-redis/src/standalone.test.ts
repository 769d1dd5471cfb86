import { createHash } from 'node:crypto';
import { initializers, optimizers } from '@embedstack/core';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisRawTable, RedisStore } from './index.js';
import { float32Bytes, INT64_MAX, INT64_MIN, int64Field, refBucket, refBucketNames, rejection } from './test/helpers.js';
import { freePort, type RedisServerHandle, startRedisServer } from './testing/index.js';

let server: RedisServerHandle;
let store: RedisStore;
let plain: Redis;
const extraStores: RedisStore[] = [];

const hosts = () => [{ host: server.host, port: server.port }];
const newStore = (o: ConstructorParameters<typeof RedisStore>[0] = {}) => {
  const s = new RedisStore({ hosts: hosts(), ...o });
  extraStores.push(s);
  return s;
};
const rawOf = (t: { raw: unknown }) => t.raw as RedisRawTable;
const sortedRows = async (t: Awaited<ReturnType<RedisStore['openTable']>>) => {
  const e = await t.export();
  return Array.from(e.keys as BigInt64Array, (k, i) => [k, Array.from(e.values.subarray(i * t.dim, (i + 1) * t.dim))] as const).sort((a, b) =>
    a[0] < b[0] ? -1 : 1,
  );
};

beforeAll(async () => {
  server = await startRedisServer();
  store = new RedisStore({ hosts: hosts() });
  plain = new Redis({ host: server.host, port: server.port });
});

afterAll(async () => {
  for (const s of extraStores) await s.close();
  await store?.close();
  plain?.disconnect();
  await server?.stop();
});

describe('standalone Redis store', () => {
  it('TFRA worked example 1: upsert, size, remove, lookup with default, export', async () => {
    const t = await store.openTable({ dim: 2, name: 'v', initializer: initializers.row([-1, -2]) }, { modelTag: 'ex1', storageSlice: 2 });
    await t.upsert([0n, 1n, 2n, 3n], new Float32Array([0, 1, 2, 3, 4, 5, 6, 7]));
    expect(t.size()).toBe(4);
    expect(await t.remove([3n, 4n])).toBe(1);
    expect(t.size()).toBe(3);
    const r = await t.find([0n, 1n, 4n]);
    expect(Array.from(r.values)).toEqual([0, 1, 2, 3, -1, -2]);
    expect(Array.from(r.exists)).toEqual([1, 1, 0]);
    expect((await sortedRows(t)).map((x) => x[0])).toEqual([0n, 1n, 2n]);
    expect(t.size()).toBe(3); // find never inserts
  });

  it("stores TFRA's layout: hash per bucket, 8-byte little-endian fields, float32 values", async () => {
    const S = 4;
    const t = await store.openTable({ dim: 3, name: 'user_emb' }, { modelTag: 'layout1', storageSlice: S, trackScores: false });
    const keys = [0n, 1n, 2n, 3n, 5n, -1n, INT64_MIN, INT64_MAX, 1n << 32n, (1n << 32n) + 3n, 123456789012345n, -987654321n];
    const rows = keys.map((_, i) => [i, -i, i / 4]);
    await t.upsert(keys, new Float32Array(rows.flat()));
    const names = refBucketNames('layout1', 'user_emb', S);
    expect((await rawOf(t).bucketNames()).map(String)).toEqual(names);
    const used = [...new Set(keys.map((k) => names[refBucket(k, S)]!))].sort();
    expect((await plain.keys('layout1:*')).sort()).toEqual(used);
    for (const [i, k] of keys.entries()) {
      const stored = await plain.hgetBuffer(names[refBucket(k, S)]!, int64Field(k));
      expect(stored, `key ${k}`).toEqual(float32Bytes(rows[i]!));
    }
    let total = 0;
    for (const n of names) total += await plain.hlen(n);
    expect(total).toBe(keys.length);
    // by hand (bucket = low 32 bits, unsigned, mod 4): 2^32 + 3 -> 3 (as key 3); INT64_MIN and 2^32 -> 0; -1 -> 0xffffffff % 4 = 3
    expect([3n, (1n << 32n) + 3n, INT64_MIN, 1n << 32n, -1n, 5n].map((k) => refBucket(k, S))).toEqual([3, 3, 0, 0, 3, 1]);
    for (const [k, b] of [[(1n << 32n) + 3n, 3], [INT64_MIN, 0], [-1n, 3]] as const) {
      expect(await plain.hexists(names[b]!, int64Field(k)), `key ${k} in bucket ${b}`).toBe(1);
    }
  });

  it('int32 keys use 4-byte fields and their uint32 bit pattern for the bucket', async () => {
    const S = 3;
    const t = await store.openTable({ dim: 1, name: 'small', keyDtype: 'int32' }, { modelTag: 'layout32', storageSlice: S, trackScores: false });
    const keys = [-1, 0, 7, 2147483647, -2147483648];
    await t.upsert(Int32Array.from(keys), new Float32Array([1, 2, 3, 4, 5]));
    const names = refBucketNames('layout32', 'small', S);
    for (const [i, k] of keys.entries()) {
      const field = Buffer.alloc(4);
      field.writeInt32LE(k);
      expect(await plain.hgetBuffer(names[(k >>> 0) % S]!, field)).toEqual(float32Bytes([i + 1]));
    }
    expect(Array.from((await t.find(Int32Array.from(keys))).values)).toEqual([1, 2, 3, 4, 5]);
  });

  it('using_md5_prefix_name and explicit hash tags name the buckets as TFRA does', async () => {
    const md5 = await store.openTable({ dim: 1, name: 'e' }, { modelTag: 'mdl', usingMd5PrefixName: true, trackScores: false });
    await md5.upsert([5n], [1]);
    const name = Buffer.concat([createHash('md5').update('mdl:e').digest(), Buffer.from('{3560}')]);
    expect(await plain.hlen(name)).toBe(1);
    expect(await plain.hgetBuffer(name, int64Field(5n))).toEqual(float32Bytes([1]));
    const tagged = await store.openTable({ dim: 1, name: 'e' }, { modelTag: 'tags', storageSlice: 2, hashTags: ['{a}', 'b'], trackScores: false });
    await tagged.upsert([0n, 1n], [10, 11]);
    expect(await plain.hgetBuffer('tags:e{a}', int64Field(0n))).toEqual(float32Bytes([10]));
    expect(await plain.hgetBuffer('tags:e{b}', int64Field(1n))).toEqual(float32Bytes([11]));
  });

  it('keysSendingSize caps the keys of each command per bucket (checked with MONITOR)', async () => {
    const t = await store.openTable({ dim: 1, name: 'mon' }, { modelTag: 'mon', storageSlice: 2, keysSendingSize: 3, trackScores: false });
    const monitor = await plain.monitor();
    const seen: string[][] = [];
    monitor.on('monitor', (_time: string, args: string[]) => seen.push(args));
    const keys = Array.from({ length: 10 }, (_, i) => BigInt(i));
    await t.upsert(keys, keys.map((k) => Number(k) * 2));
    const found = await t.find([...keys, 3n]);
    const marker = `marker-${Date.now()}`;
    await plain.echo(marker);
    for (let i = 0; i < 1500 && !seen.some((a) => a[1] === marker); i++) await new Promise((r) => setTimeout(r, 20));
    monitor.disconnect();
    const ours = (cmd: string) => seen.filter((a) => a[0]!.toLowerCase() === cmd && a[1]!.startsWith('mon:mon{'));
    const hsets = ours('hset');
    const hmgets = ours('hmget');
    // 5 keys per bucket, at most 3 per command: 2 commands per bucket.
    expect(hsets.length).toBe(4);
    expect(hsets.map((a) => (a.length - 2) / 2).sort()).toEqual([2, 2, 3, 3]);
    expect(hmgets.length).toBe(4); // 10 distinct keys (3 repeats): fetched once each
    expect(hmgets.map((a) => a.length - 2).sort()).toEqual([2, 2, 3, 3]);
    expect(Array.from(found.values)).toEqual([...keys.map((k) => Number(k) * 2), 6]);
  });

  it('TFRA worked example 3: accum with the bp_v2 rule (deltas = new - old)', async () => {
    const t = await store.openTable({ dim: 1, name: 'acc' }, { modelTag: 'acc', storageSlice: 2 });
    await t.upsert([0n, 1n, 2n, 3n], [0, 1, 2, 3]);
    await t.upsert([100n], [99]);
    await t.remove([1n]);
    const old = [0, 1, 2, 3];
    const next = [10, 11, 100, 13];
    await t.accum([0n, 1n, 100n, 3n], next.map((v, i) => v - old[i]!), [true, true, false, true]);
    expect(await sortedRows(t)).toEqual([
      [0n, [10]],
      [2n, [2]],
      [3n, [13]],
      [100n, [99]],
    ]);
    await t.accum([7n, 7n], [5, 1], [false, false]); // inserted, then present & !exists: no-op
    await t.accum([7n, 8n], [0.5, 4], [true, true]); // present & exists adds; absent & exists: no-op
    expect(Array.from((await t.find([7n, 8n])).values)).toEqual([5.5, 0]);
    expect(Array.from((await t.find([7n, 8n])).exists)).toEqual([1, 0]);
  });

  it('accum is atomic on the server: concurrent calls from several clients sum exactly', async () => {
    const layout = { modelTag: 'atomic', storageSlice: 3, keysSendingSize: 2 };
    const spec = { dim: 2, name: 'sum' };
    const clients = await Promise.all([0, 1, 2, 3].map(() => newStore().openTable(spec, layout)));
    const keys = [0n, 1n, 2n, 3n, 4n, 5n, 6n, 7n];
    await clients[0]!.upsert(keys, new Float32Array(16));
    const calls = 25;
    const expected = keys.map(() => [0, 0]);
    const jobs: Promise<void>[] = [];
    for (const [c, t] of clients.entries()) {
      for (let j = 0; j < calls; j++) {
        const ks = [...keys, 0n, 5n]; // repeats apply twice
        const deltas = ks.flatMap((k) => [c * 100 + j, Number(k)]);
        ks.forEach((k, i) => {
          expected[Number(k)]![0]! += deltas[2 * i]!;
          expected[Number(k)]![1]! += deltas[2 * i + 1]!;
        });
        jobs.push(t.accum(ks, new Float32Array(deltas), new Uint8Array(ks.length).fill(1)));
      }
    }
    await Promise.all(jobs);
    const got = await newStore().openTable(spec, layout);
    expect(Array.from((await got.find(keys)).values)).toEqual(expected.flat());
  });

  it('scripts survive SCRIPT FLUSH: EVALSHA falls back to EVAL', async () => {
    const t = await store.openTable({ dim: 1, name: 'flush' }, { modelTag: 'flush', storageSlice: 2 });
    await t.upsert([1n, 2n], [1, 2]);
    await t.accum([1n, 2n], [10, 20], [true, true]);
    expect(await plain.script('FLUSH')).toBe('OK');
    await t.accum([1n, 2n, 3n], [100, 200, 3], [true, true, false]);
    expect(Array.from((await t.find([1n, 2n, 3n])).values)).toEqual([111, 222, 3]);
  });

  it('applyGradients: adagrad rows and accumulators, checked against hand formulas and the raw slot hash', async () => {
    const opt = optimizers.adagrad({ learningRate: 0.1, initialAccumulatorValue: 0.1 });
    const t = await store.openTable({ dim: 2, name: 'ada', optimizer: opt, initializer: initializers.constant(0.5) }, { modelTag: 'ada', storageSlice: 2 });
    await t.upsert([1n], [1, -1]);
    await t.applyGradients([1n, 2n, 1n], [0.5, 1, 0.25, -0.5, 0.5, 0], opt, 1);
    // key 1: g = [1, 1], acc = 1.1; key 2 (new, starts at 0.5): g = [0.25, -0.5], acc = [0.1625, 0.35]
    const w1 = [1 - 0.1 / Math.sqrt(1.1), -1 - 0.1 / Math.sqrt(1.1)];
    const w2 = [0.5 - (0.1 * 0.25) / Math.sqrt(0.1625), 0.5 + (0.1 * 0.5) / Math.sqrt(0.35)];
    const close = (a: ArrayLike<number>, e: number[]) => e.forEach((v, i) => expect(a[i]).toBeCloseTo(v, 6));
    close((await t.find([1n, 2n])).values, [...w1, ...w2]);
    await t.applyGradients([2n], [1, 1], opt, 2);
    const w2b = [w2[0]! - 0.1 / Math.sqrt(1.1625), w2[1]! - 0.1 / Math.sqrt(1.35)];
    close((await t.find([2n])).values, w2b);
    const names = refBucketNames('ada', 'ada', 2);
    const acc = await plain.hgetBuffer(`${names[refBucket(2n, 2)]}:slot:accumulators`, int64Field(2n));
    close([acc!.readFloatLE(0), acc!.readFloatLE(4)], [1.1625, 1.35]);
    const e = await t.export();
    const at = Array.from(e.keys as BigInt64Array).indexOf(1n);
    close(e.slots[0]!.subarray(at * 2, at * 2 + 2), [1.1, 1.1]);
  });

  it('export pages through the buckets in a stable order, continuing scans and jumping to an offset', async () => {
    const t = await store.openTable({ dim: 1, name: 'pages' }, { modelTag: 'pages', storageSlice: 3, keysSendingSize: 50 });
    // 600 keys: ~200 per bucket, past the listpack limit, so HSCAN really iterates with a cursor.
    const keys = Array.from({ length: 600 }, (_, i) => BigInt(i) * 7919n - 1000000n);
    await t.upsert(keys, keys.map((k) => Number(k % 1000n)));
    const full = await t.export();
    expect(full.keys.length).toBe(600);
    expect(new Set(Array.from(full.keys as BigInt64Array)).size).toBe(600);
    const byKey = new Map(Array.from(full.keys as BigInt64Array, (k, i) => [k, full.values[i]]));
    for (const k of keys) expect(byKey.get(k)).toBe(Number(k % 1000n));
    const buckets = Array.from(full.keys as BigInt64Array, (k) => refBucket(k, 3));
    expect(buckets).toEqual([...buckets].sort()); // bucket order
    const paged: bigint[] = [];
    for (let offset = 0; offset < 650; offset += 37) paged.push(...(await t.export({ offset, limit: 37 })).keys as BigInt64Array);
    expect(paged).toEqual(Array.from(full.keys as BigInt64Array));
    const jump = await t.export({ offset: 250, limit: 20 });
    expect(Array.from(jump.keys as BigInt64Array)).toEqual(Array.from(full.keys as BigInt64Array).slice(250, 270));
    let n = 0;
    for await (const b of t.exportBatches(64)) n += b.keys.length;
    expect(n).toBe(600);
  });

  it('rows round-trip bit for bit: signalling NaN payloads, -0, subnormals (find, export, findOrInsert)', async () => {
    const dim = 6;
    const bits = [0x7f800001, 0x7f9a39c8, 0xffb235a9, 0x80000000, 0x00000001, 0x7fc00001];
    const t = await store.openTable({ dim, name: 'bits' }, { modelTag: 'bits', storageSlice: 2, trackScores: false });
    const keys = [3n, -5n];
    const row = new Float32Array(keys.length * dim);
    const u = new Uint32Array(row.buffer);
    bits.forEach((b, c) => {
      u[c] = b;
      u[dim + c] = bits[dim - 1 - c]!;
    });
    await t.upsert(keys, row);
    const hex = (f: Float32Array) => Array.from(new Uint32Array(f.buffer, f.byteOffset, f.length), (x) => x.toString(16));
    expect(hex((await t.find(keys)).values)).toEqual(hex(row));
    expect(hex((await t.findOrInsert(keys)).values)).toEqual(hex(row));
    const e = await t.export();
    const at = Array.from(e.keys as BigInt64Array).indexOf(3n);
    expect(hex(e.values.subarray(at * dim, (at + 1) * dim))).toEqual(hex(row.subarray(0, dim)));
  });

  it('storageDtype float16 / bfloat16 is refused with UNSUPPORTED (values would be kept unrounded as float32)', async () => {
    for (const storageDtype of ['float16', 'bfloat16'] as const) {
      const err = await rejection(Promise.resolve().then(() => store.createTable({ dim: 2, name: 'narrow', storageDtype })), 'UNSUPPORTED');
      expect(err.message).toContain(`'${storageDtype}'`);
      await rejection(store.openTable({ dim: 2, name: 'narrow', storageDtype }), 'UNSUPPORTED');
    }
    expect(await plain.keys('test:narrow*')).toEqual([]);
  });

  it('size() is a cache refreshed by calls; sizeAsync() is exact', async () => {
    const layout = { modelTag: 'sizes', storageSlice: 2 };
    const a = await store.openTable({ dim: 1, name: 's' }, layout);
    const b = await newStore().openTable({ dim: 1, name: 's' }, layout);
    await a.upsert([1n, 2n, 3n, 4n, 5n], [1, 2, 3, 4, 5]);
    expect(a.size()).toBe(5);
    await b.upsert([10n, 11n, 12n], [1, 1, 1]);
    expect(b.size()).toBe(8);
    expect(a.size()).toBe(5); // a has not talked to Redis since
    expect(await rawOf(a).sizeAsync()).toBe(8);
    expect(a.size()).toBe(8);
    await a.clear();
    expect(a.size()).toBe(0);
    expect(await plain.keys('sizes:*')).toEqual(['sizes:s{3560}:clock']); // clear keeps the score clock
  });

  it('frequency and timestamp scores live in companion hashes and drive restrict', async () => {
    const f = await store.openTable({ dim: 1, name: 'freq', scorePolicy: 'frequency' }, { modelTag: 'freq', storageSlice: 2 });
    await f.upsert([1n, 2n, 3n], [1, 2, 3]);
    await f.upsert([1n, 2n], [1, 2]);
    await f.upsert([1n, 1n], [1, 1]); // once per call
    await f.find([3n, 3n]); // reads do not count
    const names = refBucketNames('freq', 'freq', 2);
    expect(await plain.hget(`${names[1]}:scores`, int64Field(1n))).toBe('3');
    expect(await plain.hget(`${names[0]}:scores`, int64Field(2n))).toBe('2');
    expect(await f.restrict(1)).toBe(2);
    expect((await sortedRows(f)).map((r) => r[0])).toEqual([1n]);
    expect(await plain.hlen(`${names[0]}:scores`)).toBe(0); // removed rows lose their scores

    const ts = await store.openTable({ dim: 1, name: 'ts', scorePolicy: 'timestamp' }, { modelTag: 'ts', storageSlice: 2 });
    await ts.importRows([1n, 2n, 3n], [1, 2, 3], null, BigUint64Array.from([100n, 300n, 200n]));
    expect(await ts.restrict(2)).toBe(1);
    expect((await sortedRows(ts)).map((r) => r[0])).toEqual([2n, 3n]);
    const before = BigInt(Math.floor(Date.now() / 1000));
    await ts.upsert([3n], [3]);
    const e = await ts.export();
    const s3 = e.scores[Array.from(e.keys as BigInt64Array).indexOf(3n)]!;
    expect(s3 >= before && s3 <= before + 5n).toBe(true);
    expect(await ts.restrict(1)).toBe(1);
    expect((await sortedRows(ts)).map((r) => r[0])).toEqual([3n]);
  });

  it('trackScores: false writes no score keys; restrict is then UNSUPPORTED', async () => {
    const t = await store.openTable({ dim: 1, name: 'noscores' }, { modelTag: 'noscores', trackScores: false });
    await t.upsert([1n, 2n], [1, 2]);
    await t.find([1n]);
    expect(await plain.keys('noscores:*')).toEqual(['noscores:noscores{3560}']);
    const err = await rejection(t.restrict(1), 'UNSUPPORTED');
    expect(err.message).toContain('trackScores');
  });
});

describe('standalone failures', () => {
  it('a store with no server behind it rejects with STORE_UNAVAILABLE within connectTimeoutMs', async () => {
    const port = await freePort();
    const s = newStore({ hosts: [{ host: '127.0.0.1', port }], connectTimeoutMs: 300 });
    const err = await rejection(s.openTable({ dim: 1, name: 'nowhere' }), 'STORE_UNAVAILABLE');
    expect(err.message).toContain('not ready within 300 ms');
    const t = s.createTable({ dim: 1, name: 'nowhere' });
    const err2 = await rejection(t.find([1n, 2n]), 'STORE_UNAVAILABLE');
    expect(err2.message).toMatch(/not ready within 300 ms|ECONNREFUSED/);
  });

  it('a killed server: reads and writes reject with STORE_UNAVAILABLE naming the keys, never initial values', async () => {
    const srv = await startRedisServer();
    try {
      const s = newStore({ hosts: [{ host: srv.host, port: srv.port }], connectTimeoutMs: 400, commandTimeoutMs: 1000, retry: { attempts: 1, delayMs: 50 } });
      const t = await s.openTable({ dim: 2, name: 'doomed', initializer: initializers.constant(7) }, { storageSlice: 3 });
      const u = await s.openTable({ dim: 2, name: 'plain' }, { storageSlice: 3, trackScores: false });
      await t.upsert([1n, 2n, 3n], new Float32Array([1, 1, 2, 2, 3, 3]));
      await u.upsert([1n, 2n, 3n], new Float32Array([1, 1, 2, 2, 3, 3]));
      srv.killNode(0);
      // lru: the call fails at its first step (the shared score clock), before any row
      const clock = await rejection(t.find([1n, 2n, 4n]), 'STORE_UNAVAILABLE');
      expect(clock.message).toContain('Redis find on table "doomed" failed before reading or writing any row (3 keys: 1, 2, 4)');
      // no scores: the HMGETs themselves fail; the keys are named, no initial value is returned
      const read = await rejection(u.find([1n, 2n, 4n]), 'STORE_UNAVAILABLE');
      expect(read.message).toContain('Redis find on table "plain" failed');
      expect(read.message).toMatch(/3 of the call's keys \(1, 2, 4\) in bucket\(s\) \[1, 2\]/);
      const write = await rejection(u.upsert([5n, 6n], [5, 5, 6, 6]), 'STORE_UNAVAILABLE');
      expect(write.message).toMatch(/upsert on table "plain" failed: 2 of the call's keys \(5, 6\)/);
      expect(u.size()).toBe(3);
      expect(t.size()).toBe(3);
    } finally {
      await srv.stop();
    }
  });

  it('a database index the server refuses rejects every call with STORE_UNAVAILABLE, never using database 0', async () => {
    const before = await plain.dbsize();
    const s = newStore({ db: 99 }); // the server has 16 databases
    const err = await rejection(s.openTable({ dim: 1, name: 'wrongdb' }, { modelTag: 'wrongdb' }), 'STORE_UNAVAILABLE');
    expect(err.message).toContain('refused database 99 (options.db)');
    const t = s.createTable({ dim: 1, name: 'wrongdb' }, { modelTag: 'wrongdb', trackScores: false });
    await rejection(t.upsert([1n], [1]), 'STORE_UNAVAILABLE');
    expect(await plain.dbsize()).toBe(before);
    expect(await plain.keys('wrongdb:*')).toEqual([]);
    // a database the server has is used
    const ok = await newStore({ db: 3 }).openTable({ dim: 1, name: 'rightdb' }, { modelTag: 'rightdb', trackScores: false });
    await ok.upsert([1n], [1]);
    const db3 = new Redis({ host: server.host, port: server.port, db: 3 });
    try {
      expect(await db3.keys('rightdb:*')).toEqual(['rightdb:rightdb{3560}']);
    } finally {
      db3.disconnect();
    }
    expect(await plain.keys('rightdb:*')).toEqual([]);
  });

  it('refused credentials reject at once (not after connectTimeoutMs); a refused write says nothing was applied', async () => {
    await plain.call('ACL', 'SETUSER', 'rev-reader', 'on', '>pw', '~*', '+@read', '+info', '+hello', '+client');
    const wrong = newStore({ username: 'rev-reader', password: 'wrong', connectTimeoutMs: 60000 });
    let timer: NodeJS.Timeout | undefined;
    const hang = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('openTable waited for connectTimeoutMs')), 5000)));
    const err = await rejection(Promise.race([wrong.openTable({ dim: 1, name: 'creds' }), hang]).finally(() => clearTimeout(timer)), 'STORE_UNAVAILABLE');
    expect(err.message).toContain('refused the credentials of user "rev-reader"');
    expect(err.message).toContain('WRONGPASS');
    // a user without write permission: the server refuses the HSETs before running them
    const reader = newStore({ username: 'rev-reader', password: 'pw' });
    const t = await reader.openTable({ dim: 1, name: 'ro' }, { modelTag: 'rev-ro', storageSlice: 2, trackScores: false });
    const w = await rejection(t.upsert([1n, 2n], [1, 2]), 'STORE_UNAVAILABLE');
    expect(w.message).toMatch(/2 of the call's keys \(1, 2\) in bucket\(s\) \[0, 1\] on node\(s\) \[standalone\] could not be written \(nothing was applied\): NOPERM/);
    expect(await plain.keys('rev-ro:*')).toEqual([]);
  });

  it('a closed store rejects with STORE_UNAVAILABLE; a disposed table with DISPOSED', async () => {
    const s = newStore();
    const t = await s.openTable({ dim: 1, name: 'closing' });
    await s.close();
    const err = await rejection(t.find([1n]), 'STORE_UNAVAILABLE');
    expect(err.message).toContain('closed');
    const t2 = await store.openTable({ dim: 1, name: 'disposing' });
    t2.dispose();
    await rejection(Promise.resolve().then(() => t2.find([1n])), 'DISPOSED');
  });
});

describe('the test helpers', () => {
  it('startRedisServer on a port another process holds: the node exits with "Address already in use" (not started again: the port was given), and the error names the port and the log line', async () => {
    const { createServer } = await import('node:net');
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as { port: number }).port;
    try {
      const err = await startRedisServer({ port }).then(
        () => null,
        (e: Error) => e,
      );
      expect(err).toBeInstanceOf(Error);
      expect(err!.message).toContain(`redis-server on port ${port} exited`);
      expect(err!.message).toContain('Address already in use');
    } finally {
      holder.close();
    }
  });
});
