// Servers sharing a Redis L2 follow each other's reloads (a real redis-server per test).
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { RedisStore } from '@embedstack/store-redis';
import { startRedisServer } from '@embedstack/store-redis/testing';
import { HPS } from './index.js';
import { PartitionedDb } from './volatileDb.js';
import { expectedRows, psConfig, spreadKeys, writeTable } from '../test/fixtures.js';
import { modelRows, serverScope, until } from '../test/servers.js';

const { t, cleanups, serve } = serverScope('hps-shared-');

/** A redis-server for one test, and what it holds: the table prefixes of `model` (read by an independent client). */
async function redis(model: string): Promise<{ address: string; tables: () => Promise<string[]> }> {
  const server = await startRedisServer();
  cleanups.push(() => server.stop());
  const client = new RedisStore({ mode: 'standalone', hosts: [{ host: server.host, port: server.port }] });
  cleanups.push(() => client.close());
  const tables = async (): Promise<string[]> => {
    const [r] = await client.connection.exec([{ route: Buffer.from('k'), name: 'KEYS', args: [`hps:${model}.*`] }], true);
    return [...new Set((r!.value as Buffer[]).map((b) => b.toString('latin1').replace(/\{.*$/s, '')))].sort();
  };
  return { address: `${server.host}:${server.port}`, tables };
}

/** Polls `check` (every 20 ms, at most ~15 s) until it returns true. */

const dim = 64; // 10000 keys are 3 lookup chunks: a lookup spans loop turns
const ks = spreadKeys(10000);
const all = new Set(ks);
const { rowsOf } = modelRows(ks, dim);

describe('servers sharing a Redis L2', () => {
  it("an attached server follows another server's reloads: new rows within a poll, its L1 emptied, the superseded version deleted once it switched", async () => {
    const r = await redis('fw');
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 2 };
    const entry = (salt: number) => (psConfig([writeTable(join(t.dir, `fw-${salt}`), ks, dim, { salt })], [dim], { model: 'fw', gpucache: false }).models as Record<string, unknown>[])[0]!;
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] } });
    // b: no L3, an L1 that holds every row it served (filled synchronously), polls every 50 ms
    const bEntry = { ...entry(0), gpucache: true, gpucacheper: 1, hit_rate_threshold: 2 };
    const b = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 } }), models: [bEntry] }, sharedL2: { pollIntervalMs: 50 } });
    expect(await rowsOf(b, 'fw')).toEqual(expectedRows(ks, dim, all, -1));
    expect(await rowsOf(b, 'fw')).toEqual(expectedRows(ks, dim, all, -1));
    expect(b.stats('fw', 0).l1.hits).toBeGreaterThan(8000); // the second lookup came from L1 (but for rows its sets evicted)
    let misses = b.stats('fw', 0).l1.misses; // stats() count on across versions
    for (const salt of [1, 2]) {
      await a.loadModel(entry(salt));
      const seq = a.modelInfo('fw').sharedL2!.seq;
      await until(() => b.modelInfo('fw').sharedL2!.seq === seq);
      expect(b.modelInfo('fw').sharedL2).toEqual({ seq, suffix: `.v${seq}`, loadedHere: false, error: null });
      expect(await rowsOf(b, 'fw')).toEqual(expectedRows(ks, dim, all, -1, salt));
      // a new L1: every key of the lookup missed it, nothing of the previous version is served from it (the rows above say so too)
      expect(b.stats('fw', 0).l1.misses - misses).toBe(10000);
      misses = b.stats('fw', 0).l1.misses;
    }
    // the first load (the stable tables) and a's first reload (.v2) were deleted once b no longer read them; the live version stays
    await until(async () => (await r.tables()).length === 2);
    expect(await r.tables()).toEqual(['hps:fw.sparse_embedding0.v3.p0', 'hps:fw.sparse_embedding0.v3.p1']);
  }, 60000);

  it('a lookup in flight while an attached server switches versions returns the old version entirely (its tables kept until it ends); later ones the new version', async () => {
    const r = await redis('fl');
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 2 };
    const entry = (salt: number) => (psConfig([writeTable(join(t.dir, `fl-${salt}`), ks, dim, { salt })], [dim], { model: 'fl', gpucache: false }).models as Record<string, unknown>[])[0]!;
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    await a.loadModel(entry(1)); // .v2
    // b has an L3 of its own: it streams a published version's files into it before switching (onProgress)
    let inFlight: Promise<number[]> | null = null;
    let loads = 0;
    // reads of .v2 wait at this gate while it is closed: the lookup in flight stays in flight across the switch
    let gate: Promise<void> | null = null;
    let open = (): void => undefined;
    const fetch = PartitionedDb.prototype.fetch;
    cleanups.push(() => (PartitionedDb.prototype.fetch = fetch));
    PartitionedDb.prototype.fetch = async function (this: PartitionedDb, name, keys, d) {
      if (gate && name.endsWith('.v2')) await gate;
      return fetch.call(this, name, keys, d);
    };
    const b = await serve({
      psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 }, persistent_db: { type: 'rocks_db', path: join(t.dir, 'fl-rocks') } }), models: [entry(0)] },
      sharedL2: { pollIntervalMs: 50 },
      loadBatchSize: 2500,
      onProgress: (p) => {
        if (p.rowsLoaded < p.rows) return;
        // the last batch of b's second load (the switch to .v3): b still serves .v2, which a no longer reads
        if (++loads !== 2) return;
        gate = new Promise<void>((res) => (open = res));
        inFlight = rowsOf(b, 'fl');
      },
    });
    cleanups.push(() => open()); // a failing test must not leave the lookup waiting (b.close waits for it)
    expect(b.modelInfo('fl').sharedL2).toMatchObject({ seq: 2, suffix: '.v2' });
    expect(await rowsOf(b, 'fl')).toEqual(expectedRows(ks, dim, all, -1, 1));
    await a.loadModel(entry(2)); // .v3
    const seq = a.modelInfo('fl').sharedL2!.seq;
    await until(() => b.modelInfo('fl').sharedL2!.seq === seq);
    expect(inFlight).not.toBeNull();
    await new Promise((res) => setTimeout(res, 300)); // several polls of a and b (each collects)
    expect(await r.tables()).toContain('hps:fl.sparse_embedding0.v2.p0'); // b still reads .v2: kept
    open();
    expect(await inFlight!).toEqual(expectedRows(ks, dim, all, -1, 1));
    const l2Hits = b.stats('fl', 0).l2.hits; // stats() count on across versions
    expect(await rowsOf(b, 'fl')).toEqual(expectedRows(ks, dim, all, -1, 2));
    expect(b.stats('fl', 0).l2.hits - l2Hits).toBe(10000); // served from a's L2 tables, not b's own L3
    await until(async () => (await r.tables()).length === 2);
    expect(await r.tables()).toEqual(['hps:fl.sparse_embedding0.v3.p0', 'hps:fl.sparse_embedding0.v3.p1']);
  }, 60000);

  it('a version another live server reads is never deleted: a reload keeps it until that server lets it go (followReloads: false)', async () => {
    const r = await redis('ls');
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 2 };
    const entry = (salt: number) => (psConfig([writeTable(join(t.dir, `ls-${salt}`), ks, dim, { salt })], [dim], { model: 'ls', gpucache: false }).models as Record<string, unknown>[])[0]!;
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    await a.loadModel(entry(1)); // .v2, published
    // b attaches to the published version at start and stays on it
    const b = await HPS.create({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 } }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50, followReloads: false } });
    cleanups.push(() => b.close());
    expect(b.modelInfo('ls').sharedL2).toEqual({ seq: 2, suffix: '.v2', loadedHere: false, error: null });
    await a.loadModel(entry(2)); // .v3: a no longer reads .v2, b does
    const v = (n: number) => [`hps:ls.sparse_embedding0.v${n}.p0`, `hps:ls.sparse_embedding0.v${n}.p1`];
    // the first load's stable tables went once a switched to .v2 (no server read them)
    expect(await r.tables()).toEqual([...v(2), ...v(3)]);
    await new Promise((res) => setTimeout(res, 300)); // a few of a's polls (each collects)
    expect(await rowsOf(b, 'ls')).toEqual(expectedRows(ks, dim, all, -1, 1));
    expect(await rowsOf(a, 'ls')).toEqual(expectedRows(ks, dim, all, -1, 2));
    await b.close(); // b's lease ends: .v2 is read by no live server and is not the live version
    await until(async () => (await r.tables()).length === 2);
    expect(await r.tables()).toEqual(v(3));
  }, 60000);

  it('a model unloaded while its server prepares the switch to a newer version stays unloaded', async () => {
    const r = await redis('ul');
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 2 };
    const small = ks.slice(0, 2000);
    const entry = (salt: number) => (psConfig([writeTable(join(t.dir, `ul-${salt}`), small, 8, { salt })], [8], { model: 'ul', gpucache: false }).models as Record<string, unknown>[])[0]!;
    const a = await serve({ psConfig: { ...psConfig([], [8], {}, { volatile_db: volatile }), models: [entry(0)] } });
    let loads = 0;
    let unloading: Promise<void> | null = null;
    let switched = false;
    const b = await serve({
      psConfig: { ...psConfig([], [8], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 }, persistent_db: { type: 'rocks_db', path: join(t.dir, 'ul-rocks') } }), models: [entry(0)] },
      sharedL2: { pollIntervalMs: 50 },
      loadBatchSize: 500,
      onProgress: (p) => {
        if (p.rowsLoaded === 500 && ++loads === 2) unloading = b.unloadModel('ul'); // the switch to a's reload has begun
        if (loads === 2 && p.rowsLoaded === p.rows) switched = true;
      },
    });
    await a.loadModel(entry(1));
    await until(() => switched && unloading !== null);
    await unloading;
    await new Promise((res) => setTimeout(res, 200)); // the switch's end, and a few polls
    expect(b.models()).toEqual([]);
    await expect(b.lookup(small, 'ul', 0)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    // loaded again, b attaches to the published version
    await b.loadModel(entry(0));
    expect(b.modelInfo('ul').sharedL2).toMatchObject({ seq: a.modelInfo('ul').sharedL2!.seq, error: null });
    expect(Array.from((await b.lookup(small, 'ul', 0)).data as Float32Array)).toEqual(expectedRows(small, 8, new Set(small), -1, 1));
  }, 60000);

  it('rejects bad sharedL2 options with coded errors', async () => {
    const folder = writeTable(join(t.dir, 'opt'), ks.slice(0, 5), 4);
    const config = psConfig([folder], [4]);
    await expect(HPS.create({ psConfig: config, sharedL2: { pollMs: 5 } as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(HPS.create({ psConfig: config, sharedL2: { pollIntervalMs: 0 } })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(HPS.create({ psConfig: config, sharedL2: { pollIntervalMs: 100, leaseMs: 150 } })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(HPS.create({ psConfig: config, sharedL2: { followReloads: 'yes' } as never })).rejects.toMatchObject({ code: 'INVALID_TYPE' });
    await expect(HPS.create({ psConfig: config, sharedL2: 5 as never })).rejects.toMatchObject({ code: 'INVALID_TYPE' });
  });
});
