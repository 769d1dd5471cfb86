// review32c #7, review32b #13: exportModel checks every option before it writes anything.
import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createTable, Tensor } from '@embedstack/core';
import { afterEach, describe, expect, it } from 'vitest';
// createTable below uses the default backend: register the CPU backend whichever test runs first (or alone)
import '@embedstack/cpu-backend';
import * as hps from './index.js';
import { psConfig, rowOf, tempDir, tree, writeTable } from '../test/fixtures.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('exportModel refuses bad options before writing anything', () => {
  async function setup() {
    const t = tempDir();
    cleanups.push(t.cleanup);
    // An earlier export of model m with one table emb = [[1, 1]] at key 0, and a ps.json.
    await hps.exportModel({ model: 'm', tables: [{ table: new Tensor(Float32Array.of(1, 1), [1, 2]), name: 'emb' }], dir: t.dir, psConfigFile: join(t.dir, 'ps.json') });
    const a = new Tensor(Float32Array.of(2, 2), [1, 2]);
    const b = new Tensor(Float32Array.of(3, 3, 4, 4), [2, 2]);
    return { dir: t.dir, a, b, before: tree(t.dir) };
  }

  it('duplicate table names', async () => {
    const { dir, a, b, before } = await setup();
    await expect(hps.exportModel({ model: 'm', tables: [{ table: a, name: 'emb' }, { table: b, name: 'emb' }], dir })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      argument: 'options.tables[1].name',
      message: expect.stringContaining('tables 0 and 1 are both named "emb"'),
    });
    // a bare table's default name counts too
    await expect(hps.exportModel({ model: 'm', tables: [a, { table: b, name: 'sparse_embedding0' }], dir })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(tree(dir)).toEqual(before);
  });

  it('a misspelled modelOptions or globalOptions key, or a bad value', async () => {
    const { dir, a, before } = await setup();
    const run = (extra: object) => hps.exportModel({ model: 'm', tables: [{ table: a, name: 'emb' }], dir, psConfigFile: join(dir, 'ps.json'), ...extra });
    await expect(run({ modelOptions: { max_batch_sise: 4 } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      argument: 'options.modelOptions',
      message: expect.stringContaining('max_batch_size'),
    });
    await expect(run({ modelOptions: { gpucacheper: 2 } })).rejects.toMatchObject({ argument: 'options.modelOptions', message: expect.stringContaining('gpucacheper') });
    await expect(run({ globalOptions: { persistant_db: {} } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      argument: 'options.globalOptions',
      message: expect.stringContaining('persistent_db'),
    });
    expect(tree(dir)).toEqual(before);
  });

  it('a disposed table, or a disposed shard of one: DISPOSED, and no <dir>/<model> is created', async () => {
    const live = () => {
      const t = createTable({ kind: 'dynamic', dim: 2, initializer: { kind: 'zeros' } });
      cleanups.push(() => t.dispose());
      return t;
    };
    const disposed = live();
    disposed.dispose();
    const shards = [live(), live()];
    shards[1]!.dispose();
    for (const [table, message] of [
      [disposed, `Expected options.tables[0] to be a live (not disposed) EmbeddingTable but received disposed table "${disposed.name}"`],
      [shards, `Expected shard 1 of options.tables[0] to be a live (not disposed) EmbeddingTable but received disposed table "${shards[1]!.name}"`],
    ] as const) {
      // into a fresh dir: nothing at all is created
      const t = tempDir();
      cleanups.push(t.cleanup);
      const psConfigFile = join(t.dir, 'ps.json');
      await expect(hps.exportModel({ model: 'm', dir: t.dir, tables: [{ table, name: 'emb' }], psConfigFile })).rejects.toMatchObject({
        name: 'DisposedError',
        code: 'DISPOSED',
        argument: 'options.tables[0]',
        message,
      });
      expect(readdirSync(t.dir)).toEqual([]);
      // over an earlier export: it stays as it was
      const { dir, a, before } = await setup();
      await expect(hps.exportModel({ model: 'm', dir, tables: [{ table: a, name: 'emb' }, { table, name: 'emb2' }], psConfigFile: join(dir, 'ps.json') })).rejects.toMatchObject({
        code: 'DISPOSED',
        argument: 'options.tables[1]',
      });
      expect(tree(dir)).toEqual(before);
    }
  });

  it('an unknown backend for the temporary table of a tensor (EMBEDSTACK_BACKEND): NOT_FOUND, and no <dir>/<model> is created', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const saved = process.env.EMBEDSTACK_BACKEND;
    process.env.EMBEDSTACK_BACKEND = 'bogus';
    try {
      await expect(hps.exportModel({ model: 'm', dir: t.dir, tables: [{ table: new Tensor(Float32Array.of(1, 2), [1, 2]), name: 'emb' }] })).rejects.toMatchObject({
        code: 'NOT_FOUND',
        message: expect.stringContaining('but received "bogus"'),
      });
    } finally {
      if (saved === undefined) delete process.env.EMBEDSTACK_BACKEND;
      else process.env.EMBEDSTACK_BACKEND = saved;
    }
    expect(readdirSync(t.dir)).toEqual([]);
  });

  it('a psConfigFile that is not a path', async () => {
    const { dir, a, before } = await setup();
    for (const psConfigFile of [42, '', {}]) {
      await expect(hps.exportModel({ model: 'm', tables: [{ table: a, name: 'emb' }], dir, psConfigFile: psConfigFile as never })).rejects.toMatchObject({
        code: 'INVALID_TYPE',
        argument: 'options.psConfigFile',
      });
    }
    expect(tree(dir)).toEqual(before);
  });

  it('a psConfigFile that cannot be written commits nothing: the previous export stays live', async () => {
    const { dir, a, before } = await setup();
    const psConfigFile = join(dir, 'missing', 'ps.json'); // its folder does not exist
    const err: unknown = await hps.exportModel({ model: 'm', tables: [{ table: a, name: 'emb' }], dir, psConfigFile }).catch((e: unknown) => e);
    expect(tree(dir)).toEqual(before); // no new ckpt, CURRENT unchanged
    expect(err).toMatchObject({ code: 'IO_ERROR', message: expect.stringContaining('nothing was exported: the previous version') });
    const server = await hps.HPS.create({ psConfigFile: join(dir, 'ps.json') });
    cleanups.push(() => server.close());
    expect(Array.from((await server.lookup([0n], 'm', 0)).data as Float32Array)).toEqual([1, 1]);
  });

  it('a valid export replaces the model and writes a ps.json that HPS serves', async () => {
    const { dir, a, b } = await setup();
    mkdirSync(join(dir, 'other'));
    writeFileSync(join(dir, 'other', 'keep'), 'x');
    const table = createTable({ kind: 'dynamic', dim: 2, initializer: { kind: 'zeros' } });
    cleanups.push(() => table.dispose());
    await table.upsert([7n], Float32Array.of(5, 6));
    const config = await hps.exportModel({ model: 'm', tables: [{ table: a, name: 'emb' }, { table: b, name: 'emb2' }, table], dir, psConfigFile: join(dir, 'ps.json'), modelOptions: { max_batch_size: 8 } });
    expect(JSON.parse(readFileSync(join(dir, 'ps.json'), 'utf8'))).toEqual(config);
    expect(readdirSync(dir).sort()).toEqual(['m', 'other', 'ps.json']);
    const server = await hps.HPS.create({ psConfigFile: join(dir, 'ps.json') });
    cleanups.push(() => server.close());
    expect(Array.from((await server.lookup([0n], 'm', 0)).data as Float32Array)).toEqual([2, 2]);
    expect(Array.from((await server.lookup([1n, 0n], 'm', 1)).data as Float32Array)).toEqual([4, 4, 3, 3]);
    expect(Array.from((await server.lookup([7n], 'm', 2)).data as Float32Array)).toEqual([5, 6]);
  });
});

