import { afterEach, describe, expect, it } from 'vitest';
// createTable below uses the default backend: register the CPU backend whichever test runs first (or alone)
import '@embedstack/cpu-backend';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createTable, SparseTensor, Tensor } from '@embedstack/core';
import * as hps from './index.js';
import { psConfig, rowOf, spreadKeys, tempDir, writeTable } from '../test/fixtures.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  await hps.shutdown();
  for (const c of cleanups.splice(0).reverse()) await c();
});

const keys = spreadKeys(200);

function setup(): Record<string, unknown> {
  const t = tempDir();
  cleanups.push(t.cleanup);
  return psConfig([writeTable(join(t.dir, 't0'), keys, 4)], [4], { max_batch_size: 64 });
}

/** The plain combiner of the spec, written here: rows of (row, id, weight) entries. */
function combine(entries: [number, bigint, number][], nrows: number, combiner: 'sum' | 'mean' | 'sqrtn', maxNorm?: number): number[] {
  const out = new Array<number>(nrows * 4).fill(0);
  const den = new Array<number>(nrows).fill(0);
  for (const [r, k, w] of entries) {
    let e = rowOf(k, 4);
    if (maxNorm !== undefined) {
      const n = Math.sqrt(e.reduce((a, v) => a + v * v, 0));
      if (n > maxNorm) e = e.map((v) => (v * maxNorm) / n);
    }
    e.forEach((v, c) => (out[r * 4 + c]! += w * v));
    den[r]! += combiner === 'sqrtn' ? w * w : w;
  }
  if (combiner === 'sum') return out;
  return out.map((v, i) => {
    const d = combiner === 'sqrtn' ? Math.sqrt(den[Math.floor(i / 4)]!) : den[Math.floor(i / 4)]!;
    return d === 0 ? 0 : v / d;
  });
}

