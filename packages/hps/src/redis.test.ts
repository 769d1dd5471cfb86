// Redis Cluster as L2 shared by two HPS processes, and online updates from a Redis stream (real redis-server processes).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { RedisStore } from '@embedstack/store-redis';
import { RocksStore } from '@embedstack/store-rocksdb';
import { freePort, startRedisCluster, startRedisServer, type RedisClusterHandle } from '@embedstack/store-redis/testing';
import { HPS, updateMessageFields, type HpsOptions } from './index.js';
import { expectedRows, partOf, psConfig, rowOf, spreadKeys, tempDir, writeTable } from '../test/fixtures.js';
import { until } from '../test/servers.js';

let cluster: RedisClusterHandle;
let address: string;
const t = tempDir('hps-redis-');
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3 });
  address = cluster.hosts.map((h) => `${h.host}:${h.port}`).join(',');
}, 60000);
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(async () => {
  await cluster?.stop();
  t.cleanup();
});

const keys = spreadKeys(400);
const present = new Set(keys);

const bySigned = (a: bigint, b: bigint): number => (a < b ? -1 : a > b ? 1 : 0);

async function serve(config: Record<string, unknown>, options: Omit<HpsOptions, 'psConfig'> = {}): Promise<HPS> {
  const s = await HPS.create({ psConfig: config, ...options });
  cleanups.push(() => s.close());
  return s;
}

