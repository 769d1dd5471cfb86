// A loading server whose lease lapses while it loads (real redis-server): the version another server's
// collection deleted meanwhile is never served or published. close() during a load deletes the half-written version.
// The bookkeeping after lost writes: a uses entry without its lease, a load counter that went back.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { RedisStore } from '@embedstack/store-redis';
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
    a.use('lu', '.v1');
    await a.renew('lu');
    await a.register('lu', '.v1', tables);
    await b.register('lu', '.v2', tables);
    await b.publish('lu', { seq: 2, suffix: '.v2', tables: [{ ...tables[0]!, rows: 1 }], files: [] });
    expect(await b.collect('lu', async () => undefined)).toEqual([]); // a's lease names .v1
    await cmd('ZREM', 'hps-ctl:{lu}:leases', a.id); // a left; its uses entry stayed
    // was []: the uses entry without a lease kept .v1 for good
    expect(await b.collect('lu', async () => undefined)).toEqual(['.v1']);
    expect(await cmd('HKEYS', 'hps-ctl:{lu}:gens')).toEqual(['.v2']);
    expect(await cmd('HKEYS', 'hps-ctl:{lu}:uses')).toEqual([]);
  }, 60000);
  it('a counter that went back (its key lost) never hands out the number of a version being loaded (registered, not published)', async () => {
    const { cmd, volatile } = await redis();
    const [host, port] = volatile.address.split(':') as [string, string];
    const store = new RedisStore({ mode: 'standalone', hosts: [{ host, port: Number(port) }] });
    cleanups.push(() => store.close());
    const ctl = new SharedL2Control(store, 60_000);
    const tables = [{ name: 'sparse_embedding0', dim }];
    for (let i = 0; i < 7; i++) await ctl.nextSeq('ls', 0);
    await ctl.register('ls', '.v6', tables);
    await ctl.publish('ls', { seq: 6, suffix: '.v6', tables: [{ ...tables[0]!, rows: 1 }], files: [] });
    await ctl.register('ls', '.v7', tables); // a server loads .v7
    await cmd('DEL', 'hps-ctl:{ls}:seq');
    // a load elsewhere, with the floor server.ts gives it (the live seq): was 7, the name of the load running
    expect(await ctl.nextSeq('ls', 6)).toBe(8);
    expect(await ctl.nextSeq('ls', 6)).toBe(9);
  }, 60000);
});
