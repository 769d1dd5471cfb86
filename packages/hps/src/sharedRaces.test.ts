// Races and failures of the shared-L2 follow protocol (real redis-server processes; a 3-master cluster).
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { RedisStore } from '@embedstack/store-redis';
import { startRedisCluster, startRedisServer } from '@embedstack/store-redis/testing';
import { HPS } from './index.js';
import { SharedL2Control } from './sharedL2.js';
import { RocksStore } from '@embedstack/store-rocksdb';
import { expectedRows, psConfig, spreadKeys, writeTable } from '../test/fixtures.js';
import { modelRows, serverScope, until } from '../test/servers.js';

const { t, cleanups, serve } = serverScope('hps-races-');

interface R {
  address: string;
  cmd: (name: string, ...args: string[]) => Promise<unknown>;
  server: { stop(): Promise<void> };
}
async function redis(cluster = false): Promise<R> {
  const c = cluster ? await startRedisCluster({ masters: 3 }) : null;
  const server = c ?? (await startRedisServer());
  cleanups.push(() => server.stop());
  const hosts = c ? c.hosts : [{ host: server.host, port: server.port }];
  const client = new RedisStore({ mode: cluster ? 'cluster' : 'standalone', hosts });
  cleanups.push(() => client.close());
  const cmd = async (name: string, ...args: string[]) => {
    const [r] = await client.connection.exec([{ route: Buffer.from(args[0] ?? 'k'), name, args }], false);
    if (r!.error) throw r!.error;
    return r!.value;
  };
  return { address: hosts.map((h) => `${h.host}:${h.port}`).join(','), cmd, server };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const dim = 16;
const ks = spreadKeys(4000);
const all = new Set(ks);
const { rowsOf, wrongRows } = modelRows(ks, dim);
const entryOf = (model: string) => (salt: number) => (psConfig([writeTable(join(t.dir, `${model}-${salt}`), ks, dim, { salt })], [dim], { model, gpucache: false, max_batch_size: 4096 }).models as Record<string, unknown>[])[0]!;

/** A loading server a (`followReloads`) and an attached server b of model entry(0) on a 2-partition Redis L2 at `address`, both polling every `pollIntervalMs`. */
async function loaderAndAttached(address: string, entry: (salt: number) => Record<string, unknown>, followReloads: boolean, pollIntervalMs: number): Promise<{ a: HPS; b: HPS }> {
  const volatile = { type: 'redis_cluster', address, num_partitions: 2 };
  const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs, followReloads } });
  const b = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 } }), models: [entry(0)] }, sharedL2: { pollIntervalMs } });
  return { a, b };
}

