// Runs in a fresh project where the packed tarballs were installed with npm
// (scripts/pack-check.mjs): imports each facade, runs a lookup on the native CPU
// backend, and checks which native binary the process loaded.
//   node use-facades.mjs prebuilt|source
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTable, getBackend, RaggedTensor } from '@embedstack/core';
import { cpuLevel } from '@embedstack/cpu-backend';
import { expectLookup } from './lookup.mjs';
import classNames from './class-names.cjs';

const want = process.argv[2];
assert.ok(want === 'prebuilt' || want === 'source', 'usage: node use-facades.mjs prebuilt|source');
const checks = [];
const check = async (name, fn) => {
  await fn();
  checks.push(name);
};

// The acceptance line: a table on the native backend, no compiler needed.
await check('core + cpu-backend: createTable({ dim: 8 }, { backend: "cpu" }) lookup', () => expectLookup('cpu'));

if (want === 'prebuilt') {
  await check('tfra: Variable lookup on cpu', async () => {
    const de = await import('@embedstack/tfra');
    const v = new de.Variable({ keyDtype: 'int64', dim: 2, initializer: [-1, -2], name: 'v', kvCreator: new de.CuckooHashTableCreator() });
    await v.upsert([0n, 1n], new Float32Array([0, 1, 2, 3]));
    const { values, exists } = await v.lookup([1n, 4n], { returnExists: true });
    assert.deepEqual(Array.from(values.data), [2, 3, -1, -2]);
    assert.deepEqual(Array.from(exists.data ?? exists, Boolean), [true, false]);
    assert.equal(v.tables[0].backendName, 'cpu');
    v.dispose();
  });

  await check('tpu-embedding: enqueue/dequeue on cpu', async () => {
    const tpu = await import('@embedstack/tpu-embedding');
    const table = new tpu.TableConfig({ vocabularySize: 4, dim: 2, combiner: 'sum', name: 't', initializer: () => new Float32Array([0, 1, 2, 3, 4, 5, 6, 7]) });
    const featureConfig = { f: new tpu.FeatureConfig({ table }) };
    const emb = new tpu.TPUEmbedding({ featureConfig, optimizer: new tpu.SGD({ learningRate: 0.1 }) });
    emb.build(2);
    await emb.enqueue({ f: RaggedTensor.fromNestedArray([[1], [2, 3]]) }, { training: false });
    const acts = await emb.dequeue();
    assert.deepEqual(Array.from(acts.f.data), [2, 3, 10, 12]);
    emb.dispose();
  });

  await check('sok: DynamicVariable lookup on cpu', async () => {
    const sok = await import('@embedstack/sok');
    await sok.init({ numDevices: 1 });
    const v = new sok.DynamicVariable({ dimension: 3, initializer: '13' });
    const emb = await sok.embeddingLookup(v, [0n, 2n ** 40n]);
    assert.deepEqual(Array.from(emb.data), [13, 13, 13, 13, 13, 13]);
  });

  await check('tfjs: the adapter imports (with its tfjs peers)', async () => {
    const tfjs = await import('@embedstack/tfjs');
    assert.ok(Object.keys(tfjs).length > 0);
  });

  await check('hps: export a table, HPS.create, lookup on cpu', async () => {
    const hps = await import('@embedstack/hps');
    const table = createTable({ kind: 'dynamic', dim: 4, name: 'emb' }, { backend: 'cpu' });
    await table.upsert(new BigInt64Array([1n, 2n]), new Float32Array([1, 1, 1, 1, 2, 2, 2, 2]));
    const dir = mkdtempSync(join(tmpdir(), 'pack-check-hps-'));
    try {
      const psConfig = await hps.exportModel({ model: 'm', dir, tables: [{ table, name: 'emb' }] });
      const server = await hps.HPS.create({ psConfig });
      const out = await server.lookup(new BigInt64Array([2n, 9n]), 'm', 0);
      assert.deepEqual(Array.from(out.data), [2, 2, 2, 2, 0, 0, 0, 0]);
      await server.close();
      table.dispose();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

if (want === 'source') {
  // This project has tfra without its optional peer @embedstack/store-redis.
  await check('tfra without @embedstack/store-redis: in-memory variables work, RedisTableCreator says what to install', async () => {
    const de = await import('@embedstack/tfra');
    const v = new de.Variable({ keyDtype: 'int64', dim: 2, initializer: [-1, -2], name: 'v', kvCreator: new de.CuckooHashTableCreator() });
    assert.deepEqual(Array.from((await v.lookup([3n])).data), [-1, -2]);
    assert.throws(
      () => new de.RedisTableCreator(),
      (e) => e.code === 'BACKEND_UNAVAILABLE' && e.message.includes('npm install @embedstack/store-redis'),
    );
    v.dispose();
  });
}

await check('ESM: the installed packages\' classes keep their names (no bundler renaming)', async () => {
  const names = ['core', 'cpu-backend', 'cuda-backend', 'tfra', 'tpu-embedding', 'sok', 'hps', 'tfjs', 'store-redis', 'store-rocksdb'].map((n) => `@embedstack/${n}`);
  for (const name of names) {
    let m;
    try {
      m = await import(name);
    } catch (e) {
      // not installed in this project (an installed package whose own import fails is an error)
      if (e.code === 'ERR_MODULE_NOT_FOUND' && e.message.includes(`'${name}'`)) continue;
      throw e;
    }
    assert.deepEqual(classNames.renamedClasses(m), [], `${name}'s classes keep their names`);
  }
});

const level = cpuLevel();
assert.equal(getBackend().name, 'cpu');
assert.equal(level.build, want, `the ${want} binary runs (${level.path})`);
// The binary in this process's memory map is the one reported.
const maps = readFileSync('/proc/self/maps', 'utf8');
assert.ok(maps.includes(level.path), `${level.path} is mapped`);
if (want === 'prebuilt') assert.match(level.path, /[\\/]prebuilds[\\/]linux-x64[\\/]/);
else assert.match(level.path, /[\\/]build[\\/]Release[\\/]embedstack_cpu\.node$/);
console.log(JSON.stringify({ ok: true, checks, level }));
