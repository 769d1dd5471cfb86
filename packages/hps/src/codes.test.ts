// review32c #9 and the error-code table: a wrong JS type is INVALID_TYPE, a right type with a bad
// value INVALID_ARGUMENT / OUT_OF_RANGE, and the message names the argument the caller wrote.
import { join } from 'node:path';
import { SparseTensor } from '@embedstack/core';
import { afterEach, describe, expect, it } from 'vitest';
import * as hps from './index.js';
import { psConfig, spreadKeys, tempDir, writeTable } from '../test/fixtures.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const keys = spreadKeys(20);

async function server(model: Record<string, unknown> = {}) {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const config = psConfig([writeTable(join(t.dir, 't0'), keys, 2)], [2], { deployed_device_list: [0, 1], ...model });
  const s = await hps.HPS.create({ psConfig: config });
  cleanups.push(() => s.close());
  return { s, config };
}

describe('hps error codes', () => {
  it("server.lookup: deviceId '0' is INVALID_TYPE; a number not deployed is OUT_OF_RANGE", async () => {
    const { s } = await server();
    await expect(s.lookup([keys[0]!], 'm', 0, { deviceId: '0' as never })).rejects.toMatchObject({
      code: 'INVALID_TYPE',
      argument: 'options.deviceId',
      message: expect.stringContaining('received "0"'),
    });
    await expect(s.lookup([keys[0]!], 'm', 0, { deviceId: 5 })).rejects.toMatchObject({ code: 'OUT_OF_RANGE', argument: 'options.deviceId' });
    expect(s.stats('m', 0).l1).toEqual({ hits: 0, misses: 0, hitRate: 0 });
  });

  it('SparseLookupLayer.call: int64 weights name spWeights (INVALID_TYPE)', async () => {
    const { config } = await server();
    const layer = new hps.SparseLookupLayer({ modelName: 'm', tableId: 0, embVecSize: 2, psConfig: config });
    const ids = new SparseTensor([[0, 0], [1, 0]], BigInt64Array.of(keys[0]!, keys[1]!), [2, 1]);
    const w = new SparseTensor([[0, 0], [1, 0]], BigInt64Array.of(1n, 2n), [2, 1]);
    await expect(layer.call(ids, w as never)).rejects.toMatchObject({ code: 'INVALID_TYPE', argument: 'spWeights', message: expect.stringContaining('float32 weights') });
  });

  it('SparseLookupLayer.call: weights at other indices than the ids are SHAPE_MISMATCH saying where they differ', async () => {
    const { config } = await server();
    const layer = new hps.SparseLookupLayer({ modelName: 'm', tableId: 0, embVecSize: 2, psConfig: config });
    const ids = new SparseTensor([[0, 0], [1, 0]], BigInt64Array.of(keys[0]!, keys[1]!), [2, 2]);
    const w = new SparseTensor([[0, 0], [1, 1]], Float32Array.of(1, 2), [2, 2]);
    await expect(layer.call(ids, w)).rejects.toMatchObject({
      code: 'SHAPE_MISMATCH',
      argument: 'spWeights',
      message: "Expected spWeights to have the indices and dense shape of spIds but received entry 1 at [1, 1] where the ids' is at [1, 0]",
    });
  });

  it("layer options: tableId '0' and embVecSize '2' are INVALID_TYPE, -1 and 0 INVALID_ARGUMENT", async () => {
    const make = (o: object) => () => new hps.LookupLayer({ modelName: 'm', tableId: 0, embVecSize: 2, ...o } as never);
    expect(make({ tableId: '0' })).toThrow(expect.objectContaining({ code: 'INVALID_TYPE', argument: 'options.tableId' }));
    expect(make({ tableId: -1 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'options.tableId' }));
    expect(make({ embVecSize: '2' })).toThrow(expect.objectContaining({ code: 'INVALID_TYPE', argument: 'options.embVecSize' }));
    expect(make({ embVecSize: 0 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'options.embVecSize' }));
  });

  it('ps config numbers: a string is INVALID_TYPE, a number out of range INVALID_ARGUMENT', async () => {
    const cfg = (model: Record<string, unknown>) => psConfig(['/nowhere'], [2], model);
    await expect(hps.HPS.create({ psConfig: cfg({ max_batch_size: '4' }) })).rejects.toMatchObject({ code: 'INVALID_TYPE', argument: 'models[0].max_batch_size' });
    await expect(hps.HPS.create({ psConfig: cfg({ max_batch_size: 0 }) })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'models[0].max_batch_size' });
    await expect(hps.HPS.create({ psConfig: cfg({ gpucacheper: '0.5' }) })).rejects.toMatchObject({ code: 'INVALID_TYPE', argument: 'models[0].gpucacheper' });
  });
});
