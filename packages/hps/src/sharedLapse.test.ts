// A loading server whose lease lapses while it loads or before it publishes (real redis-server): the version
// another server's collection deleted meanwhile is never served or published. An attached server whose lease
// lapses while it switches: the versions it still uses are registered again, a replaced one is not switched to.
// close() during a load deletes the half-written version. The bookkeeping after lost writes: a uses entry
// without its lease, a load counter that went back, a lost `live`.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { RedisStore } from '@embedstack/store-redis';
import { RocksStore } from '@embedstack/store-rocksdb';
import { startRedisServer } from '@embedstack/store-redis/testing';
import { SharedL2Control } from './sharedL2.js';
import { PartitionedDb } from './volatileDb.js';
import { expectedRows, psConfig, spreadKeys, writeTable } from '../test/fixtures.js';
import { modelRows, serverScope, until } from '../test/servers.js';

const { t, cleanups, serve } = serverScope('hps-lapse-');

const dim = 16;
const ks = spreadKeys(4000);
const all = new Set(ks);
const { rowsOf, wrongRows } = modelRows(ks, dim);

/** A redis-server for the test: `cmd` runs one command (its reply as strings), `volatile` is a volatile_db on it. */
async function redis() {
  const server = await startRedisServer();
  cleanups.push(() => server.stop());
  const client = new RedisStore({ mode: 'standalone', hosts: [{ host: server.host, port: server.port }] });
  cleanups.push(() => client.close());
  const cmd = async (name: string, ...args: string[]) => {
    const [r] = await client.connection.exec([{ route: Buffer.from(args[0]!), name, args }], false);
    if (r!.error) throw r!.error;
    return Array.isArray(r!.value) ? (r!.value as Buffer[]).map(String) : [String(r!.value)];
  };
  return { cmd, volatile: { type: 'redis_cluster', address: `${server.host}:${server.port}`, num_partitions: 2 } };
}
const leasesOf = async (cmd: (name: string, ...args: string[]) => Promise<string[]>, model: string) => await cmd('ZRANGE', `hps-ctl:{${model}}:leases`, '0', '-1');
const gensOf = async (cmd: (name: string, ...args: string[]) => Promise<string[]>, model: string) => (await cmd('HKEYS', `hps-ctl:{${model}}:gens`)).sort();
const liveSeqs = async (cmd: (name: string, ...args: string[]) => Promise<string[]>, model: string) => (await cmd('ZRANGE', `hps-ctl:{${model}}:live`, '0', '-1')).map((v) => (JSON.parse(v) as { seq: number }).seq);

/** Suppresses the renewals of the server with lease `id` while `on()` (a GC or event-loop stall, a partition from Redis). */
function stallRenewals(id: () => string | undefined, on: () => boolean): void {
  const renew = SharedL2Control.prototype.renew;
  cleanups.push(() => (SharedL2Control.prototype.renew = renew));
  SharedL2Control.prototype.renew = async function (this: SharedL2Control, model?: string) {
    if (on() && this.id === id()) return;
    return renew.call(this, model);
  };
}

/**
 * Holds every RocksDB put (an L3 write of a load) while `hold(true)`, until `go` is called; `waiting()`: one is
 * held. The test pushes `go` to its cleanups after the servers it holds (they are closed first otherwise: close()
 * waits for the held switch).
 */
function holdL3(): { hold: (on: boolean) => void; waiting: () => boolean; go: () => void } {
  const put = RocksStore.prototype.put;
  cleanups.push(() => (RocksStore.prototype.put = put));
  let on = false;
  let waiting = false;
  let open = (): void => undefined;
  const gate = new Promise<void>((r) => (open = r));
  RocksStore.prototype.put = async function (this: RocksStore, ...args: Parameters<RocksStore['put']>) {
    if (on) {
      waiting = true;
      await gate;
    }
    return put.apply(this, args);
  } as RocksStore['put'];
  return { hold: (v) => (on = v), waiting: () => waiting, go: () => ((on = false), open()) };
}

/**
 * A redis-server and a loading server `a` of `model` (lease `aId`) that has published its reload `.v2`;
 * `attached(global, sharedL2)`: the ps config of an attached server of the model (`global`: over its volatile_db and persistent_db).
 */
async function loaderAtV2(model: string) {
  const { cmd, volatile } = await redis();
  const entry = entryOf(model);
  const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 } });
  await a.loadModel(entry(1));
  const [aId] = await leasesOf(cmd, model);
  const attached = (volatileDb: Record<string, unknown>, global: Record<string, unknown> = {}) => ({
    ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0, ...volatileDb }, ...global }),
    models: [entry(0)],
  });
  return { cmd, entry, a, aId: aId!, attached };
}

