import { afterEach, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HPS } from './index.js';
import { expectedRows, psConfig, rowOf, spreadKeys, tempDir, writeTable, zipf } from '../test/fixtures.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function temp(): string {
  const t = tempDir();
  cleanups.push(t.cleanup);
  return t.dir;
}

async function serve(config: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<HPS> {
  const s = await HPS.create({ psConfig: config, ...extra });
  cleanups.push(() => s.close());
  return s;
}

const ROWS = 1000;
const keysAll = spreadKeys(ROWS);
const present = new Set(keysAll);

function twoTables(dir: string): string[] {
  return [writeTable(join(dir, 't0'), keysAll, 8), writeTable(join(dir, 't1'), keysAll.slice(0, 300), 4, { salt: 1 })];
}

describe('HPS lookups', () => {
  it('returns exact rows for every key and the default for unknown keys; streams files in chunks with progress', async () => {
    const dir = temp();
    const progress: number[] = [];
    const s = await serve(psConfig(twoTables(dir), [8, 4]), { loadBatchSize: 128, onProgress: (p: { tableId: number; rowsLoaded: number }) => p.tableId === 0 && progress.push(p.rowsLoaded) });
    expect(progress).toEqual([128, 256, 384, 512, 640, 768, 896, 1000]);
    const ask = [...keysAll.slice(0, 200), 123456789n, -5n, keysAll[7]!];
    const got = await s.lookup(ask, 'm', 0, { deviceId: 0 });
    expect(got.shape).toEqual([ask.length, 8]);
    expect(Array.from(got.data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
    const t1 = keysAll.slice(250, 350);
    const got1 = await s.lookup(t1, 'm', 1);
    expect(Array.from(got1.data as Float32Array)).toEqual(t1.flatMap((k, i) => (i < 50 ? rowOf(k, 4, 1) : [-2, -2, -2, -2])));
  });

  it('a 10% L1 with synchronous fill stays exact under repeated Zipf lookups while its hit rate rises', async () => {
    const dir = temp();
    const s = await serve(psConfig(twoTables(dir), [8, 4], { gpucacheper: 0.1, hit_rate_threshold: 1.1 }));
    const rates: number[] = [];
    let prev = { hits: 0, misses: 0 };
    for (let round = 0; round < 6; round++) {
      const ranks = zipf(ROWS, 1.2, 512, round + 1);
      const ask = ranks.map((r) => keysAll[r]!);
      const got = await s.lookup(ask, 'm', 0);
      expect(Array.from(got.data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
      const st = s.stats('m', 0).l1;
      rates.push((st.hits - prev.hits) / (st.hits + st.misses - prev.hits - prev.misses));
      prev = st;
    }
    expect(rates[0]).toBeLessThan(rates[5]!);
    expect(rates[5]).toBeGreaterThan(0.5);
    const st = s.stats('m', 0);
    expect(st.l1.hits + st.l1.misses).toBe(6 * 512);
    expect(st.l2.hits).toBeGreaterThan(0);
    expect(st.latencyMs.p99).toBeGreaterThanOrEqual(st.latencyMs.p50);
  });

  it('splits large lookups into chunks and stays exact (L1 on and off)', async () => {
    const dir = temp();
    for (const gpucache of [true, false]) {
      const s = await serve(psConfig(twoTables(dir), [8, 4], { gpucache, gpucacheper: 0.1, hit_rate_threshold: 2, max_batch_size: 4096 }));
      // 40000 keys of dim 8: two chunks of 32768 and the rest, unknown keys included
      const ask = zipf(ROWS + 50, 1.1, 40000, gpucache ? 3 : 4).map((r) => (r < ROWS ? keysAll[r]! : BigInt(r) * 1_000_000_007n));
      for (let round = 0; round < 2; round++) {
        expect(Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
      }
    }
  });

  it('the background path returns the default or the exact row, then becomes exact', async () => {
    const dir = temp();
    const s = await serve(psConfig(twoTables(dir), [8, 4], { hit_rate_threshold: 0 }));
    const ask = keysAll.slice(0, 64);
    const exact = expectedRows(ask, 8, present, -1);
    const first = Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array);
    for (let i = 0; i < ask.length; i++) {
      const row = first.slice(i * 8, i * 8 + 8);
      const isExact = JSON.stringify(row) === JSON.stringify(exact.slice(i * 8, i * 8 + 8));
      expect(isExact || row.every((v) => v === -1), `row ${i}: ${row.join(',')}`).toBe(true);
    }
    let got: number[] = [];
    // up to ~30 s of polls: a loaded CI machine can delay the background fill by seconds
    for (let i = 0; i < 3000; i++) {
      got = Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array);
      if (JSON.stringify(got) === JSON.stringify(exact)) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(got).toEqual(exact);
  });

  it("decides between synchronous and background fill on HugeCTR's hit rate over unique keys", async () => {
    const dir = temp();
    const s = await serve(psConfig(twoTables(dir), [8, 4], { hit_rate_threshold: 0.5 }));
    const [a, b, c, d] = keysAll;
    await s.lookup([a!, a!], 'm', 0); // unique hit rate 0 < 0.5: a is fetched and cached now
    // 9 hits of 11 occurrences (0.82) but 1 of 3 unique keys (0.33 < 0.5): b and c are fetched now
    const ask = [...Array(9).fill(a!), b!, c!];
    expect(Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
    // 2 of 3 unique keys cached (0.67 >= 0.5): d gets the default now
    const got = Array.from((await s.lookup([a!, b!, d!], 'm', 0)).data as Float32Array);
    expect(got).toEqual([...rowOf(a!, 8), ...rowOf(b!, 8), ...Array(8).fill(-1)]);
  });

  it('a tiny L2 with eviction over RocksDB still returns every key exactly', async () => {
    const dir = temp();
    for (const policy of ['evict_random', 'evict_least_used', 'evict_oldest']) {
      const s2 = await serve(
        psConfig([writeTable(join(dir, `u-${policy}`), keysAll, 8)], [8], { gpucacheper: 0.05, hit_rate_threshold: 2 }, {
          volatile_db: { type: 'hash_map', num_partitions: 3, overflow_margin: 40, overflow_policy: policy, overflow_resolution_target: 0.5, cache_missed_embeddings: true },
          persistent_db: { type: 'rocks_db', path: join(dir, `rocks-${policy}`) },
        }),
      );
      for (let round = 0; round < 3; round++) {
        const ask = zipf(ROWS, 1.05, 300, round + 7).map((r) => keysAll[r]!);
        ask.push(99999999999n);
        expect(Array.from((await s2.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
      }
      const st = s2.stats('m', 0);
      expect(st.l3.hits).toBeGreaterThan(0);
      expect(st.l3.misses).toBeGreaterThan(0); // the unknown key
    }
  });

  it('serves from RocksDB alone (L2 disabled) and from a read-only RocksDB of a previous server', async () => {
    const dir = temp();
    const folders = twoTables(dir);
    const rocks = { type: 'rocks_db', path: join(dir, 'rocks') };
    const s = await serve(psConfig(folders, [8, 4], { gpucache: false }, { volatile_db: { type: 'disabled' }, persistent_db: rocks }));
    const ask = [...keysAll.slice(500, 700), 42424242n];
    expect(Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
    expect(s.stats('m', 0).l3).toEqual({ hits: 200, misses: 1, hitRate: 200 / 201 });
    await s.close();
    const ro = await serve(psConfig(folders, [8, 4], { gpucache: false }, { volatile_db: { type: 'none' }, persistent_db: { ...rocks, read_only: true } }));
    expect(Array.from((await ro.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
    await ro.close();
    // initialize_after_startup false (HugeCTR's): the files are not written to that level at start. Other files (salt 5)
    // leave RocksDB as it was, and an L2 that is not initialized starts empty: every row comes from RocksDB
    const other = [writeTable(join(dir, 'o0'), keysAll, 8, { salt: 5 }), writeTable(join(dir, 'o1'), keysAll.slice(0, 300), 4, { salt: 5 })];
    const keep = await serve(psConfig(other, [8, 4], { gpucache: false }, { volatile_db: { type: 'hash_map', initialize_after_startup: false }, persistent_db: { ...rocks, initialize_after_startup: false } }));
    expect(Array.from((await keep.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
    expect(keep.stats('m', 0).l2).toEqual({ hits: 0, misses: 201, hitRate: 0 });
    expect(keep.stats('m', 0).l3).toEqual({ hits: 200, misses: 1, hitRate: 200 / 201 });
  });

  it('answers 200 concurrent lookups exactly', async () => {
    const dir = temp();
    const s = await serve(psConfig(twoTables(dir), [8, 4], { gpucacheper: 0.2, hit_rate_threshold: 1.5 }, { persistent_db: { type: 'rocks_db', path: join(dir, 'r') } }));
    const asks = Array.from({ length: 200 }, (_, j) => zipf(ROWS, 1.2, 64, j + 100).map((r) => keysAll[r]!));
    const got = await Promise.all(asks.map((a) => s.lookup(a, 'm', 0)));
    got.forEach((g, j) => expect(Array.from(g.data as Float32Array)).toEqual(expectedRows(asks[j]!, 8, present, -1)));
  });

  it('a static cache holds the whole table; uint32 keys with supportlonglong false; several devices', async () => {
    const dir = temp();
    const keys = Array.from({ length: 300 }, (_, i) => BigInt(i * 7919 + 3));
    const cfg = psConfig([writeTable(join(dir, 't'), keys, 4, { uint32: true })], [4], { embedding_cache_type: 'static', deployed_device_list: [0, 1] });
    cfg.supportlonglong = false;
    const s = await serve(cfg);
    const ask = [...keys.slice(0, 50), 5n];
    for (const deviceId of [0, 1]) {
      expect(Array.from((await s.lookup(ask, 'm', 0, { deviceId })).data as Float32Array)).toEqual(expectedRows(ask, 4, new Set(keys), -1));
    }
    expect(s.stats('m', 0).l1).toEqual({ hits: 100, misses: 2, hitRate: 100 / 102 });
    await expect(s.lookup([-1n], 'm', 0)).rejects.toMatchObject({ code: 'OUT_OF_RANGE' });
    await expect(s.lookup([1n], 'm', 0, { deviceId: 2 })).rejects.toMatchObject({ code: 'OUT_OF_RANGE' });
  });

  it("uvm: the whole table is served from L1 (as HugeCTR's UVM table), whatever gpucacheper; modelInfo shows its device/host split", async () => {
    const dir = temp();
    const s = await serve(psConfig(twoTables(dir), [8, 4], { embedding_cache_type: 'uvm', gpucacheper: 0.1, hit_rate_threshold: 0.5 }));
    const ask = [...keysAll.slice(100, 400), 777777777n];
    expect(Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
    // every loaded key was an L1 hit on its first lookup: no fill, no L2/L3 reads for them
    expect(s.stats('m', 0).l1).toEqual({ hits: 300, misses: 1, hitRate: 300 / 301 });
    expect(s.stats('m', 0).l2.hits).toBe(0);
    expect(s.modelInfo('m').tables.map((t) => t.cache)).toEqual([
      { type: 'uvm', rows: 1000, deviceRows: 100, hostRows: 900 },
      { type: 'uvm', rows: 300, deviceRows: 30, hostRows: 270 },
    ]);
    const dyn = await serve(psConfig(twoTables(temp()), [8, 4], { gpucacheper: 0.1 }));
    expect(dyn.modelInfo('m').tables.map((t) => t.cache)).toEqual([
      { type: 'dynamic', rows: 128 }, // 100 rows rounded up to whole sets of 64
      { type: 'dynamic', rows: 30 }, // fewer rows than 64: one set of 30
    ]);
  });

  it('refreshEmbeddingCache re-reads cached keys; a new model version takes over atomically; unloadModel', async () => {
    const dir = temp();
    const s = await serve(psConfig([writeTable(join(dir, 'v1'), keysAll, 8)], [8], { hit_rate_threshold: 2 }));
    const ask = keysAll.slice(0, 100);
    await s.lookup(ask, 'm', 0);
    await s.refreshEmbeddingCache('m');
    expect(Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
    const inflight = Array.from({ length: 20 }, () => s.lookup(ask, 'm', 0));
    const v2 = psConfig([writeTable(join(dir, 'v2'), keysAll, 8, { salt: 5 })], [8], { hit_rate_threshold: 2 }).models as Record<string, unknown>[];
    const reload = s.loadModel(v2[0]!);
    const during = Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array);
    expect([JSON.stringify(expectedRows(ask, 8, present, -1)), JSON.stringify(expectedRows(ask, 8, present, -1, 5))]).toContain(JSON.stringify(during));
    for (const r of await Promise.all(inflight)) expect(Array.from(r.data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1));
    await reload;
    expect(Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1, 5));
    expect(s.modelInfo('m').version).toBe(2);
    await s.unloadModel('m');
    await expect(s.lookup(ask, 'm', 0)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('stats() is cumulative since the server was created: a reload, an unload and a load again keep counting', async () => {
    const dir = temp();
    const entry = (psConfig([writeTable(join(dir, 'v1'), keysAll, 8)], [8]).models as Record<string, unknown>[])[0]!;
    const s = await serve({ supportlonglong: true, models: [entry] });
    // every key occurrence of a lookup is one L1 hit or miss (README: stats count per key occurrence)
    const l1Count = (): number => s.stats('m', 0).l1.hits + s.stats('m', 0).l1.misses;
    await s.lookup(keysAll.slice(0, 30), 'm', 0);
    await s.lookup(keysAll.slice(0, 30), 'm', 0);
    const before = s.stats('m', 0);
    expect(l1Count()).toBe(60);
    await s.loadModel(entry);
    expect(s.modelInfo('m').version).toBe(2);
    expect(s.stats('m', 0)).toEqual(before);
    await s.lookup(keysAll.slice(0, 7), 'm', 0);
    expect(l1Count()).toBe(67);
    await s.unloadModel('m');
    await s.loadModel(entry);
    await s.lookup([keysAll[0]!], 'm', 0);
    expect(l1Count()).toBe(68);
  });
});

describe('models change while serving', () => {
  it('a loadModel running when the server closes rejects with DISPOSED and leaves nothing loaded', async () => {
    const dir = temp();
    let closing: Promise<void> | null = null;
    let loading = false;
    const s: HPS = await serve(psConfig([writeTable(join(dir, 'v1'), keysAll, 8)], [8], { gpucache: false }), {
      loadBatchSize: 100,
      onProgress: (p: { rowsLoaded: number }) => {
        if (loading && p.rowsLoaded === 1000) closing = s.close(); // the 10th batch of 200 of version 2
      },
    });
    const entry = (psConfig([writeTable(join(dir, 'v2'), spreadKeys(20000), 8, { salt: 2 })], [8], { gpucacheper: 0.5 }).models as Record<string, unknown>[])[0]!;
    loading = true;
    await expect(s.loadModel(entry)).rejects.toMatchObject({ code: 'DISPOSED' });
    expect(closing).not.toBeNull();
    await closing;
    expect(() => s.models()).toThrow(expect.objectContaining({ code: 'DISPOSED' }));
  });

  it('of two loadModel calls of one model running at once, the later one is served even when the earlier one finishes last', async () => {
    const dir = temp();
    const finished: number[] = [];
    const s = await serve(psConfig([writeTable(join(dir, 'v1'), keysAll, 8)], [8], { gpucache: false }), {
      loadBatchSize: 100,
      onProgress: (p: { rowsLoaded: number; rows: number }) => {
        if (p.rowsLoaded === p.rows) finished.push(p.rows);
      },
    });
    finished.length = 0;
    const entry = (folder: string) => (psConfig([folder], [8], { gpucache: false }).models as Record<string, unknown>[])[0]!;
    const big = spreadKeys(20000); // version 2: 200 batches
    const v2 = s.loadModel(entry(writeTable(join(dir, 'v2'), big, 8, { salt: 2 })));
    const v3 = s.loadModel(entry(writeTable(join(dir, 'v3'), keysAll, 8, { salt: 3 }))); // version 3: 10 batches, done first
    await Promise.all([v2, v3]);
    expect(finished).toEqual([ROWS, 20000]); // the case under test: version 3 finished loading before version 2
    expect(s.modelInfo('m').version).toBe(3);
    const ask = big.slice(0, 1200); // keysAll are its first 1000
    expect(Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 8, present, -1, 3));
  });

  it('a version that fails to load changes nothing (the old one serves on); loadModel adds a model beside the others', async () => {
    const dir = temp();
    const s = await serve(psConfig([writeTable(join(dir, 'v1'), keysAll, 8)], [8], { hit_rate_threshold: 2 }));
    const ask = [...keysAll.slice(0, 50), 4242n];
    const exact = expectedRows(ask, 8, present, -1);
    const entry = (folder: string, model = 'm', dims = [8]) => (psConfig([folder], dims, { model }).models as Record<string, unknown>[])[0]!;
    // missing files, and files whose rows are not whole vectors of the configured size
    await expect(s.loadModel(entry(join(dir, 'missing')))).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(s.loadModel(entry(writeTable(join(dir, 'v2'), keysAll, 8, { salt: 5 }), 'm', [7]))).rejects.toMatchObject({ code: 'CHECKPOINT_CORRUPT' });
    expect(Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(exact);
    expect(s.modelInfo('m').tables[0]!.dim).toBe(8);
    await s.loadModel(entry(writeTable(join(dir, 'other'), keysAll.slice(0, 100), 4, { salt: 2 }), 'other', [4]));
    expect(s.models().sort()).toEqual(['m', 'other']);
    const few = keysAll.slice(90, 110);
    expect(Array.from((await s.lookup(few, 'other', 0)).data as Float32Array)).toEqual(expectedRows(few, 4, new Set(keysAll.slice(0, 100)), -1, 2));
    expect(Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(exact);
  });
});

describe('HPS errors (thrown, never logged; nothing changes)', () => {
  it('rejects bad lookups with coded errors', async () => {
    const dir = temp();
    const s = await serve(psConfig(twoTables(dir), [8, 4], { max_batch_size: 2 }));
    await expect(s.lookup([1n], 'nope', 0)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(s.lookup([1n], 'm', 2)).rejects.toMatchObject({ code: 'OUT_OF_RANGE' });
    await expect(s.lookup([1n], 'm', 1.5)).rejects.toMatchObject({ code: 'INVALID_TYPE' });
    await expect(s.lookup(new Float32Array([1]) as never, 'm', 0)).rejects.toMatchObject({ code: 'INVALID_TYPE' });
    await expect(s.lookup(Array.from({ length: 33 }, (_, i) => i), 'm', 0)).rejects.toThrow(/at most max_batch_size \* maxnum_catfeature_query_per_table_per_sample = 32 keys/);
    await expect(s.lookup([0.5], 'm', 0)).rejects.toMatchObject({ code: 'INVALID_TYPE' });
    expect(s.stats('m', 0).l1).toEqual({ hits: 0, misses: 0, hitRate: 0 });
    expect(() => s.stats('m', 9)).toThrow(expect.objectContaining({ code: 'OUT_OF_RANGE' }));
    await s.close();
    await expect(s.lookup([1n], 'm', 0)).rejects.toMatchObject({ code: 'DISPOSED' });
  });

  it('rejects missing, empty and malformed model files and an unopenable RocksDB path', async () => {
    const dir = temp();
    const good = writeTable(join(dir, 'good'), keysAll.slice(0, 10), 4);
    await expect(HPS.create({ psConfig: psConfig([join(dir, 'missing')], [4]) })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const empty = join(dir, 'empty');
    writeTable(empty, [], 4);
    await expect(HPS.create({ psConfig: psConfig([empty], [4]) })).rejects.toMatchObject({ code: 'CHECKPOINT_CORRUPT' });
    const odd = writeTable(join(dir, 'odd'), keysAll.slice(0, 10), 4);
    writeFileSync(join(odd, 'key'), Buffer.alloc(79));
    await expect(HPS.create({ psConfig: psConfig([odd], [4]) })).rejects.toMatchObject({ code: 'CHECKPOINT_CORRUPT' });
    // emb_vector of the wrong vector size: 10 rows of 4 floats read as vector size 3
    await expect(HPS.create({ psConfig: psConfig([good], [3]) })).rejects.toMatchObject({ code: 'CHECKPOINT_CORRUPT' });
    writeFileSync(join(dir, 'file'), 'x');
    await expect(HPS.create({ psConfig: psConfig([good], [4], {}, { persistent_db: { type: 'rocks_db', path: join(dir, 'file', 'db') } }) })).rejects.toMatchObject({ code: 'IO_ERROR' });
    const kafka = HPS.create({ psConfig: psConfig([good], [4], {}, { update_source: { type: 'kafka_message_queue', brokers: '127.0.0.1:9092' } }) });
    await expect(kafka).rejects.toMatchObject({ code: 'UNSUPPORTED', message: expect.stringMatching(/use 'redis_stream'/) });
    await expect(HPS.create({ psConfig: psConfig([good], [4], {}, { volatile_db: { type: 'disabled' } }) })).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
  });
});