describe('shared L2: races and failures', () => {
  it('Redis Cluster (3 masters): an attached server follows reloads, the superseded set is collected (no CROSSSLOT)', async () => {
    const r = await redis(true);
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 3 };
    const entry = entryOf('cl');
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    const b = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 } }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    expect(await rowsOf(b, 'cl')).toEqual(expectedRows(ks, dim, all, -1));
    for (const salt of [1, 2, 3]) {
      await a.loadModel(entry(salt));
      const seq = a.modelInfo('cl').sharedL2!.seq;
      await until(() => b.modelInfo('cl').sharedL2!.seq === seq);
      expect(b.modelInfo('cl').sharedL2).toEqual({ seq, suffix: `.v${seq}`, loadedHere: false, error: null });
      expect(await rowsOf(b, 'cl')).toEqual(expectedRows(ks, dim, all, -1, salt));
    }
    await sleep(300);
    const gens = (await r.cmd('HKEYS', 'hps-ctl:{cl}:gens')) as Buffer[];
    expect(gens.map(String)).toEqual([`.v${a.modelInfo('cl').sharedL2!.seq}`]);
  }, 90000);

  it('two writers reload at once; an attached server and both writers end on the highest seq, only its set stays', async () => {
    const r = await redis();
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 2 };
    const entry = entryOf('cc');
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    const c = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 }, loadBatchSize: 200 });
    const b = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 } }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    for (let round = 0; round < 3; round++) {
      const sa = 10 + 2 * round;
      const sc = 11 + 2 * round;
      await Promise.all([a.loadModel(entry(sa)), c.loadModel(entry(sc))]);
      const seq = Math.max(a.modelInfo('cc').sharedL2!.seq, c.modelInfo('cc').sharedL2!.seq);
      await until(() => [a, b, c].every((s) => s.modelInfo('cc').sharedL2!.seq === seq));
      const live = JSON.parse(String(((await r.cmd('ZRANGE', 'hps-ctl:{cc}:live', '-1', '-1')) as Buffer[])[0])) as { seq: number; files: string[] };
      const salt = live.files[0]!.includes(`cc-${sa}`) ? sa : sc;
      for (const s of [a, b, c]) {
        expect(s.modelInfo('cc').sharedL2!.seq).toBe(seq);
        expect(wrongRows(await rowsOf(s, 'cc'), expectedRows(ks, dim, all, -1, salt))).toBe(0);
      }
      await sleep(300);
      expect(((await r.cmd('HKEYS', 'hps-ctl:{cc}:gens')) as Buffer[]).map(String)).toEqual([`.v${seq}`]);
    }
  }, 90000);

  it('an attached server with a read-only RocksDB L3 follows a reload: lookups of keys L2 lacks still answer (L3 or default)', async () => {
    const r = await redis();
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 2 };
    const entry = entryOf('ro');
    const rocks = join(t.dir, 'ro-rocks');
    // a RocksDB written once (HugeCTR's offline L3), then opened read-only by the attached server
    await (await HPS.create({ psConfig: { ...psConfig([], [dim], {}, { persistent_db: { type: 'rocks_db', path: rocks } }), models: [entry(0)] } })).close();
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    const b = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 }, persistent_db: { type: 'rocks_db', path: rocks, read_only: true } }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    await a.loadModel(entry(1));
    const seq = a.modelInfo('ro').sharedL2!.seq;
    await until(() => b.modelInfo('ro').sharedL2!.seq === seq || b.modelInfo('ro').sharedL2!.error !== null);
    const absent = [123456789n, 987654321n];
    const got = await b.lookup(absent, 'ro', 0).then((x) => Array.from(x.data as Float32Array), (e: Error & { code?: string }) => `${e.code}: ${e.message}`); // was NOT_FOUND (no table <model>.<table>.v2 in the read-only L3)
    expect(got).toEqual(expectedRows(absent, dim, new Set(), -1));
  }, 60000);

  it('a server attaching at start whose startup load outlasts leaseMs: the version it leased is not deleted under it (its lease is renewed while it loads)', async () => {
    const r = await redis();
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 2 };
    const entry = entryOf('sl');
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    await a.loadModel(entry(1)); // .v2 live
    let reload: Promise<void> | null = null;
    let t0: number | null = null;
    // b's L3 writes are slow (a big model, a slow disk): 2 ms per batch, so its load lasts > 2 s
    const put = RocksStore.prototype.put;
    cleanups.push(() => (RocksStore.prototype.put = put));
    RocksStore.prototype.put = async function (this: RocksStore, ...args: Parameters<RocksStore['put']>) {
      await sleep(2);
      return put.apply(this, args);
    } as RocksStore['put'];
    const b = await serve({
      psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 }, persistent_db: { type: 'rocks_db', path: join(t.dir, 'sl-rocks') } }), models: [entry(0)] },
      // The lease is 4x the poll interval and 600 ms: a CI machine's stall of a few hundred ms
      // must not lapse it for real (what this test checks is the renewal during the load)
      sharedL2: { pollIntervalMs: 50, leaseMs: 600 },
      loadBatchSize: 4, // a long startup load (1000 batches into RocksDB)
      onProgress: () => {
        t0 ??= Date.now();
        // .v3 published while b still loads .v2, well after b's first lease (600 ms) would have expired
        if (!reload && Date.now() - t0 > 1300) reload = a.loadModel(entry(2));
      },
    });
    expect(reload).not.toBeNull(); // else b loaded in under 1300 ms: inconclusive
    await reload;
    const info = b.modelInfo('sl').sharedL2!;
    const keys = ((await r.cmd('KEYS', `hps:sl.*${info.suffix}*`)) as Buffer[]).length;
    // b serves the version it leased at its start (.v2), or already followed .v3: the set it serves exists
    expect(keys).toBeGreaterThan(0);
  }, 60000);

  it('control keys lost (allkeys-lru eviction, a control shard restarted / failed over without the last writes): a reload is still served', async () => {
    const r = await redis();
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 2 };
    const entry = entryOf('lk');
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    await a.loadModel(entry(1)); // seq 2, .v2
    await a.loadModel(entry(2)); // seq 3, .v3
    await r.cmd('DEL', 'hps-ctl:{lk}:seq'); // what eviction / a lost write leaves
    await a.loadModel(entry(3)); // was: INCR -> 1, and the load lost to the served seq 3 (discarded)
    expect(wrongRows(await rowsOf(a, 'lk'), expectedRows(ks, dim, all, -1, 3))).toBe(0);
  }, 60000);

  it('close() during a follow stops streaming the published files into L3 (does not wait for the whole load)', async () => {
    const r = await redis();
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 2 };
    const entry = entryOf('cf');
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    let loads = 0;
    let afterClose = 0;
    let closing: Promise<void> | null = null;
    const b: HPS = await HPS.create({
      psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 }, persistent_db: { type: 'rocks_db', path: join(t.dir, 'cf-rocks') } }), models: [entry(0)] },
      sharedL2: { pollIntervalMs: 50 },
      loadBatchSize: 100,
      onProgress: (p) => {
        if (closing) afterClose++;
        if (p.rowsLoaded === 100 && ++loads === 2) closing = b.close();
      },
    });
    await a.loadModel(entry(1));
    await until(() => closing !== null);
    await closing;
    // 40 batches: all but the first were streamed after close() was called
    expect(afterClose).toBeLessThan(5);
  }, 60000);

  it('a server whose lease lapsed while alive (stall, partition) notices at its next renewal: the deleted version it served is registered again and it switches to the live one', async () => {
    const r = await redis();
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 2 };
    const entry = entryOf('lp');
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    await a.loadModel(entry(1)); // .v<s1>
    const s1 = a.modelInfo('lp').sharedL2!.suffix;
    const leased = async () => ((await r.cmd('ZRANGE', 'hps-ctl:{lp}:leases', '0', '-1')) as Buffer[]).map(String);
    const before = new Set(await leased());
    // b keeps the version it took (followReloads false) and writes what it reads from its L3 back into L2
    const b = await serve({
      psConfig: {
        ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0, cache_missed_embeddings: true }, persistent_db: { type: 'rocks_db', path: join(t.dir, 'lp-rocks') } }),
        models: [entry(0)],
      },
      // a lease of 2 s (40 polls): only the stall below lapses it, not a loaded machine's late renewal
      sharedL2: { pollIntervalMs: 50, leaseMs: 2000, followReloads: false },
    });
    const bId = (await leased()).find((id) => !before.has(id))!;
    expect(bId).toBeDefined();
    expect(b.modelInfo('lp').sharedL2!.suffix).toBe(s1);
    await a.loadModel(entry(2)); // only b's lease keeps s1 now
    const s2 = a.modelInfo('lp').sharedL2!.suffix;
    const keysOf = async (suffix: string) => ((await r.cmd('KEYS', `hps:lp.*${suffix}*`)) as Buffer[]).length;
    // b's renewals do not reach Redis for over 2 s: a's collection deletes s1
    const renew = SharedL2Control.prototype.renew;
    let stalled = true;
    cleanups.push(() => (SharedL2Control.prototype.renew = renew));
    SharedL2Control.prototype.renew = async function (this: SharedL2Control, model?: string) {
      if (stalled && this.id === bId) return;
      return renew.call(this, model);
    };
    await until(async () => (await keysOf(s1)) === 0);
    expect(await keysOf(s1)).toBe(0);
    expect(((await r.cmd('HKEYS', 'hps-ctl:{lp}:gens')) as Buffer[]).map(String)).toEqual([s2]);
    // before b's next renewal: its L3 answers with s1's rows, written back into the deleted set
    expect(wrongRows(await rowsOf(b, 'lp'), expectedRows(ks, dim, all, -1, 1))).toBe(0);
    stalled = false;
    expect(await keysOf(s1)).toBeGreaterThan(0);
    await until(() => b.modelInfo('lp').sharedL2!.error?.endsWith('switched to the live version ' + s2.slice(2)) === true);
    const info = b.modelInfo('lp').sharedL2!;
    expect(info.suffix).toBe(s2);
    expect(info.error).toBe(
      `this server's lease lapsed (no renewal reached Redis for 2000 ms) while it served version ${s1.slice(2)} (${s1}), not the live one, ` +
        `and another server deleted that version; switched to the live version ${s2.slice(2)}`,
    );
    expect(wrongRows(await rowsOf(b, 'lp'), expectedRows(ks, dim, all, -1, 2))).toBe(0);
    // the keys b wrote into s1 are collected (s1 was registered again; b no longer uses it)
    await until(async () => (await keysOf(s1)) === 0);
    expect(await keysOf(s1)).toBe(0);
    expect(((await r.cmd('HKEYS', 'hps-ctl:{lp}:gens')) as Buffer[]).map(String)).toEqual([s2]);
  }, 90000);

  it('a poll costs the same Redis round trips and commands with 2 servers as with 8 (was: one GET per other server lease in every collection)', async () => {
    const r = await redis();
    const hosts = [{ host: r.address.split(':')[0]!, port: Number(r.address.split(':')[1]) }];
    const tables = [{ name: 'sparse_embedding0', dim }];
    const poll = async (servers: number) => {
      const model = `n${servers}`;
      const ctls = Array.from({ length: servers }, () => {
        const store = new RedisStore({ mode: 'standalone', hosts });
        cleanups.push(() => store.close());
        return new SharedL2Control(store, 60_000);
      });
      // server i uses .v<i + 1>; .v<servers + 1> is registered and used by no server
      for (const [i, c] of ctls.entries()) {
        c.use(model, `.v${i + 1}`, tables);
        await c.renew(model);
        await c.register(model, `.v${i + 1}`, tables);
      }
      await ctls[0]!.register(model, `.v${servers + 1}`, tables);
      await ctls[0]!.publish(model, { seq: servers, suffix: `.v${servers}`, tables: [{ ...tables[0]!, rows: 1 }], files: [] });
      const conn = (ctls[0] as unknown as { store: RedisStore }).store.connection;
      const exec = conn.exec.bind(conn);
      let trips = 0;
      let commands = 0;
      conn.exec = ((cmds: Parameters<typeof exec>[0], readOnly: boolean) => {
        trips++;
        commands += cmds.length;
        return exec(cmds, readOnly);
      }) as typeof conn.exec;
      await ctls[0]!.renew(model);
      const dropped: string[] = [];
      const deleted = await ctls[0]!.collect(model, async (suffix) => void dropped.push(suffix));
      const gens = ((await r.cmd('HKEYS', `hps-ctl:{${model}}:gens`)) as Buffer[]).map(String).sort();
      return { trips, commands, deleted, dropped, gens };
    };
    const want = (n: number) => ({
      trips: 3, // the renewal, the collection's reads (one script), the HDEL of the one version deleted
      commands: 3,
      deleted: [`.v${n + 1}`],
      dropped: [`.v${n + 1}`],
      gens: Array.from({ length: n }, (_, i) => `.v${i + 1}`).sort(),
    });
    expect(await poll(2)).toEqual(want(2));
    expect(await poll(8)).toEqual(want(8));
  }, 60000);

  it('a lapsed server that renews while another deletes the version it uses finds that version still registered, then (unused) deleted again (was: unregistered after the lapsed server had seen it registered)', async () => {
    const r = await redis();
    const store = new RedisStore({ mode: 'standalone', hosts: [{ host: r.address.split(':')[0]!, port: Number(r.address.split(':')[1]) }] });
    cleanups.push(() => store.close());
    const tables = [{ name: 'sparse_embedding0', dim }];
    const model = 'ur';
    const a = new SharedL2Control(store, 60_000);
    const b = new SharedL2Control(store, 1000);
    const release = b.use(model, '.v1', tables);
    await b.renew(model);
    await b.register(model, '.v1', tables);
    a.use(model, '.v2', tables);
    await a.renew(model);
    await a.register(model, '.v2', tables);
    await a.publish(model, { seq: 2, suffix: '.v2', tables: [{ ...tables[0]!, rows: 1 }], files: [] });
    await sleep(1100); // b's lease expires (Redis's clock)
    // a deletes .v1; meanwhile (between a's reads and its unregistering) b renews, learns of the lapse and checks .v1
    let seen: boolean | null = null;
    const deleted = await a.collect(model, async () => {
      await b.renew(model);
      seen = await b.registered(model, '.v1');
    });
    expect(deleted).toEqual(['.v1']);
    expect(b.takeLapsed()).toEqual([model]);
    expect(seen).toBe(true);
    expect(await b.registered(model, '.v1')).toBe(true); // b uses it: keys it writes there will be collected
    release();
    await b.renew(model);
    expect(await a.collect(model, async () => undefined)).toEqual(['.v1']);
    expect(await b.registered(model, '.v1')).toBe(false);
  }, 60000);

  it('five servers share the L2 (one writer, three following, one keeping its version): reloads are followed; the lapsed lease of the one keeping the first load is noticed, it switches', async () => {
    const r = await redis();
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 2 };
    const entry = entryOf('fv');
    const attached = { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 } }), models: [entry(0)] };
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    const followers = [await serve({ psConfig: attached, sharedL2: { pollIntervalMs: 50 } }), await serve({ psConfig: attached, sharedL2: { pollIntervalMs: 50 } }), await serve({ psConfig: attached, sharedL2: { pollIntervalMs: 50 } })];
    const leased = async () => ((await r.cmd('ZRANGE', 'hps-ctl:{fv}:leases', '0', '-1')) as Buffer[]).map(String);
    const before = new Set(await leased());
    // e keeps the first load (the stable tables) and is the only one reading it once the others follow a's reload
    // a lease of 4 s: only the stall below lapses it, not a loaded machine's late renewal (1 s lapsed at load 27)
    const e = await serve({ psConfig: attached, sharedL2: { pollIntervalMs: 50, leaseMs: 4000, followReloads: false } });
    const eId = (await leased()).find((id) => !before.has(id))!;
    expect(eId).toBeDefined();
    expect(await leased()).toHaveLength(5);
    const stableKeys = async () => ((await r.cmd('KEYS', 'hps:fv.sparse_embedding0.p*')) as Buffer[]).length;
    for (const salt of [1, 2]) {
      await a.loadModel(entry(salt));
      const seq = a.modelInfo('fv').sharedL2!.seq;
      await until(() => followers.every((s) => s.modelInfo('fv').sharedL2!.seq === seq));
      for (const s of followers) {
        expect(s.modelInfo('fv').sharedL2).toEqual({ seq, suffix: `.v${seq}`, loadedHere: false, error: null });
        expect(wrongRows(await rowsOf(s, 'fv'), expectedRows(ks, dim, all, -1, salt))).toBe(0);
      }
    }
    await sleep(300); // several polls of every server: the stable tables stay, e reads them
    expect(e.modelInfo('fv').sharedL2).toEqual({ seq: 1, suffix: '', loadedHere: false, error: null });
    expect(wrongRows(await rowsOf(e, 'fv'), expectedRows(ks, dim, all, -1, 0))).toBe(0);
    expect(await stableKeys()).toBeGreaterThan(0);
    // e's renewals do not reach Redis: once its lease expires, the others delete the stable tables
    const renew = SharedL2Control.prototype.renew;
    let stalled = true;
    cleanups.push(() => (SharedL2Control.prototype.renew = renew));
    SharedL2Control.prototype.renew = async function (this: SharedL2Control, model?: string) {
      if (stalled && this.id === eId) return;
      return renew.call(this, model);
    };
    await until(async () => (await stableKeys()) === 0);
    expect(await stableKeys()).toBe(0);
    expect(await leased()).toHaveLength(4); // e's expired lease was forgotten
    stalled = false;
    const seq = a.modelInfo('fv').sharedL2!.seq;
    await until(() => e.modelInfo('fv').sharedL2!.error?.endsWith(`switched to the live version ${seq}`) === true);
    expect(e.modelInfo('fv').sharedL2).toEqual({
      seq,
      suffix: `.v${seq}`,
      loadedHere: false,
      error: `this server's lease lapsed (no renewal reached Redis for 4000 ms) while it served version 1 (the stable tables), not the live one, and another server deleted that version; switched to the live version ${seq}`,
    });
    expect(wrongRows(await rowsOf(e, 'fv'), expectedRows(ks, dim, all, -1, 2))).toBe(0);
    expect(await leased()).toHaveLength(5);
    await sleep(300);
    expect(((await r.cmd('HKEYS', 'hps-ctl:{fv}:gens')) as Buffer[]).map(String)).toEqual([`.v${seq}`]);
  }, 90000);

  it('a publish lost (a failover that lost the write): the loading server publishes its version again at a poll, the attached server follows', async () => {
    const r = await redis();
    for (const followReloads of [true, false]) {
      const model = followReloads ? 'pf' : 'pk';
      const entry = entryOf(model);
      const { a, b } = await loaderAndAttached(r.address, entry, followReloads, 50);
      await a.loadModel(entry(1));
      const s1 = a.modelInfo(model).sharedL2!.seq;
      await until(() => b.modelInfo(model).sharedL2!.seq === s1);
      // a's next publish reaches no Redis that lasts: it resolves, and nothing was written
      const publish = SharedL2Control.prototype.publish;
      let lost = 0;
      SharedL2Control.prototype.publish = async function (this: SharedL2Control, ...args: Parameters<SharedL2Control['publish']>) {
        if (lost++ === 0) return true;
        return publish.apply(this, args);
      };
      try {
        await a.loadModel(entry(2));
      } finally {
        SharedL2Control.prototype.publish = publish;
      }
      expect(lost).toBe(1);
      const s2 = a.modelInfo(model).sharedL2!.seq;
      expect(s2).toBeGreaterThan(s1);
      await until(() => b.modelInfo(model).sharedL2!.seq === s2); // was: b kept s1 for good
      expect(b.modelInfo(model).sharedL2).toEqual({ seq: s2, suffix: `.v${s2}`, loadedHere: false, error: null });
      expect(wrongRows(await rowsOf(b, model), expectedRows(ks, dim, all, -1, 2))).toBe(0);
    }
  }, 90000);

  it('polls while a load publishes its version do not publish it again (was: a poll that read `live` before the publication landed took it for lost and published it a second time)', async () => {
    const r = await redis();
    for (const followReloads of [true, false]) {
      const model = followReloads ? 'p2' : 'p3';
      const entry = entryOf(model);
      const { a, b } = await loaderAndAttached(r.address, entry, followReloads, 20);
      const s1 = a.modelInfo(model).sharedL2!.seq;
      // a's publications, counted per seq; the first of the reload's waits 300 ms (15 of a's polls) before it reaches Redis
      const publish = SharedL2Control.prototype.publish;
      const calls = new Map<number, number>();
      SharedL2Control.prototype.publish = async function (this: SharedL2Control, ...args: Parameters<SharedL2Control['publish']>) {
        const seq = args[1].seq;
        calls.set(seq, (calls.get(seq) ?? 0) + 1);
        if (seq > s1 && calls.get(seq) === 1) await sleep(300);
        return publish.apply(this, args);
      };
      try {
        await a.loadModel(entry(1));
        await sleep(300); // 15 more polls
      } finally {
        SharedL2Control.prototype.publish = publish;
      }
      const s2 = a.modelInfo(model).sharedL2!.seq;
      expect(s2).toBeGreaterThan(s1);
      expect(calls.get(s2)).toBe(1); // was 2 (or more)
      expect(a.modelInfo(model).sharedL2).toEqual({ seq: s2, suffix: `.v${s2}`, loadedHere: true, error: null });
      await until(() => b.modelInfo(model).sharedL2!.seq === s2);
      expect(wrongRows(await rowsOf(b, model), expectedRows(ks, dim, all, -1, 1))).toBe(0);
    }
  }, 90000);

  it('Redis killed under running servers: polls fail quietly, close() returns, no unhandled rejection', async () => {
    const r = await redis();
    const volatile = { type: 'redis_cluster', address: r.address, num_partitions: 2 };
    const entry = entryOf('rd');
    const a = await HPS.create({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
    const b = await HPS.create({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 } }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50, leaseMs: 1000 } });
    const rejections: unknown[] = [];
    const on = (e: unknown) => rejections.push(e);
    process.on('unhandledRejection', on);
    cleanups.push(() => process.off('unhandledRejection', on));
    expect(b.modelInfo('rd').sharedL2!.error).toBeNull();
    await r.server.stop();
    await sleep(2000);
    // the failing renewals are visible (the lease will lapse)
    const error = b.modelInfo('rd').sharedL2!.error!;
    const late = /^no renewal of this server's lease in Redis has succeeded for (\d+) ms \(Redis slow or unreachable\): after leaseMs \(1000 ms\) other servers may delete the versions it serves$/.exec(error);
    const failed = /^renewing this server's lease in Redis failed \(.+\): once none succeeds for leaseMs \(1000 ms\)/.test(error);
    expect(failed || (late !== null && Number(late[1]) > 500)).toBe(true);
    await Promise.all([a.close(), b.close()]);
    expect(rejections).toEqual([]);
  }, 90000);
});
