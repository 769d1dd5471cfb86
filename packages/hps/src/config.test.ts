import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadPsConfig, resolvePsConfig, stripJsonComments } from './index.js';
import { compileUpdateFilters, updateFilterPasses } from './config.js';

const base = { supportlonglong: true, models: [{ model: 'naive_dnn', sparse_files: ['/a', '/b'], embedding_vecsize_per_table: [16, 8], maxnum_catfeature_query_per_table_per_sample: [2, 26], default_value_for_each_table: [1], deployed_device_list: [0] }] };

describe('ps config', () => {
  it("fills HugeCTR's defaults", () => {
    const c = resolvePsConfig(base);
    const m = c.models[0]!;
    expect(m).toMatchObject({
      model: 'naive_dnn', maxBatchSize: 64, gpucache: true, gpucacheper: 0.2, hitRateThreshold: 0.9, cacheRefreshPercentagePerIteration: 0,
      embeddingTableNames: ['sparse_embedding0', 'sparse_embedding1'], embeddingCacheType: 'dynamic', defaultValueForEachTable: [1, 0],
      maxnumCatfeatureQueryPerTablePerSample: [2, 26], embeddingVecsizePerTable: [16, 8],
    });
    expect(c.volatileDb).toMatchObject({ type: 'hash_map', numPartitions: 16, maxBatchSize: 65536, overflowMargin: Infinity, overflowPolicy: 'evict_random', overflowResolutionTarget: 0.8, initialCacheRate: 1, cacheMissedEmbeddings: false });
    expect(c.persistentDb).toMatchObject({ type: 'disabled', path: '/tmp/rocksdb', numThreads: 16, readOnly: false, maxBatchSize: 10000 });
    expect(c.updateSource.type).toBe('null');
    expect([c.volatileDb.initializeAfterStartup, c.persistentDb.initializeAfterStartup]).toEqual([true, true]);
    // keys of HugeCTR versions that this package accepts and has no use for (TLS, shared memory, Kafka tuning)
    expect(() => resolvePsConfig({ ...base, volatile_db: { enable_tls: false, shared_memory_size: 1024, algorithm: 'phm' }, update_source: { max_receive_buffer_size: 2000, metadata_refresh_interval_ms: 30000 } })).not.toThrow();
  });

  it('accepts aliases, "host:port,host:port" addresses and string booleans', () => {
    const c = resolvePsConfig({ ...base, volatile_db: { type: 'redis', address: '127.0.0.1:7000,127.0.0.1:7001', cache_missed_embeddings: 'true' }, persistent_db: { type: 'rocksdb', path: 'rel' }, update_source: { type: 'kafka' } });
    expect(c.volatileDb.type).toBe('redis_cluster');
    expect(c.volatileDb.address).toEqual(['127.0.0.1:7000', '127.0.0.1:7001']);
    expect(c.volatileDb.cacheMissedEmbeddings).toBe(true);
    expect(c.persistentDb.type).toBe('rocks_db');
    expect(c.persistentDb.path).toBe(join(process.cwd(), 'rel'));
    expect(c.updateSource.type).toBe('kafka_message_queue');
    // update_filters: HugeCTR's default is every model; an empty list turns a level's updates off
    expect(c.volatileDb.updateFilters).toEqual(['.+']);
    expect(resolvePsConfig({ ...base, volatile_db: { update_filters: [] } }).volatileDb.updateFilters).toEqual([]);
    expect(() => resolvePsConfig({ ...base, persistent_db: { update_filters: ['(['] } })).toThrow(expect.objectContaining({ argument: 'persistent_db.update_filters[0]' }));
    // a filter is matched as HugeCTR builds it, ^hps_et\.<filter>\..+$ over the tag hps_et.<model>.<table>
    const pass = (f: string[], model: string) => updateFilterPasses(compileUpdateFilters(f), model, 'sparse_embedding0');
    expect([pass(['.+'], 'a'), pass(['l3'], 'l3u'), pass(['l3'], 'l3'), pass(['l3.'], 'l3u'), pass(['x', 'ctr_v[0-9]'], 'ctr_v2'), pass([], 'a')]).toEqual([true, false, true, true, true, false]);
  });

  it('reports unknown keys with the nearest known one', () => {
    expect(() => resolvePsConfig({ ...base, volatile_db: { overflow_margn: 5 } })).toThrow('Unknown key "overflow_margn" in volatile_db: did you mean "overflow_margin"?');
    expect(() => resolvePsConfig({ ...base, models: [{ ...base.models[0], gpucache_per: 0.5 }] })).toThrow('did you mean "gpucacheper"?');
    expect(() => resolvePsConfig({ ...base, supportlonglongs: true })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'psConfig.supportlonglongs' }));
    expect(() => resolvePsConfig({ ...base, volatile_db: { type: 'hash_mapp' } })).toThrow(/did you mean "hash_map"/);
  });

  it('checks names, required keys and per-table lengths', () => {
    expect(() => resolvePsConfig({ ...base, models: [{ ...base.models[0], model: 'bad name' }] })).toThrow(/\[a-zA-Z0-9_-\]\{1,120\}/);
    expect(() => resolvePsConfig({ models: base.models })).toThrow(/supportlonglong/);
    expect(() => resolvePsConfig({ ...base, models: [] })).toThrow(expect.objectContaining({ code: 'INVALID_TYPE' }));
    expect(() => resolvePsConfig({ ...base, models: [{ ...base.models[0], sparse_files: ['/a'] }] })).toThrow(/one folder per table \(2/);
    expect(() => resolvePsConfig({ ...base, models: [{ ...base.models[0], gpucacheper: 1.5 }] })).toThrow(expect.objectContaining({ argument: 'models[0].gpucacheper' }));
    expect(() => resolvePsConfig({ ...base, models: [base.models[0], base.models[0]] })).toThrow(expect.objectContaining({ code: 'ALREADY_EXISTS' }));
  });

  it('reads ps.json files with // comments (not inside strings), paths relative to the file', async () => {
    expect(stripJsonComments('{"a": "x//y", // note\n "b": 1 /* c */}')).toBe('{"a": "x//y", \n "b": 1        }');
    const dir = mkdtempSync(join(tmpdir(), 'hps-cfg-'));
    const file = join(dir, 'ps.json');
    writeFileSync(file, `{\n  // HugeCTR's docs comment their JSON\n  "supportlonglong": true,\n  "models": [{ "model": "m", "sparse_files": ["tables/t0"], // one per table\n  "embedding_vecsize_per_table": [4], "maxnum_catfeature_query_per_table_per_sample": [1], "default_value_for_each_table": [0], "deployed_device_list": [0] }]\n}`);
    const c = await loadPsConfig({ psConfigFile: file });
    expect(c.models[0]!.sparseFiles).toEqual([join(dir, 'tables/t0')]);
    await expect(loadPsConfig({ psConfigFile: join(dir, 'none.json') })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(loadPsConfig({})).rejects.toThrow(/exactly one of psConfigFile/);
    writeFileSync(file, '{ nope');
    await expect(loadPsConfig({ psConfigFile: file })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
