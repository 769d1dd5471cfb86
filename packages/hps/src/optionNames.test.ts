// Every public function and constructor of hps that takes an options object refuses a misspelt
// name (INVALID_ARGUMENT naming `options.<name>`; ps.json keys have their own check, configKeys.ts),
// changes nothing then, and takes all its documented names at once.
import '@embedstack/cpu-backend';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createTable, SparseTensor, type Tensor } from '@embedstack/core';
import { describeOptionNames, type OptionNamesCase } from '@embedstack/core/testing';
import { afterAll, expect } from 'vitest';
import * as hps from './index.js';
import { psConfig, rowOf, tempDir, writeTable } from '../test/fixtures.js';

const tmp = tempDir('hps-opts-');
const servers: hps.HPS[] = [];
afterAll(async () => {
  await hps.shutdown();
  for (const s of servers) await s.close();
  tmp.cleanup();
});

const KEYS = [3n, 7n];
const config = psConfig([writeTable(join(tmp.dir, 't0'), KEYS, 2)], [2], { max_batch_size: 8 });
const configFile = join(tmp.dir, 'ps.json');
writeFileSync(configFile, JSON.stringify(config));
const keep = (s: unknown) => (servers.push(s as hps.HPS), s as hps.HPS);
const row = (k: bigint) => rowOf(k, 2);

/** A running HPS server (one for the file), for the per-call options. */
let server: hps.HPS | undefined;
const running = async () => (server ??= keep(await hps.HPS.create({ psConfig: config })));

/** A layer case: hps.init before (shut down first), the layer's options. */
function layerCase(cls: 'LookupLayer' | 'SparseLookupLayer', call: (l: hps.LookupLayer | hps.SparseLookupLayer) => Promise<Tensor<Float32Array>>, want: number[]): OptionNamesCase {
  const full = () => ({ modelName: 'm', tableId: 0, embVecSize: 2, embVecDtype: 'float32', psConfig: config, globalBatchSize: 8, name: 'layer' });
  return {
    label: `new ${cls}(options)`,
    argument: 'options',
    names: Object.keys(full()),
    full,
    reset: () => hps.shutdown(),
    call: (o) => (cls === 'LookupLayer' ? new hps.LookupLayer(o as never) : new hps.SparseLookupLayer(o as never)),
    check: async (l) => expect(Array.from((await call(l as never)).data)).toEqual(want),
  };
}

describeOptionNames(
  'hps: option names',
  [
    {
      label: 'HPS.create(options)',
      argument: 'options',
      names: ['psConfig', 'onProgress', 'backend', 'loadBatchSize', 'sharedL2'],
      full: () => ({ psConfig: config, onProgress: () => undefined, backend: 'cpu', loadBatchSize: 1, sharedL2: { pollIntervalMs: 500, leaseMs: 2000, followReloads: true } }),
      call: async (o) => keep(await hps.HPS.create(o as never)),
      check: async (s) => expect(Array.from((await (s as hps.HPS).lookup([7n], 'm', 0)).data as Float32Array)).toEqual(row(7n)),
    },
    {
      label: 'HPS.create({ sharedL2 })',
      argument: 'options.sharedL2',
      names: ['pollIntervalMs', 'leaseMs', 'followReloads'],
      full: () => ({ pollIntervalMs: 500, leaseMs: 2000, followReloads: false }),
      call: async (o) => keep(await hps.HPS.create({ psConfig: config, sharedL2: o as never })),
      check: async (s) => expect(Array.from((await (s as hps.HPS).lookup([3n], 'm', 0)).data as Float32Array)).toEqual(row(3n)),
    },
    { label: 'loadPsConfig(options)', argument: 'options', names: ['psConfigFile'], full: () => ({ psConfigFile: configFile }), call: (o) => hps.loadPsConfig(o), check: (c) => expect((c as hps.PsConfig).models[0]!.model).toBe('m') },
    {
      label: 'init(options)',
      argument: 'options',
      names: ['globalBatchSize', 'psConfigFile'],
      full: () => ({ globalBatchSize: 8, psConfigFile: configFile }),
      reset: () => hps.shutdown(),
      call: (o) => hps.init(o as never),
      check: async (s) => expect(Array.from((await (s as hps.HPS).lookup([3n], 'm', 0)).data as Float32Array)).toEqual(row(3n)),
    },
    { label: 'HPS.lookup(keys, model, table, options)', argument: 'options', names: ['deviceId'], full: () => ({ deviceId: 0 }), call: async (o) => (await running()).lookup([3n, 7n], 'm', 0, o), check: (t) => expect(Array.from((t as Tensor<Float32Array>).data)).toEqual([...row(3n), ...row(7n)]) },
    layerCase('LookupLayer', (l) => (l as hps.LookupLayer).call([7n]) as Promise<Tensor<Float32Array>>, row(7n)),
    layerCase('SparseLookupLayer', (l) => (l as hps.SparseLookupLayer).call(SparseTensor.fromNestedArray([[3n]])) as Promise<Tensor<Float32Array>>, row(3n)),
    {
      label: 'LookupLayer.call(ids, options)',
      argument: 'options',
      names: ['maxNorm'],
      full: () => ({ maxNorm: 1000 }),
      reset: () => hps.shutdown(),
      call: async (o) => new hps.LookupLayer({ modelName: 'm', tableId: 0, embVecSize: 2, psConfig: config }).call([3n], o),
      check: (t) => expect(Array.from((t as Tensor<Float32Array>).data)).toEqual(row(3n)),
    },
    {
      label: 'SparseLookupLayer.call(ids, weights, options)',
      argument: 'options',
      names: ['combiner', 'maxNorm'],
      full: () => ({ combiner: 'sum', maxNorm: 1000 }),
      reset: () => hps.shutdown(),
      call: async (o) => new hps.SparseLookupLayer({ modelName: 'm', tableId: 0, embVecSize: 2, psConfig: config }).call(SparseTensor.fromNestedArray([[3n, 7n]]), null, o as never),
      check: (t) => expect(Array.from((t as Tensor<Float32Array>).data)).toEqual(row(3n).map((v, c) => v + row(7n)[c]!)),
    },
    ...(() => {
      let n = 0;
      let out = '';
      const table = () => {
        const t = createTable({ dim: 2 });
        t.upsertSync([5n], Float32Array.from([1.5, 2.5]));
        return t;
      };
      const reset = () => {
        out = join(tmp.dir, `export${n++}`);
      };
      const state = () => readdirSync(tmp.dir).sort();
      const exported = (c: unknown) => expect((c as { models: { sparse_files: string[] }[] }).models[0]!.sparse_files).toEqual([join(out, 'em', 'named')]);
      return [
        {
          label: 'exportModel(options)',
          argument: 'options',
          names: ['model', 'tables', 'dir', 'psConfigFile', 'modelOptions', 'globalOptions', 'supportlonglong'],
          full: () => ({ model: 'em', tables: [{ table: table(), name: 'named' }], dir: out, psConfigFile: `${out}.json`, modelOptions: { max_batch_size: 4 }, globalOptions: {}, supportlonglong: true }),
          reset,
          state,
          call: (o: Record<string, unknown>) => hps.exportModel(o as never),
          check: exported,
        },
        {
          label: 'exportModel({ tables: [entry] })',
          argument: 'options.tables[0]',
          names: ['name'],
          required: ['table'],
          full: () => ({ table: table(), name: 'named' }),
          reset,
          state,
          call: (o: Record<string, unknown>) => hps.exportModel({ model: 'em', tables: [o as never], dir: out }),
          check: exported,
        },
      ];
    })(),
  ],
  60_000,
);