describe('HPS on Redis', () => {
  it('shares a Redis Cluster L2 between two HPS instances', async () => {
    const folder = writeTable(join(t.dir, 'shared'), keys, 8);
    const a = await serve(psConfig([folder], [8], { gpucache: false }, { volatile_db: { type: 'redis_cluster', address } }));
    // b loads nothing into L2 and has no L3: its rows can only come from the L2 that a filled
    const b = await serve(psConfig([folder], [8], { gpucache: false }, { volatile_db: { type: 'redis_cluster', address, initial_cache_rate: 0 } }));
    const ask = [...keys.slice(0, 100), 31337n];
    expect(Array.from((await b.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
    expect(b.stats('m', 0).l2).toEqual({ hits: 100, misses: 1, hitRate: 100 / 101 });
    expect(Array.from((await a.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
  });

  it('applies redis_stream updates to L2 and L3, at once to keys in L1', async () => {
    const folder = writeTable(join(t.dir, 'upd'), keys, 4);
    const s = await serve(
      psConfig([folder], [4], { gpucacheper: 0.5, hit_rate_threshold: 2 }, {
        persistent_db: { type: 'rocks_db', path: join(t.dir, 'rocks-upd') },
        update_source: { type: 'redis_stream', brokers: address, poll_timeout_ms: 20 },
      }),
    );
    const cached = keys.slice(0, 10);
    await s.lookup(cached, 'm', 0); // now in L1
    const fresh = keys.slice(200, 205); // not in L1
    const upd = [...cached.slice(0, 3), ...fresh, 999n];
    const vals = new Float32Array(upd.flatMap((k) => rowOf(k, 4, 9)));
    const producer = new RedisStore({ mode: 'cluster', hosts: cluster.hosts });
    cleanups.push(() => producer.close());
    const tag = 'hps_et.m.sparse_embedding0';
    await producer.connection.exec([{ route: Buffer.from(tag), name: 'XADD', args: [tag, '*', ...updateMessageFields(BigInt64Array.from(upd), vals)] }], false);
    const want = [...cached.slice(0, 3).flatMap((k) => rowOf(k, 4, 9)), ...expectedRows(cached.slice(3), 4, present, -1)];
    let got: number[] = [];
    for (let i = 0; i < 1500 && JSON.stringify(got) !== JSON.stringify(want); i++) {
      await new Promise((r) => setTimeout(r, 20));
      got = Array.from((await s.lookup(cached, 'm', 0)).data as Float32Array);
    }
    expect(got).toEqual(want);
    await s.refreshEmbeddingCache('m');
    expect(Array.from((await s.lookup([...fresh, 999n], 'm', 0)).data as Float32Array)).toEqual([...fresh, 999n].flatMap((k) => rowOf(k, 4, 9)));
  });

  it("applies redis_stream updates to L3 (L2 disabled) while lookups run, each answer the old row or the new one; update_filters select models as HugeCTR's do", async () => {
    const folder = writeTable(join(t.dir, 'l3u'), keys, 4);
    const config = psConfig([folder], [4], { model: 'l3u', gpucache: false }, {
      volatile_db: { type: 'disabled' },
      // HugeCTR reads a filter f as the tag pattern ^hps_et\.f\..+$: 'l3u' lets model l3u through, not l3x
      persistent_db: { type: 'rocks_db', path: join(t.dir, 'rocks-l3u'), update_filters: ['l3u'] },
      update_source: { type: 'redis_stream', brokers: address, poll_timeout_ms: 20 },
    });
    const models = config.models as Record<string, unknown>[];
    // l3x holds the keys in an L1, which an update reaches whatever the filters: its L1 rows show that its message was read
    models.push({ ...models[0]!, model: 'l3x', gpucache: true, gpucacheper: 1, hit_rate_threshold: 2 });
    const s = await serve(config);
    const ask = keys.slice(0, 50);
    const before = expectedRows(ask, 4, present, -1);
    const after = ask.flatMap((k) => rowOf(k, 4, 9));
    const rows = async (model: string) => Array.from((await s.lookup(ask, model, 0)).data as Float32Array);
    expect(await rows('l3x')).toEqual(before); // now in l3x's L1
    const producer = new RedisStore({ mode: 'cluster', hosts: cluster.hosts });
    cleanups.push(() => producer.close());
    const publish = async (tag: string) => {
      const [r] = await producer.connection.exec([{ route: Buffer.from(tag), name: 'XADD', args: [tag, '*', ...updateMessageFields(BigInt64Array.from(ask), new Float32Array(after))] }], false);
      if (r!.error) throw r!.error;
    };
    // Polls every 20 ms, at most 3000 times (~60 s: no wall-clock bound tighter than the test's own).
    const untilApplied = (check: () => Promise<boolean> | boolean) => until(check, 3000);
    // 8 lookups at a time keep running while the messages arrive and are applied. Each row is the old
    // one or the new one; a lookup started once a lookup has returned every new row returns them all.
    let applied = false;
    let done = false;
    const afterApplied = new Array<number>(8).fill(0);
    const readers = Array.from({ length: 8 }, async (_, reader) => {
      while (!done) {
        const started = applied;
        const got = await rows('l3u');
        for (let i = 0; i < ask.length; i++) {
          const row = JSON.stringify(got.slice(i * 4, i * 4 + 4));
          expect([JSON.stringify(before.slice(i * 4, i * 4 + 4)), JSON.stringify(after.slice(i * 4, i * 4 + 4))]).toContain(row);
        }
        if (started) {
          expect(got).toEqual(after);
          afterApplied[reader]!++;
        }
      }
    });
    await publish('hps_et.l3x.sparse_embedding0'); // filtered out of L3 (and there is no L2)
    await publish('hps_et.l3u.sparse_embedding0');
    let got: number[] = [];
    await untilApplied(async () => JSON.stringify((got = await rows('l3u'))) === JSON.stringify(after));
    expect(got).toEqual(after);
    applied = true;
    // every reader runs two lookups after that (counted, not timed: a loaded machine only takes longer)
    await untilApplied(() => afterApplied.every((n) => n >= 2));
    done = true;
    await Promise.all(readers);
    expect(afterApplied.every((n) => n >= 2)).toBe(true);
    // l3x's message was read: its L1 rows are the new ones ...
    await untilApplied(async () => JSON.stringify(await rows('l3x')) === JSON.stringify(after));
    expect(await rows('l3x')).toEqual(after);
    // ... and its L3 kept the old ones (the filter): L1 refreshed from L3 brings them back
    await s.refreshEmbeddingCache('l3x');
    expect(await rows('l3x')).toEqual(before);
  }, 90000);

  /**
   * Another server, attached to the L2 tables model `model` serves (it writes nothing into L2 at
   * start: a startup load would go beside them), applies an online update of every key (rows of
   * `salt`) to them; resolves once its own lookups (L2 only) return the new rows.
   */
  async function rewriteL2(model: string, folder: string, salt: number): Promise<void> {
    const other = await serve(
      psConfig([folder], [4], { model, gpucache: false }, {
        volatile_db: { type: 'redis_cluster', address, initial_cache_rate: 0 },
        update_source: { type: 'redis_stream', brokers: address, poll_timeout_ms: 20 },
      }),
    );
    const producer = new RedisStore({ mode: 'cluster', hosts: cluster.hosts });
    cleanups.push(() => producer.close());
    const tag = `hps_et.${model}.sparse_embedding0`;
    const rows = keys.flatMap((k) => rowOf(k, 4, salt));
    await producer.connection.exec([{ route: Buffer.from(tag), name: 'XADD', args: [tag, '*', ...updateMessageFields(BigInt64Array.from(keys), new Float32Array(rows))] }], false);
    let got: number[] = [];
    for (let i = 0; i < 1500 && JSON.stringify(got) !== JSON.stringify(rows); i++) {
      await new Promise((r) => setTimeout(r, 20));
      got = Array.from((await other.lookup(keys, model, 0)).data as Float32Array);
    }
    expect(got).toEqual(rows);
  }

  it('refreshes L1 periodically (refresh_interval) from an L2 another server rewrote', async () => {
    const v1 = writeTable(join(t.dir, 'r1'), keys, 4);
    const l2 = { type: 'redis_cluster', address };
    // a keeps its version (followReloads false): the other server's writes reach it through the refresh alone
    const a = await serve(psConfig([v1], [4], { model: 'p', hit_rate_threshold: 2, refresh_interval: 0.05 }, { volatile_db: l2 }), { sharedL2: { followReloads: false } });
    const ask = keys.slice(0, 20);
    expect(Array.from((await a.lookup(ask, 'p', 0)).data as Float32Array)).toEqual(expectedRows(ask, 4, present, -1));
    await rewriteL2('p', v1, 3);
    const want = JSON.stringify(ask.flatMap((k) => rowOf(k, 4, 3)));
    let got = '';
    for (let i = 0; i < 1500 && got !== want; i++) {
      await new Promise((r) => setTimeout(r, 20));
      got = JSON.stringify(Array.from((await a.lookup(ask, 'p', 0)).data as Float32Array));
    }
    expect(got).toBe(want);
    expect(a.stats('p', 0).l1.misses).toBe(20); // served from L1 throughout, refreshed in place
  });

  it('refreshEmbeddingCache re-reads every cached row from an L2 another server rewrote (no misses, new rows)', async () => {
    const v1 = writeTable(join(t.dir, 'e1'), keys, 4);
    const l2 = { type: 'redis_cluster', address };
    // a keeps its version (followReloads false): the other server's writes reach it through the refresh alone
    const a = await serve(psConfig([v1], [4], { model: 'e', hit_rate_threshold: 2 }, { volatile_db: l2 }), { sharedL2: { followReloads: false } });
    const ask = keys.slice(0, 30);
    expect(Array.from((await a.lookup(ask, 'e', 0)).data as Float32Array)).toEqual(expectedRows(ask, 4, present, -1));
    await rewriteL2('e', v1, 7);
    // L1 still holds the old rows until the refresh
    expect(Array.from((await a.lookup(ask, 'e', 0)).data as Float32Array)).toEqual(expectedRows(ask, 4, present, -1));
    await a.refreshEmbeddingCache('e');
    expect(Array.from((await a.lookup(ask, 'e', 0)).data as Float32Array)).toEqual(ask.flatMap((k) => rowOf(k, 4, 7)));
    expect(a.stats('e', 0).l1).toEqual({ hits: 60, misses: 30, hitRate: 60 / 90 });
  });

  it('a Redis L2 that dies mid-serving gives coded errors, never wrong rows', async () => {
    const server = await startRedisServer();
    cleanups.push(() => server.stop());
    const folder = writeTable(join(t.dir, 'dies'), keys, 4);
    const s = await serve(psConfig([folder], [4], { gpucache: false }, { volatile_db: { type: 'redis_cluster', address: `${server.host}:${server.port}` } }));
    const ask = keys.slice(0, 30);
    expect(Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 4, present, -1));
    await server.stop();
    await expect(s.lookup(ask, 'm', 0)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
  }, 30000);

  it('enforces overflow_margin per partition on Redis: evict_oldest keeps the newest rows (ties: smaller keys), exact lookups throughout', async () => {
    const folder = writeTable(join(t.dir, 'ovf'), keys, 4);
    const l2 = { type: 'redis_cluster', address, num_partitions: 2, overflow_margin: 50, overflow_resolution_target: 0.5, overflow_policy: 'evict_oldest', cache_missed_embeddings: true };
    const s = await serve(psConfig([folder], [4], { model: 'ovf', gpucache: false }, { volatile_db: l2, persistent_db: { type: 'rocks_db', path: join(t.dir, 'rocks-ovf') } }));
    // an independent client reads the partitions back (same table options)
    const reader = new RedisStore({ mode: 'cluster', hosts: cluster.hosts });
    cleanups.push(() => reader.close());
    const part = (p: number) => reader.openTable({ kind: 'dynamic', name: `ovf.sparse_embedding0.p${p}`, dim: 4, keyDtype: 'int64', scorePolicy: 'lru' }, { modelTag: 'hps' });
    const resident = async (p: number, ks: bigint[]): Promise<bigint[]> => {
      const tbl = await part(p);
      try {
        const r = await tbl.export();
        const all = new Set(Array.from(r.keys as BigInt64Array));
        return ks.filter((k) => all.has(k)).sort(bySigned);
      } finally {
        tbl.dispose();
      }
    };
    const inPart = [0, 1].map((p) => keys.filter((k) => partOf(k, 2) === p).sort(bySigned));
    expect(inPart[0]!.length).toBeGreaterThan(100);
    // the load wrote each partition in one call (one clock tick): cut back to 25, ties kept by smaller signed key
    for (const p of [0, 1]) expect(await resident(p, keys)).toEqual(inPart[p]!.slice(0, 25));
    // 10 evicted keys of partition 0 come from L3 and are written back (35 rows: no overflow) ...
    const b = inPart[0]!.slice(25, 35);
    const c = inPart[0]!.slice(35, 55);
    expect(Array.from((await s.lookup(b, 'ovf', 0)).data as Float32Array)).toEqual(expectedRows(b, 4, present, -1));
    expect((await resident(0, keys)).length).toBe(35);
    // ... 20 more make 55 > 50: back to 25 = the newest 20, then 5 of the 10 before them (smaller keys)
    expect(Array.from((await s.lookup(c, 'ovf', 0)).data as Float32Array)).toEqual(expectedRows(c, 4, present, -1));
    expect(await resident(0, keys)).toEqual([...c, ...b.slice(0, 5)].sort(bySigned));
    expect(await resident(1, keys)).toEqual(inPart[1]!.slice(0, 25));
    expect(s.stats('ovf', 0).l3.hits).toBe(30);
    const all = Array.from((await s.lookup(keys.slice(0, 120), 'ovf', 0)).data as Float32Array);
    expect(all).toEqual(expectedRows(keys.slice(0, 120), 4, present, -1));
  }, 30000);

  it('evict_least_used and evict_random on Redis: partitions stay within overflow_margin; frequently read rows survive lfu', async () => {
    for (const policy of ['evict_least_used', 'evict_random'] as const) {
      const folder = writeTable(join(t.dir, `ovf-${policy}`), keys, 4);
      const model = policy === 'evict_random' ? 'rnd' : 'lfu';
      const l2 = { type: 'redis_cluster', address, num_partitions: 3, overflow_margin: 30, overflow_resolution_target: 0.5, overflow_policy: policy, cache_missed_embeddings: true };
      const s = await serve(psConfig([folder], [4], { model, gpucache: false }, { volatile_db: l2, persistent_db: { type: 'rocks_db', path: join(t.dir, `rocks-${policy}`) } }));
      const reader = new RedisStore({ mode: 'cluster', hosts: cluster.hosts });
      cleanups.push(() => reader.close());
      const scorePolicy = policy === 'evict_random' ? 'customized' : 'lfu';
      const sizes = async (): Promise<Set<bigint>[]> =>
        Promise.all(
          [0, 1, 2].map(async (p) => {
            const tbl = await reader.openTable({ kind: 'dynamic', name: `${model}.sparse_embedding0.p${p}`, dim: 4, keyDtype: 'int64', scorePolicy }, { modelTag: 'hps' });
            try {
              return new Set(Array.from((await tbl.export()).keys as BigInt64Array));
            } finally {
              tbl.dispose();
            }
          }),
        );
      for (const p of await sizes()) expect(p.size).toBe(15); // loaded ~133 rows per partition, cut back to 0.5 * 30
      const hot = [...(await sizes())[0]!].slice(0, 5);
      for (let i = 0; i < 4; i++) await s.lookup(hot, model, 0); // read from L2: their use counts rise
      for (let round = 0; round < 4; round++) {
        const ask = keys.slice(round * 90, round * 90 + 90);
        expect(Array.from((await s.lookup(ask, model, 0)).data as Float32Array)).toEqual(expectedRows(ask, 4, present, -1));
        for (const p of await sizes()) expect(p.size).toBeLessThanOrEqual(30);
      }
      if (policy === 'evict_least_used') {
        const p0 = (await sizes())[0]!;
        for (const k of hot) expect(p0.has(k)).toBe(true);
      }
    }
  }, 60000);

  it("a model loaded again with new files never serves the earlier load's rows from the shared Redis L2", async () => {
    const server = await startRedisServer();
    cleanups.push(() => server.stop());
    const volatile = { type: 'redis_cluster', address: `${server.host}:${server.port}`, num_partitions: 4 };
    const ask = [...keys];
    // the first export: all 400 keys (salt 0), every row written to Redis
    const first = await serve(psConfig([writeTable(join(t.dir, 'reload-1'), keys, 4)], [4], { model: 'rl', gpucache: false }, { volatile_db: volatile }));
    expect(Array.from((await first.lookup(ask, 'rl', 0)).data as Float32Array)).toEqual(expectedRows(ask, 4, present, -1));
    await first.close();
    // the next export: 300 of the keys with new values (salt 5), 100 dropped; half of it cached in L2, all of it in L3
    const kept = keys.slice(0, 300);
    const now = new Set(kept);
    const second = await serve(
      psConfig([writeTable(join(t.dir, 'reload-2'), kept, 4, { salt: 5 })], [4], { model: 'rl', gpucache: false }, {
        volatile_db: { ...volatile, initial_cache_rate: 0.5 },
        persistent_db: { type: 'rocks_db', path: join(t.dir, 'rocks-reload') },
      }),
    );
    expect(Array.from((await second.lookup(ask, 'rl', 0)).data as Float32Array)).toEqual(expectedRows(ask, 4, now, -1, 5));
    expect(second.stats('rl', 0).l2.hits).toBe(150); // only the rows this load cached: the earlier 400 are gone
    // a server that only attaches to the L2 (initial_cache_rate 0, no L3) reads the rows the second load wrote
    const attached = await serve(psConfig([join(t.dir, 'reload-2')], [4], { model: 'rl', gpucache: false }, { volatile_db: { ...volatile, initial_cache_rate: 0 } }));
    const cached = kept.slice(0, 150);
    expect(Array.from((await attached.lookup(cached, 'rl', 0)).data as Float32Array)).toEqual(cached.flatMap((k) => rowOf(k, 4, 5)));
    expect(Array.from((await attached.lookup(kept.slice(150), 'rl', 0)).data as Float32Array)).toEqual(expectedRows(kept.slice(150), 4, new Set(), -1));
  }, 30000);

  it("loadModel in a running server deletes the superseded version's Redis L2 tables (their score clocks included) and empties its L3 tables once no lookup reads them; the published version stays; the first load's stable tables go once superseded", async () => {
    const server = await startRedisServer();
    cleanups.push(() => server.stop());
    // evict_oldest: each partition keeps a score clock in Redis, which a deleted table must not leave behind
    const volatile = { type: 'redis_cluster', address: `${server.host}:${server.port}`, num_partitions: 2, overflow_policy: 'evict_oldest' };
    const rocks = join(t.dir, 'rocks-gc');
    const dim = 64; // 10000 keys are 3 lookup chunks: the lookup below spans loop turns
    const ks = spreadKeys(10000);
    const all = new Set(ks);
    const entry = (salt: number) => (psConfig([writeTable(join(t.dir, `gc-${salt}`), ks, dim, { salt })], [dim], { model: 'gc', gpucache: false }) .models as Record<string, unknown>[])[0]!;
    let atLastBatch: (() => void) | null = null;
    const s = await HPS.create({
      psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile, persistent_db: { type: 'rocks_db', path: rocks } }), models: [entry(0)] },
      onProgress: (p) => {
        if (p.rowsLoaded === p.rows) atLastBatch?.();
      },
    });
    cleanups.push(() => s.close());
    // what Redis holds, read by an independent client: table prefixes of model gc
    const redis = new RedisStore({ mode: 'standalone', hosts: [{ host: server.host, port: server.port }] });
    cleanups.push(() => redis.close());
    const tablesInRedis = async (): Promise<string[]> => {
      const [r] = await redis.connection.exec([{ route: Buffer.from('k'), name: 'KEYS', args: ['hps:gc.*'] }], true);
      return [...new Set((r!.value as Buffer[]).map((b) => b.toString('latin1').replace(/\{.*$/s, '')))].sort();
    };
    const stable = ['hps:gc.sparse_embedding0.p0', 'hps:gc.sparse_embedding0.p1'];
    const v = (n: number) => [`hps:gc.sparse_embedding0.v${n}.p0`, `hps:gc.sparse_embedding0.v${n}.p1`];
    const rows = async (): Promise<number[]> => Array.from((await s.lookup(ks, 'gc', 0)).data as Float32Array);
    expect(await tablesInRedis()).toEqual(stable);
    await s.loadModel(entry(1));
    expect(await rows()).toEqual(expectedRows(ks, dim, all, -1, 1));
    expect(await tablesInRedis()).toEqual(v(2)); // the first load (stable names) is read by no server now
    // a lookup on version 2 still in flight when version 3 takes over: version 2 is deleted only after it
    let inFlight: Promise<number[]> | null = null;
    atLastBatch = () => {
      atLastBatch = null;
      inFlight = rows();
    };
    await s.loadModel(entry(2));
    expect(inFlight).not.toBeNull();
    expect(await inFlight!).toEqual(expectedRows(ks, dim, all, -1, 1));
    expect(await rows()).toEqual(expectedRows(ks, dim, all, -1, 2));
    expect(await tablesInRedis()).toEqual(v(3));
    // a server attaching to the shared L2 (no L3 of its own) serves the version s published: the last reload's rows
    const attached = await serve({ ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 } }), models: [entry(0)] });
    expect(attached.modelInfo('gc').sharedL2).toEqual({ seq: 3, suffix: '.v3', loadedHere: false, error: null });
    expect(Array.from((await attached.lookup(ks, 'gc', 0)).data as Float32Array)).toEqual(expectedRows(ks, dim, all, -1, 2));
    // s stops serving the model: the published version stays for the servers attached to it (and those starting later)
    await s.unloadModel('gc');
    expect(await tablesInRedis()).toEqual(v(3));
    await s.close();
    await attached.close();
    expect(await tablesInRedis()).toEqual(v(3));
    // L3: the reloads' column families are empty, the stable one holds the first load
    const l3 = await RocksStore.open({ path: rocks });
    try {
      const hits = async (name: string): Promise<number> => (await l3.multiGet(name, BigInt64Array.from(ks), dim)).hits;
      expect([await hits('gc.sparse_embedding0'), await hits('gc.sparse_embedding0.v2'), await hits('gc.sparse_embedding0.v3')]).toEqual([10000, 0, 0]);
    } finally {
      await l3.close();
    }
  }, 60000);

  it('reports an unreachable Redis as STORE_UNAVAILABLE', async () => {
    const port = await freePort();
    const folder = writeTable(join(t.dir, 'unreach'), keys.slice(0, 5), 4);
    await expect(HPS.create({ psConfig: psConfig([folder], [4], {}, { volatile_db: { type: 'redis_cluster', address: `127.0.0.1:${port}` } }) })).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
  });
});
