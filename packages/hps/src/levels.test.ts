// L2 and L3 behaviour the other suites do not pin down: cache_missed_embeddings write-back, the in-process
// hash map's per-partition overflow_margin with each policy, and the latency percentiles of stats().
import { afterEach, describe, expect, it } from 'vitest';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { RocksStore } from '@embedstack/store-rocksdb';
import { loadDefaultBackend } from '@embedstack/core';
import { HPS, resolvePsConfig } from './index.js';
import { HashMapDb } from './volatileDb.js';
import { TableStats } from './stats.js';
import { expectedRows, partOf, psConfig, rowOf, spreadKeys, tempDir, writeTable } from '../test/fixtures.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const keys = spreadKeys(600);
const present = new Set(keys);


function hashMap(volatile: Record<string, unknown>): HashMapDb {
  const cfg = resolvePsConfig(psConfig(['/unused'], [4], {}, { volatile_db: volatile })).volatileDb;
  const db = new HashMapDb(cfg, loadDefaultBackend({ from: import.meta.url }));
  cleanups.push(() => db.close());
  return db;
}

const rowsOf = (ks: readonly bigint[]): Float32Array => Float32Array.from(ks.flatMap((k) => rowOf(k, 4)));

describe('L2 / L3', () => {
  it('cache_missed_embeddings writes rows found in L3 back to L2 (and only then)', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const folder = writeTable(join(t.dir, 't'), keys, 4);
    const ask = [...keys.slice(100, 200), 5555555n];
    for (const writeBack of [true, false]) {
      const s = await HPS.create({
        psConfig: psConfig([folder], [4], { gpucache: false }, {
          // L2 starts empty (initial_cache_rate 0): every row first comes from RocksDB
          volatile_db: { type: 'hash_map', num_partitions: 4, initial_cache_rate: 0, cache_missed_embeddings: writeBack },
          persistent_db: { type: 'rocks_db', path: join(t.dir, `rocks-${writeBack}`) },
        }),
      });
      cleanups.push(() => s.close());
      for (let round = 0; round < 2; round++) {
        expect(Array.from((await s.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 4, present, -1));
      }
      const st = s.stats('m', 0);
      // round 1: 101 L2 misses, 100 L3 hits + 1 miss; round 2 with write-back: 100 L2 hits, the unknown key misses twice
      expect(st.l2).toEqual(writeBack ? { hits: 100, misses: 102, hitRate: 100 / 202 } : { hits: 0, misses: 202, hitRate: 0 });
      expect(st.l3).toEqual(writeBack ? { hits: 100, misses: 2, hitRate: 100 / 102 } : { hits: 200, misses: 2, hitRate: 200 / 202 });
    }
  });

  it('L3 written at startup holds exactly the new model: rows an earlier run left behind are gone', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const rocks = join(t.dir, 'rocks');
    const serve = async (folder: string) => {
      const s = await HPS.create({
        psConfig: psConfig([folder], [4], { gpucache: false }, {
          volatile_db: { type: 'hash_map', num_partitions: 2, initial_cache_rate: 0 },
          persistent_db: { type: 'rocks_db', path: rocks },
        }),
      });
      cleanups.push(() => s.close());
      return s;
    };
    const first = await serve(writeTable(join(t.dir, 'v1'), keys.slice(0, 300), 4));
    const ask = [keys[10]!, keys[250]!, keys[299]!, 77777777n];
    expect(Array.from((await first.lookup(ask, 'm', 0)).data as Float32Array)).toEqual(expectedRows(ask, 4, new Set(keys.slice(0, 300)), -1));
    await first.close();
    // the retrained model drops keys 200..299 and changes every value (salt 1)
    const kept = keys.slice(0, 200);
    const second = await serve(writeTable(join(t.dir, 'v2'), kept, 4, { salt: 1 }));
    const got = Array.from((await second.lookup(ask, 'm', 0)).data as Float32Array);
    expect(got).toEqual([...rowOf(keys[10]!, 4, 1), -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1]);
  });

  it("the RocksDB tables of a superseded reload give their disk back (emptied and compacted): the folder holds about two versions while serving, one after close", async () => {
    const t = tempDir('hps-l3disk-');
    cleanups.push(t.cleanup);
    const ks = spreadKeys(100_000);
    const rocks = join(t.dir, 'rocks');
    // table files and write-ahead logs in the folder
    const bytes = (): number => readdirSync(rocks).reduce((a, f) => a + (/\.(sst|log)$/.test(f) ? statSync(join(rocks, f)).size : 0), 0);
    const version = ks.length * (8 + 16 * 4); // one version's keys and rows
    const entry = (salt: number) => (psConfig([writeTable(join(t.dir, `d-${salt}`), ks, 16, { salt })], [16], { model: 'd', gpucache: false }).models as Record<string, unknown>[])[0]!;
    const s = await HPS.create({ psConfig: { ...psConfig([], [16], {}, { volatile_db: { type: 'disabled' }, persistent_db: { type: 'rocks_db', path: rocks } }), models: [entry(0)] } });
    cleanups.push(() => s.close());
    for (const salt of [1, 2, 3]) {
      await s.loadModel(entry(salt));
      // the stable tables (first load) and the live reload; each earlier reload emptied and compacted
      expect(bytes()).toBeLessThan(2.5 * version);
      expect(Array.from((await s.lookup(ks.slice(0, 1000), 'd', 0)).data as Float32Array)).toEqual(expectedRows(ks.slice(0, 1000), 16, new Set(ks), -1, salt));
    }
    await s.close();
    expect(bytes()).toBeLessThan(1.5 * version);
    // the emptied column families stay (rocksdb-native cannot drop one), empty
    const l3 = await RocksStore.open({ path: rocks });
    try {
      expect(l3.tables().sort()).toEqual(['d.sparse_embedding0', 'd.sparse_embedding0.v2', 'd.sparse_embedding0.v3', 'd.sparse_embedding0.v4']);
      expect((await l3.multiGet('d.sparse_embedding0.v3', BigInt64Array.from(ks), 16)).hits).toBe(0);
      expect((await l3.multiGet('d.sparse_embedding0', BigInt64Array.from(ks), 16)).hits).toBe(ks.length);
    } finally {
      await l3.close();
    }
  }, 120_000);

  it('hash map evict_oldest: each partition over overflow_margin is cut to overflow_resolution_target of it, keeping the newest rows', async () => {
    const parts = 2;
    const margin = 50;
    const db = hashMap({ num_partitions: parts, overflow_margin: margin, overflow_resolution_target: 0.5, overflow_policy: 'evict_oldest' });
    await db.createTable('t', 4);
    // the model: per partition, rows in insertion order with the batch that wrote them (one clock tick per batch)
    const model: { key: bigint; tick: number }[][] = Array.from({ length: parts }, () => []);
    for (let b = 0; b < 40; b++) {
      const batch = keys.slice(b * 10, b * 10 + 10);
      await db.insert('t', BigInt64Array.from(batch), rowsOf(batch));
      for (let p = 0; p < parts; p++) {
        const mine = batch.filter((k) => partOf(k, parts) === p);
        if (mine.length === 0) continue;
        model[p]!.push(...mine.map((key) => ({ key, tick: b })));
        if (model[p]!.length > margin) {
          // keep the 25 with the newest tick; ties keep the smaller signed key
          model[p]!.sort((x, y) => y.tick - x.tick || (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
          model[p]!.length = Math.floor(0.5 * margin);
        }
      }
      expect(db.partitionSizes('t')).toEqual(model.map((m) => m.length));
    }
    const r = await db.fetch('t', BigInt64Array.from(keys.slice(0, 400)), 4);
    const resident = new Set(model.flat().map((e) => e.key));
    expect(Array.from(r.found)).toEqual(keys.slice(0, 400).map((k) => (resident.has(k) ? 1 : 0)));
    expect(Array.from(r.values)).toEqual(keys.slice(0, 400).flatMap((k) => (resident.has(k) ? rowOf(k, 4) : [0, 0, 0, 0])));
  });

  it('hash map evict_least_used keeps rows read often; evict_random stays within the margin; both exact', async () => {
    for (const policy of ['evict_least_used', 'evict_random']) {
      const db = hashMap({ num_partitions: 3, overflow_margin: 30, overflow_resolution_target: 0.5, overflow_policy: policy });
      await db.createTable('t', 4);
      const hot = keys.slice(0, 6);
      await db.insert('t', BigInt64Array.from(hot), rowsOf(hot));
      for (let i = 0; i < 5; i++) expect((await db.fetch('t', BigInt64Array.from(hot), 4)).hits).toBe(6);
      for (let b = 0; b < 20; b++) {
        const batch = keys.slice(6 + b * 15, 6 + b * 15 + 15);
        await db.insert('t', BigInt64Array.from(batch), rowsOf(batch));
        for (const n of db.partitionSizes('t')) expect(n).toBeLessThanOrEqual(30);
      }
      const all = keys.slice(0, 306);
      const r = await db.fetch('t', BigInt64Array.from(all), 4);
      expect(r.hits).toBe(db.partitionSizes('t').reduce((a, n) => a + n, 0));
      all.forEach((k, i) => {
        if (r.found[i]) expect(Array.from(r.values.subarray(i * 4, i * 4 + 4))).toEqual(rowOf(k, 4));
      });
      // lfu: 6 uses each beat every row written once since
      if (policy === 'evict_least_used') for (let i = 0; i < 6; i++) expect(r.found[i], `hot key ${hot[i]}`).toBe(1);
    }
  });

  it('stats latency percentiles follow the recorded latencies (nearest rank, within the 2% histogram resolution)', () => {
    const st = new TableStats();
    const ms = Array.from({ length: 1000 }, (_, i) => ((i * 7919) % 1000) + 1); // 1..1000 ms, shuffled
    for (const v of ms) st.latency(v);
    const sorted = [...ms].sort((a, b) => a - b);
    const rank = (p: number): number => sorted[Math.ceil(p * sorted.length) - 1]!;
    const { latencyMs, lookups } = st.snapshot();
    expect(lookups).toBe(1000);
    expect(Math.abs(latencyMs.p50 / rank(0.5) - 1)).toBeLessThan(0.021);
    expect(Math.abs(latencyMs.p90 / rank(0.9) - 1)).toBeLessThan(0.021);
    expect(Math.abs(latencyMs.p99 / rank(0.99) - 1)).toBeLessThan(0.021);
  });
});