describe('layers', () => {
  it('SparseLookupLayer pools like the plain combiner (mean/sum/sqrtn, weights, maxNorm, empty rows)', async () => {
    const config = setup();
    await hps.init({ globalBatchSize: 16, psConfig: config });
    const layer = new hps.SparseLookupLayer({ modelName: 'm', tableId: 0, embVecSize: 4, embVecDtype: 'float32' });
    const entries: [number, bigint, number][] = [[0, keys[1]!, 0.5], [0, keys[2]!, 2], [0, keys[1]!, 1], [2, keys[150]!, 3], [2, 777777n, 1]];
    const ids = new SparseTensor([[0, 0], [0, 1], [0, 2], [2, 0], [2, 1]], BigInt64Array.from(entries.map((e) => e[1])), [3, 3]);
    const w = new SparseTensor([[0, 0], [0, 1], [0, 2], [2, 0], [2, 1]], Float32Array.from(entries.map((e) => e[2])), [3, 3]);
    const withDefault = entries.map(([r, k, wt]) => [r, k, wt] as [number, bigint, number]);
    for (const combiner of ['mean', 'sum', 'sqrtn'] as const) {
      const got = await layer.call(ids, w, { combiner, maxNorm: undefined });
      expect(got.shape).toEqual([3, 4]);
      // the unknown key 777777 gets the default -1 repeated
      const exp = combine(withDefault.filter((e) => e[1] !== 777777n), 3, combiner);
      const dflt = combiner === 'sum' ? 1 : combiner === 'mean' ? 1 / 4 : 1 / Math.sqrt(10);
      const den = combiner === 'sum' ? 1 : combiner === 'mean' ? 4 / 3 : Math.sqrt(10) / 3;
      for (let c = 0; c < 4; c++) exp[2 * 4 + c] = exp[2 * 4 + c]! / den - dflt;
      Array.from(got.data as Float32Array).forEach((v, i) => expect(v).toBeCloseTo(exp[i]!, 4));
    }
    const unweighted = await layer.call(ids, undefined, { maxNorm: 1 });
    const exp = combine(entries.slice(0, 3).map(([r, k]) => [r, k, 1]), 3, 'mean', 1);
    Array.from(unweighted.data as Float32Array).slice(0, 8).forEach((v, i) => expect(v).toBeCloseTo(exp[i]!, 4));
    await expect(layer.call(ids, undefined, { combiner: 'max' as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(layer.call([1, 2] as never)).rejects.toMatchObject({ code: 'INVALID_TYPE' });
    await expect(layer.call(ids, new Float32Array(5) as never)).rejects.toMatchObject({ code: 'INVALID_TYPE' });
  });

  it('SparseLookupLayer: weights summing to zero give a zero mean (div-no-nan); sqrtn and sum still pool', async () => {
    await hps.init({ globalBatchSize: 16, psConfig: setup() });
    const layer = new hps.SparseLookupLayer({ modelName: 'm', tableId: 0, embVecSize: 4, embVecDtype: 'float32' });
    const entries: [number, bigint, number][] = [[0, keys[3]!, 2], [0, keys[4]!, -2], [1, keys[5]!, 0.25]];
    const ids = new SparseTensor([[0, 0], [0, 1], [1, 0]], BigInt64Array.from(entries.map((e) => e[1])), [2, 2]);
    const w = new SparseTensor([[0, 0], [0, 1], [1, 0]], Float32Array.from(entries.map((e) => e[2])), [2, 2]);
    for (const combiner of ['mean', 'sqrtn', 'sum'] as const) {
      const got = Array.from((await layer.call(ids, w, { combiner })).data as Float32Array);
      const exp = combine(entries, 2, combiner);
      if (combiner === 'mean') expect(exp.slice(0, 4)).toEqual([0, 0, 0, 0]);
      got.forEach((v, i) => expect(v).toBeCloseTo(exp[i]!, 4));
    }
  });

  it('LookupLayer returns ids.shape + [dim] rows, clipped by maxNorm; checks embVecSize', async () => {
    const config = setup();
    const lookup = new hps.LookupLayer({ modelName: 'm', tableId: 0, embVecSize: 4, psConfig: config, globalBatchSize: 8 });
    const ids = new Tensor(Int32Array.from([0, 3, 6, 9, 12, 5000]), [2, 3]);
    const rows = await lookup.call(ids);
    expect(rows.shape).toEqual([2, 3, 4]);
    expect(Array.from(rows.data as Float32Array)).toEqual([...[0n, 3n, 6n, 9n, 12n].flatMap((k) => rowOf(k, 4)), -1, -1, -1, -1]);
    const clipped = await lookup.call([3n], { maxNorm: 1 });
    const r = rowOf(3n, 4);
    const n = Math.sqrt(r.reduce((a, v) => a + v * v, 0));
    Array.from(clipped.data as Float32Array).forEach((v, i) => expect(v).toBeCloseTo(r[i]! / Math.max(1, n), 5));
    const wrong = new hps.LookupLayer({ modelName: 'm', tableId: 0, embVecSize: 8 });
    await expect(wrong.call([1])).rejects.toThrow(/embVecSize to equal embedding_vecsize_per_table\[0\] = 4/);
    await expect(lookup.call(new Tensor(new Float32Array([1]), [1]) as never)).rejects.toMatchObject({ code: 'INVALID_TYPE' });
    await expect(hps.init({ globalBatchSize: 8, psConfig: config })).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
  });

  it("a layer call that starts the server and is rejected leaves no server behind; one that succeeds keeps it", async () => {
    const config = setup();
    const base = { tableId: 0, psConfig: config, globalBatchSize: 8 };
    const ok = new hps.LookupLayer({ ...base, modelName: 'm', embVecSize: 4 });
    const rejected: [string, () => Promise<unknown>][] = [
      ['NOT_FOUND', () => new hps.LookupLayer({ ...base, modelName: 'nope', embVecSize: 4 }).call([1n])],
      ['INVALID_ARGUMENT', () => new hps.LookupLayer({ ...base, modelName: 'm', embVecSize: 8 }).call([1n])],
      ['INVALID_ARGUMENT', () => ok.call(new BigInt64Array(1025))], // over max_batch_size 64 * 16
      ['NOT_FOUND', () => new hps.SparseLookupLayer({ ...base, modelName: 'nope', embVecSize: 4 }).call(new SparseTensor(Int32Array.of(0, 0), BigInt64Array.of(1n), [1, 1]))],
    ];
    for (const [code, call] of rejected) {
      await expect(call()).rejects.toMatchObject({ code });
      // nothing runs: a layer without a config of its own finds no server, and hps.init may start one
      await expect(new hps.LookupLayer({ modelName: 'm', tableId: 0, embVecSize: 4 }).call([1n])).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    }
    // two first calls at once, one rejected: the other's success keeps the server
    const both = await Promise.allSettled([new hps.LookupLayer({ ...base, modelName: 'nope', embVecSize: 4 }).call([1n]), ok.call([keys[3]!])]);
    expect(both.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    const later = await new hps.LookupLayer({ modelName: 'm', tableId: 0, embVecSize: 4 }).call([keys[5]!]);
    expect(Array.from(later.data as Float32Array)).toEqual(rowOf(keys[5]!, 4));
    await expect(hps.init({ globalBatchSize: 8, psConfig: config })).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    await hps.shutdown();
    // and after the rejected calls hps.init starts a server as usual
    await expect(new hps.LookupLayer({ ...base, modelName: 'nope', embVecSize: 4 }).call([1n])).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await hps.init({ globalBatchSize: 8, psConfig: config });
  });

  it("hps.init after a layer's first call started the server says so and what to do (ALREADY_EXISTS)", async () => {
    const config = setup();
    const t = tempDir();
    cleanups.push(t.cleanup);
    const psConfigFile = join(t.dir, 'ps.json');
    writeFileSync(psConfigFile, JSON.stringify(config));
    const rows = await new hps.LookupLayer({ modelName: 'm', tableId: 0, embVecSize: 4, psConfigFile }).call([keys[1]!]);
    expect(Array.from(rows.data as Float32Array)).toEqual(rowOf(keys[1]!, 4));
    await expect(hps.init({ globalBatchSize: 1, psConfig: config })).rejects.toMatchObject({
      name: 'AlreadyExistsError',
      code: 'ALREADY_EXISTS',
      message: `an HPS server is already running: hps.init was not called, so a layer's first call started it from its psConfigFile ${JSON.stringify(psConfigFile)}; call hps.init before any layer call (or hps.shutdown() before starting another server)`,
    });
    // the same from a layer's psConfig object
    await hps.shutdown();
    await new hps.LookupLayer({ modelName: 'm', tableId: 0, embVecSize: 4, psConfig: config }).call([keys[1]!]);
    await expect(hps.init({ globalBatchSize: 1, psConfig: config })).rejects.toMatchObject({ message: expect.stringContaining("a layer's first call started it from its psConfig;") });
    // after hps.init itself, the message is the usual one
    await hps.shutdown();
    await hps.init({ globalBatchSize: 1, psConfig: config });
    await new hps.LookupLayer({ modelName: 'm', tableId: 0, embVecSize: 4, psConfigFile }).call([keys[1]!]);
    await expect(hps.init({ globalBatchSize: 1, psConfig: config })).rejects.toMatchObject({
      code: 'ALREADY_EXISTS',
      message: 'hps.init was already called: call hps.shutdown() before starting another server',
    });
  });

  it("the key limit counts what HugeCTR looks up: LookupLayer and server.lookup every id, SparseLookupLayer the distinct ids", async () => {
    // max_batch_size 64 * maxnum_catfeature_query_per_table_per_sample 16 = 1024 keys per lookup
    const config = setup();
    await hps.init({ globalBatchSize: 16, psConfig: config });
    const server = await hps.HPS.create({ psConfig: config });
    cleanups.push(() => server.close());
    const lookup = new hps.LookupLayer({ modelName: 'm', tableId: 0, embVecSize: 4 });
    const sparse = new hps.SparseLookupLayer({ modelName: 'm', tableId: 0, embVecSize: 4 });
    const limit = /at most max_batch_size \* maxnum_catfeature_query_per_table_per_sample = 1024 keys/;
    // 1025 ids, one distinct: HugeCTR's LookupLayer passes all 1025 to the lookup, its SparseLookupLayer unique(ids) = 1
    const same = new BigInt64Array(1025).fill(keys[7]!);
    await expect(server.lookup(same, 'm', 0)).rejects.toThrow(limit);
    await expect(lookup.call(same)).rejects.toThrow(limit);
    await expect(lookup.call(same, { maxNorm: 1 })).rejects.toThrow(limit);
    const rows1025 = new SparseTensor(Int32Array.from({ length: 2050 }, (_, j) => (j % 2 === 0 ? j >> 1 : 0)), same, [1025, 1]);
    const pooled = await sparse.call(rows1025, null, { combiner: 'sum' });
    expect(Array.from(pooled.data as Float32Array).slice(-4)).toEqual(rowOf(keys[7]!, 4));
    // 1024 ids pass everywhere, clipped or not (the clip written here)
    const r = rowOf(keys[7]!, 4);
    const n = Math.sqrt(r.reduce((a, v) => a + v * v, 0));
    const clipped = await lookup.call(same.subarray(0, 1024), { maxNorm: 1 });
    Array.from(clipped.data as Float32Array).slice(-4).forEach((v, i) => expect(v).toBeCloseTo(r[i]! / n, 5));
    // 1025 distinct ids are over the limit for the sparse layer too
    const distinct = BigInt64Array.from({ length: 1025 }, (_, i) => BigInt(i));
    await expect(sparse.call(new SparseTensor(rows1025.indices, distinct, [1025, 1]))).rejects.toThrow(limit);
  });

  it("the layers check the implicit hps.init's options when constructed", () => {
    const base = { modelName: 'm', tableId: 0, embVecSize: 4 };
    for (const Layer of [hps.LookupLayer, hps.SparseLookupLayer]) {
      expect(() => new Layer({ ...base, psConfigFile: 'ps.json', psConfig: {} })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'options.psConfig' }));
      expect(() => new Layer({ ...base, psConfigFile: '' })).toThrow(expect.objectContaining({ code: 'INVALID_TYPE', argument: 'options.psConfigFile' }));
      expect(() => new Layer({ ...base, psConfig: [] as never })).toThrow(expect.objectContaining({ code: 'INVALID_TYPE', argument: 'options.psConfig' }));
      expect(() => new Layer({ ...base, psConfigFile: 'ps.json', globalBatchSize: 0 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'options.globalBatchSize' }));
      expect(() => new Layer({ ...base, globalBatchSize: '8' as never })).toThrow(expect.objectContaining({ code: 'INVALID_TYPE', argument: 'options.globalBatchSize' }));
    }
  });

  it('exportModel writes a trained core table in HugeCTR layout that HPS serves exactly', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const table = createTable({ kind: 'dynamic', dim: 3, initializer: { kind: 'zeros' } });
    cleanups.push(() => table.dispose());
    const ks = BigInt64Array.from([5n, -9n, 1n << 40n]);
    await table.upsert(ks, new Float32Array([1, 2, 3, 4, 5, 6, 7, 8, 9]));
    const config = await hps.exportModel({ model: 'trained', tables: [{ table, name: 'emb' }], dir: t.dir, psConfigFile: join(t.dir, 'ps.json') });
    const server = await hps.HPS.create({ psConfigFile: join(t.dir, 'ps.json') });
    cleanups.push(() => server.close());
    expect((config.models as { sparse_files: string[] }[])[0]!.sparse_files).toEqual([join(t.dir, 'trained', 'emb')]);
    expect(Array.from((await server.lookup([1n << 40n, 5n, 6n, -9n], 'trained', 0)).data as Float32Array)).toEqual([7, 8, 9, 1, 2, 3, 0, 0, 0, 4, 5, 6]);
  });

  it('exportModel takes a dense Tensor (tpu-embedding) and the shards of one table (tfra), served exactly', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const dense = new Tensor(Float32Array.from({ length: 8 }, (_, i) => i + 0.5), [4, 2]);
    const s0 = createTable({ kind: 'dynamic', dim: 2, initializer: { kind: 'zeros' } });
    const s1 = createTable({ kind: 'dynamic', dim: 2, initializer: { kind: 'zeros' } });
    cleanups.push(() => s0.dispose(), () => s1.dispose());
    await s0.upsert([10n, 12n], new Float32Array([1, 1, 2, 2]));
    await s1.upsert([11n], new Float32Array([3, 3]));
    const psConfig = await hps.exportModel({ model: 'mixed', tables: [dense, { table: [s0, s1], name: 'sharded' }], dir: t.dir });
    const server = await hps.HPS.create({ psConfig });
    cleanups.push(() => server.close());
    expect(Array.from((await server.lookup([3n, 0n, 4n], 'mixed', 0)).data as Float32Array)).toEqual([6.5, 7.5, 0.5, 1.5, 0, 0]);
    expect(Array.from((await server.lookup([11n, 12n, 10n], 'mixed', 1)).data as Float32Array)).toEqual([3, 3, 2, 2, 1, 1]);
    await expect(hps.exportModel({ model: 'x', tables: [new Tensor(new Float32Array(3), [3])], dir: t.dir })).rejects.toMatchObject({ code: 'INVALID_TYPE' });
    const odd = createTable({ kind: 'dynamic', dim: 3, initializer: { kind: 'zeros' } });
    cleanups.push(() => odd.dispose());
    await expect(hps.exportModel({ model: 'x', tables: [dense, [s0, odd]], dir: t.dir })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      argument: 'options.tables[1]',
      message: expect.stringContaining('shard 0 has dim 2 and shard 1 dim 3'),
    });
  });
});