describe('an export made before the versioned layout (flat <dir>/<model>/<table>, no CURRENT)', () => {
  it('is served as it is; the first versioned export takes over and leaves the flat folder untouched', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    // what exportModel wrote before ckpt-N/CURRENT: the table folder right under <dir>/<model>, and a
    // ps config naming it (written here byte by byte, independent of the code under test)
    const flat = writeTable(join(t.dir, 'm', 'emb'), [0n, 5n], 2);
    const oldConfig = psConfig([flat], [2], { embedding_table_names: ['emb'] });
    const flatBytes = tree(flat);
    const before = await hps.HPS.create({ psConfig: oldConfig });
    cleanups.push(() => before.close());
    expect(Array.from((await before.lookup([5n, 0n, 9n], 'm', 0)).data as Float32Array)).toEqual([...rowOf(5n, 2), ...rowOf(0n, 2), -1, -1]);
    // the first versioned export of model m into the same dir
    const config = await hps.exportModel({ model: 'm', tables: [{ table: new Tensor(Float32Array.of(7, 8), [1, 2]), name: 'emb' }], dir: t.dir });
    expect((config.models as { sparse_files: string[] }[])[0]!.sparse_files).toEqual([flat]);
    expect(readdirSync(join(t.dir, 'm')).sort()).toEqual(['CURRENT', expect.stringMatching(/^ckpt-\d{12}$/), 'emb']);
    expect(tree(flat)).toEqual(flatBytes); // left as it was (a HugeCTR server may still read it)
    // the old config and the new one now both serve the new export (CURRENT wins over the flat folder)
    for (const [psConfig, dflt] of [[oldConfig, -1], [config, 0]] as const) {
      const after = await hps.HPS.create({ psConfig });
      cleanups.push(() => after.close());
      expect(Array.from((await after.lookup([0n, 5n], 'm', 0)).data as Float32Array)).toEqual([7, 8, dflt, dflt]);
    }
  });
});