const entryOf = (model: string) => (salt: number) => (psConfig([writeTable(join(t.dir, `${model}-${salt}`), ks, dim, { salt })], [dim], { model, gpucache: false, max_batch_size: 4096 }).models as Record<string, unknown>[])[0]!;

describe('shared L2: a lapse during a load, close() during a load', () => {
  it('a loading server whose lease lapses mid-load (its half-written version collected by another server) discards it: nothing serves or publishes it, what is left is deleted', async () => {
    const { cmd, volatile } = await redis();
    const entry = entryOf('ll');
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50, leaseMs: 1000 }, loadBatchSize: 500 });
    const [aId] = await cmd('ZRANGE', 'hps-ctl:{ll}:leases', '0', '-1');
    // b collects (its own lease long: a loaded machine must not make it lapse too)
    const b = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 } }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50, leaseMs: 5000 } });
    const want0 = expectedRows(ks, dim, all, -1, 0);
    expect(wrongRows(await rowsOf(b, 'll'), want0)).toBe(0);
    // a's reload stops writing L2 after 1000 rows (its event loop runs on) until `go`
    const insert = PartitionedDb.prototype.insert;
    cleanups.push(() => (PartitionedDb.prototype.insert = insert));
    let written = 0;
    let paused = false;
    let go = (): void => undefined;
    const resume = new Promise<void>((r) => (go = r));
    PartitionedDb.prototype.insert = async function (this: PartitionedDb, name, k, v) {
      if (name.endsWith('.v2') || name.includes('.v2.')) {
        if (written >= 1000 && !paused) {
          paused = true;
          await resume;
        }
        written += k.length;
      }
      return insert.call(this, name, k, v);
    };
    // a's renewals do not reach Redis while `stalled` (a GC or event-loop stall, a partition)
    const renew = SharedL2Control.prototype.renew;
    cleanups.push(() => (SharedL2Control.prototype.renew = renew));
    let stalled = false;
    SharedL2Control.prototype.renew = async function (this: SharedL2Control, model?: string) {
      if (stalled && this.id === aId) return;
      return renew.call(this, model);
    };
    const load = a.loadModel(entry(1)).then(
      () => 'loaded',
      (e: Error & { code?: string }) => `${e.code}: ${e.message}`,
    );
    await until(() => paused);
    expect(await cmd('HKEYS', 'hps-ctl:{ll}:gens')).toEqual(['', '.v2']);
    stalled = true;
    await until(async () => !(await cmd('HKEYS', 'hps-ctl:{ll}:gens')).includes('.v2')); // b's collection deleted a's .v2
    expect(await cmd('HKEYS', 'hps-ctl:{ll}:gens')).toEqual(['']);
    stalled = false;
    go();
    // was 'loaded': a then served and published .v2 with 1000 of 4000 rows missing (the default value
    // on a and on b, which followed), and .v2's keys stayed in Redis after the next reload (unregistered)
    expect(await load).toBe(
      `STORE_UNAVAILABLE: Model "ll": version 2 (.v2) was discarded, not served or published: this server's lease lapsed while it loaded ` +
        `(no renewal reached Redis for 1000 ms): other servers may have deleted part of it; load the model again`,
    );
    expect(a.modelInfo('ll').sharedL2).toMatchObject({ seq: 1, suffix: '' });
    expect(wrongRows(await rowsOf(a, 'll'), want0)).toBe(0);
    expect(wrongRows(await rowsOf(b, 'll'), want0)).toBe(0);
    // what the load wrote after the collection is deleted
    await until(async () => (await cmd('KEYS', '*ll.*.v2*')).length === 0);
    expect(await cmd('KEYS', '*ll.*.v2*')).toEqual([]);
    expect(await cmd('HKEYS', 'hps-ctl:{ll}:gens')).toEqual(['']);
    // loaded again, it is served and followed whole
    await a.loadModel(entry(1));
    const seq = a.modelInfo('ll').sharedL2!.seq;
    await until(() => b.modelInfo('ll').sharedL2!.seq === seq);
    expect(b.modelInfo('ll').sharedL2).toEqual({ seq, suffix: `.v${seq}`, loadedHere: false, error: null });
    const want1 = expectedRows(ks, dim, all, -1, 1);
    expect(wrongRows(await rowsOf(a, 'll'), want1)).toBe(0);
    expect(wrongRows(await rowsOf(b, 'll'), want1)).toBe(0);
  }, 90000);
  it('a version whose publication failed is not published after its lease lapsed (another server may have deleted it): its server switches to the live version', async () => {
    const { cmd, volatile } = await redis();
    const entry = entryOf('lp');
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50, leaseMs: 1000 } });
    const [aId] = await cmd('ZRANGE', 'hps-ctl:{lp}:leases', '0', '-1');
    const b = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 } }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50, leaseMs: 5000 } });
    await a.loadModel(entry(1)); // .v2, published
    await until(() => b.modelInfo('lp').sharedL2!.seq === 2);
    // a's next publication fails, then its renewals do not reach Redis (a partition from Redis)
    const publish = SharedL2Control.prototype.publish;
    cleanups.push(() => (SharedL2Control.prototype.publish = publish));
    let failPublish = true;
    SharedL2Control.prototype.publish = async function (this: SharedL2Control, ...args: Parameters<SharedL2Control['publish']>) {
      if (failPublish && this.id === aId) throw new Error('Redis unreachable (test)');
      return publish.apply(this, args);
    };
    const renew = SharedL2Control.prototype.renew;
    cleanups.push(() => (SharedL2Control.prototype.renew = renew));
    let stalled = false;
    SharedL2Control.prototype.renew = async function (this: SharedL2Control, model?: string) {
      if (stalled && this.id === aId) return;
      return renew.call(this, model);
    };
    await a.loadModel(entry(2)); // .v3: served by a, its publication retried at a's polls
    expect(a.modelInfo('lp').sharedL2).toMatchObject({ seq: 3, suffix: '.v3', error: 'could not publish version 3: Redis unreachable (test)' });
    stalled = true;
    await until(async () => !(await cmd('HKEYS', 'hps-ctl:{lp}:gens')).includes('.v3')); // b's collection deleted .v3
    expect(await cmd('HKEYS', 'hps-ctl:{lp}:gens')).toEqual(['.v2']);
    stalled = false;
    failPublish = false;
    await until(() => a.modelInfo('lp').sharedL2!.seq === 2);
    // was: a published .v3 at its next poll (b followed it: every row the default value) and kept serving it
    expect(a.modelInfo('lp').sharedL2!.seq).toBe(2);
    expect(((await cmd('ZRANGE', 'hps-ctl:{lp}:live', '0', '-1')) as string[]).map((v) => (JSON.parse(v) as { seq: number }).seq)).toEqual([2]);
    const want1 = expectedRows(ks, dim, all, -1, 1);
    expect(wrongRows(await rowsOf(a, 'lp'), want1)).toBe(0);
    expect(b.modelInfo('lp').sharedL2).toEqual({ seq: 2, suffix: '.v2', loadedHere: false, error: null });
    expect(wrongRows(await rowsOf(b, 'lp'), want1)).toBe(0);
    await until(async () => (await cmd('KEYS', '*lp.*.v3*')).length === 0);
    expect(await cmd('KEYS', '*lp.*.v3*')).toEqual([]);
  }, 90000);
  it('close() while a reload loads deletes the half-written version (no other server uses it)', async () => {
    const { cmd, volatile } = await redis();
    const entry = entryOf('lc');
    const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50 }, loadBatchSize: 500 });
    // the reload's L2 writes stop after 1000 rows (until the end of the test)
    const insert = PartitionedDb.prototype.insert;
    cleanups.push(() => (PartitionedDb.prototype.insert = insert));
    let written = 0;
    let paused = false;
    let go = (): void => undefined;
    const resume = new Promise<void>((r) => (go = r));
    cleanups.push(() => go());
    PartitionedDb.prototype.insert = async function (this: PartitionedDb, name, k, v) {
      if (name.includes('.v2')) {
        if (written >= 1000) {
          paused = true;
          await resume;
        }
        written += k.length;
      }
      return insert.call(this, name, k, v);
    };
    void a.loadModel(entry(1)).catch(() => undefined);
    await until(() => paused);
    expect(await cmd('HKEYS', 'hps-ctl:{lc}:gens')).toEqual(['', '.v2']);
    expect((await cmd('KEYS', '*lc.*.v2*')).length).toBeGreaterThan(0);
    await a.close();
    // was: gens ['', '.v2'] and .v2's keys left (close() collected while its own lease still named .v2)
    expect(await cmd('HKEYS', 'hps-ctl:{lc}:gens')).toEqual(['']);
    expect(await cmd('KEYS', '*lc.*.v2*')).toEqual([]);
    expect(await cmd('ZRANGE', 'hps-ctl:{lc}:leases', '0', '-1')).toEqual([]);
    expect(await cmd('HKEYS', 'hps-ctl:{lc}:uses')).toEqual([]);
  }, 90000);
  it('a lease removed without its uses entry (the HDEL of a removal lost: a connection or a failover between the two) does not keep its versions forever', async () => {
    const { cmd, volatile } = await redis();
    const [host, port] = volatile.address.split(':') as [string, string];
    const ctl = () => {
      const store = new RedisStore({ mode: 'standalone', hosts: [{ host, port: Number(port) }] });
      cleanups.push(() => store.close());
      return new SharedL2Control(store, 60_000);
    };
    const [a, b] = [ctl(), ctl()];
    const tables = [{ name: 'sparse_embedding0', dim }];
    a.use('lu', '.v1', tables);
    await a.renew('lu');
    await a.register('lu', '.v1', tables);
    b.use('lu', '.v2', tables);
    await b.renew('lu');
    await b.register('lu', '.v2', tables);
    expect(await b.publish('lu', { seq: 2, suffix: '.v2', tables: [{ ...tables[0]!, rows: 1 }], files: [] })).toBe(true);
    expect(await b.collect('lu', async () => undefined)).toEqual([]); // a's lease names .v1
    await cmd('ZREM', 'hps-ctl:{lu}:leases', a.id); // a left; its uses entry stayed
    // was []: the uses entry without a lease kept .v1 for good
    expect(await b.collect('lu', async () => undefined)).toEqual(['.v1']);
    expect(await cmd('HKEYS', 'hps-ctl:{lu}:gens')).toEqual(['.v2']);
    expect(await cmd('HKEYS', 'hps-ctl:{lu}:uses')).toEqual([b.id]); // a's entry forgotten
  }, 60000);
  it('a counter that went back (its key lost) never hands out the number of a version being loaded (registered, not published)', async () => {
    const { cmd, volatile } = await redis();
    const [host, port] = volatile.address.split(':') as [string, string];
    const store = new RedisStore({ mode: 'standalone', hosts: [{ host, port: Number(port) }] });
    cleanups.push(() => store.close());
    const ctl = new SharedL2Control(store, 60_000);
    const tables = [{ name: 'sparse_embedding0', dim }];
    for (let i = 0; i < 7; i++) await ctl.nextSeq('ls', 0);
    ctl.use('ls', '.v6', tables);
    await ctl.renew('ls');
    await ctl.register('ls', '.v6', tables);
    expect(await ctl.publish('ls', { seq: 6, suffix: '.v6', tables: [{ ...tables[0]!, rows: 1 }], files: [] })).toBe(true);
    await ctl.register('ls', '.v7', tables); // a server loads .v7
    await cmd('DEL', 'hps-ctl:{ls}:seq');
    // a load elsewhere, with the floor server.ts gives it (the live seq): was 7, the name of the load running
    expect(await ctl.nextSeq('ls', 6)).toBe(8);
    expect(await ctl.nextSeq('ls', 6)).toBe(9);
  }, 60000);
  it('a stall longer than leaseMs between the last renewal of a load and its publication: the publication is refused (the script checks the lease and its lapses), the version discarded', async () => {
    // renewedFirst: a renewal of the same server wrote the lease again just before the publication
    // reached Redis (its reply, which tells of the lapse, not read yet)
    for (const renewedFirst of [false, true]) {
      const model = renewedFirst ? 'ly' : 'lx';
      const { cmd, volatile } = await redis();
      const entry = entryOf(model);
      const a = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: volatile }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50, leaseMs: 3000 } });
      const [aId] = await leasesOf(cmd, model);
      const b = await serve({ psConfig: { ...psConfig([], [dim], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 } }), models: [entry(0)] }, sharedL2: { pollIntervalMs: 50, leaseMs: 10000 } });
      const want0 = expectedRows(ks, dim, all, -1, 0);
      // a's publication of .v2 reaches Redis only once b's collection deleted .v2; a's renewals do not
      // meanwhile (its event loop runs on: a stall of its connection, a partition)
      let stalled = false;
      stallRenewals(() => aId, () => stalled);
      // (a's polls meanwhile took .v2, served and not live, for a lost publication and published it again: a
      // second publication, should one come, reaches no Redis)
      const publish = SharedL2Control.prototype.publish;
      cleanups.push(() => (SharedL2Control.prototype.publish = publish));
      let holding = false;
      SharedL2Control.prototype.publish = async function (this: SharedL2Control, ...args: Parameters<SharedL2Control['publish']>) {
        if (this.id !== aId || args[1].seq !== 2) return publish.apply(this, args);
        if (holding) return true;
        holding = true;
        stalled = true;
        await until(async () => !(await gensOf(cmd, model)).includes('.v2'));
        stalled = !renewedFirst;
        if (renewedFirst) await until(async () => (await leasesOf(cmd, model)).includes(aId!));
        const r = await publish.apply(this, args);
        stalled = false;
        return r;
      };
      const load = a.loadModel(entry(1)).then(
        () => 'loaded',
        (e: Error & { code?: string }) => `${e.code}: ${e.message}`,
      );
      // was 'loaded': .v2 published though deleted (b followed it: every row the default value)
      expect(await load).toBe(
        `STORE_UNAVAILABLE: Model "${model}": version 2 (.v2) was discarded, not served or published: this server's lease lapsed before the version was published ` +
          `(no renewal reached Redis for 3000 ms); load the model again`,
      );
      expect(await liveSeqs(cmd, model)).toEqual([1]);
      await until(() => a.modelInfo(model).sharedL2!.seq === 1);
      expect(a.modelInfo(model).sharedL2).toMatchObject({ seq: 1, suffix: '' });
      expect(wrongRows(await rowsOf(a, model), want0)).toBe(0);
      expect(b.modelInfo(model).sharedL2).toEqual({ seq: 1, suffix: '', loadedHere: false, error: null });
      expect(wrongRows(await rowsOf(b, model), want0)).toBe(0);
      await until(async () => (await cmd('KEYS', `*${model}.*.v2*`)).length === 0 && (await gensOf(cmd, model)).length === 1);
      expect(await cmd('KEYS', `*${model}.*.v2*`)).toEqual([]);
      expect(await gensOf(cmd, model)).toEqual(['']);
      SharedL2Control.prototype.publish = publish;
    }
  }, 120000);

  it('a lapse found while a switch of the model runs (a follower streaming the next version into its L3): the version it still serves, deleted meanwhile, is registered again, and what its lookups wrote into it is deleted', async () => {
    const { cmd, entry, a, aId, attached } = await loaderAtV2('lw');
    const l3 = holdL3();
    // b writes what it reads from its L3 back into L2
    const b = await serve({
      psConfig: attached({ cache_missed_embeddings: true }, { persistent_db: { type: 'rocks_db', path: join(t.dir, 'lw-rocks') } }),
      sharedL2: { pollIntervalMs: 50, leaseMs: 2000 },
      loadBatchSize: 500,
    });
    cleanups.push(() => l3.go());
    const bId = (await leasesOf(cmd, 'lw')).find((id) => id !== aId);
    expect(bId).toBeDefined();
    expect(b.modelInfo('lw').sharedL2).toMatchObject({ seq: 2, suffix: '.v2' });
    const keysOf = async (suffix: string) => (await cmd('KEYS', `*lw.*${suffix}*`)).length;
    // a publishes .v3; b's follow streams it into its L3 and is held there
    l3.hold(true);
    await a.loadModel(entry(2));
    await until(() => l3.waiting());
    expect(l3.waiting()).toBe(true);
    // b's renewals do not reach Redis: once its lease expired, a's collection deletes .v2 (b still serves it)
    let stalled = true;
    stallRenewals(() => bId, () => stalled);
    await until(async () => (await keysOf('.v2')) === 0 && !(await gensOf(cmd, 'lw')).includes('.v2'));
    expect(await gensOf(cmd, 'lw')).toEqual(['.v3']);
    // b's lookups miss in L2; its L3 answers with .v2's rows and writes them back into the deleted .v2
    expect(wrongRows(await rowsOf(b, 'lw'), expectedRows(ks, dim, all, -1, 1))).toBe(0);
    expect(await keysOf('.v2')).toBeGreaterThan(0);
    stalled = false;
    // b's next renewal finds its lease gone while the follow runs: .v2 is registered again (was: the lapse
    // was dropped, .v2 stayed unregistered and its keys in Redis for good)
    await until(async () => (await gensOf(cmd, 'lw')).includes('.v2'));
    expect(await gensOf(cmd, 'lw')).toEqual(['.v2', '.v3']);
    l3.go();
    await until(() => b.modelInfo('lw').sharedL2!.seq === 3);
    expect(b.modelInfo('lw').sharedL2).toMatchObject({ seq: 3, suffix: '.v3', loadedHere: false });
    expect(wrongRows(await rowsOf(b, 'lw'), expectedRows(ks, dim, all, -1, 2))).toBe(0);
    await until(async () => (await keysOf('.v2')) === 0 && (await gensOf(cmd, 'lw')).length === 1);
    expect(await keysOf('.v2')).toBe(0);
    expect(await gensOf(cmd, 'lw')).toEqual(['.v3']);
  }, 90000);

  it('an attached server whose lease lapses while it prepares a published version that is then replaced and deleted does not switch to it: it takes the live one (followReloads false, at start)', async () => {
    const { cmd, entry, a, aId, attached } = await loaderAtV2('la');
    const l3 = holdL3();
    l3.hold(true);
    // b starts: it leases .v2 and streams it into its L3 (held)
    let bId: string | undefined = undefined; // known once b has leased
    let stalled = false;
    stallRenewals(() => bId, () => stalled);
    const started = serve({
      psConfig: attached({}, { persistent_db: { type: 'rocks_db', path: join(t.dir, 'la-rocks') } }),
      sharedL2: { pollIntervalMs: 50, leaseMs: 2000, followReloads: false },
      loadBatchSize: 500,
    });
    cleanups.push(() => l3.go());
    void started.catch(() => undefined);
    await until(() => l3.waiting());
    expect(l3.waiting()).toBe(true);
    bId = (await leasesOf(cmd, 'la')).find((id) => id !== aId);
    expect(bId).toBeDefined();
    // b's renewals do not reach Redis; a publishes .v3 and (b's lease expired) deletes .v2
    stalled = true;
    await a.loadModel(entry(2));
    await until(async () => !(await gensOf(cmd, 'la')).includes('.v2'));
    expect(await gensOf(cmd, 'la')).toEqual(['.v3']);
    stalled = false;
    await until(async () => (await leasesOf(cmd, 'la')).includes(bId!)); // b renewed: it found the lapse while loading
    l3.go();
    const b = await started;
    // was: b served .v2 (deleted) for good (followReloads false; the lapse found during its startup load was dropped)
    expect(b.modelInfo('la').sharedL2).toEqual({ seq: 3, suffix: '.v3', loadedHere: false, error: null });
    expect(wrongRows(await rowsOf(b, 'la'), expectedRows(ks, dim, all, -1, 2))).toBe(0);
    await until(async () => (await cmd('KEYS', '*la.*.v2*')).length === 0 && (await gensOf(cmd, 'la')).length === 1);
    expect(await cmd('KEYS', '*la.*.v2*')).toEqual([]);
    expect(await gensOf(cmd, 'la')).toEqual(['.v3']);
  }, 90000);

  it('a server attaching while `live` is lost (evicted, a failover) serves the stable tables until a version is published again, then takes it (followReloads false too)', async () => {
    const { cmd, aId, attached } = await loaderAtV2('le'); // the stable tables are deleted once .v2 is live
    await until(async () => (await gensOf(cmd, 'le')).length === 1);
    expect(await gensOf(cmd, 'le')).toEqual(['.v2']);
    // `live` lost; a's publications reach no Redis that lasts until `lost` is cleared
    let lost = true;
    const publish = SharedL2Control.prototype.publish;
    cleanups.push(() => (SharedL2Control.prototype.publish = publish));
    SharedL2Control.prototype.publish = async function (this: SharedL2Control, ...args: Parameters<SharedL2Control['publish']>) {
      if (lost && this.id === aId) return true;
      return publish.apply(this, args);
    };
    await cmd('DEL', 'hps-ctl:{le}:live');
    const b = await serve({ psConfig: attached({}), sharedL2: { pollIntervalMs: 50, followReloads: false } });
    // nothing published: b serves the stable tables (deleted: every row the default value)
    expect(b.modelInfo('le').sharedL2).toEqual({ seq: 0, suffix: '', loadedHere: false, error: null });
    lost = false; // a's next poll publishes .v2 again
    await until(() => b.modelInfo('le').sharedL2!.seq === 2);
    // was: b kept the stable tables for good (followReloads false)
    expect(b.modelInfo('le').sharedL2).toEqual({ seq: 2, suffix: '.v2', loadedHere: false, error: null });
    expect(wrongRows(await rowsOf(b, 'le'), expectedRows(ks, dim, all, -1, 1))).toBe(0);
  }, 90000);
});
