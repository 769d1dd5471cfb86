import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as de from './index.js';
import { expectError, rowsOf, sortedKeys, uniqueName, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'tfra-store-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('HkvHashTableCreator', () => {
  it('has TFRA defaults and validates its options', async () => {
    const c = new de.HkvHashTableCreator();
    expect([c.initCapacity, c.maxCapacity, c.maxHbmForValues, c.evictStrategy, c.stepPerEpoch, c.genScoresFn]).toEqual([1 << 20, 1 << 20, 1 << 30, 'lru', 0, null]);
    await expectError(() => new de.HkvHashTableCreator({ initCapacity: 10, maxCapacity: 5 }), 'INVALID_ARGUMENT', 'initCapacity');
    await expectError(() => new de.HkvHashTableCreator({ evictStrategy: 'fifo' as 'lru' }), 'INVALID_ARGUMENT', 'evictStrategy');
    await expectError(() => new de.HkvHashTableCreator({ evictStrategy: 'customized' }), 'INVALID_ARGUMENT', 'genScoresFn');
    await expectError(() => new de.HkvHashTableCreator({ maxCapacty: 5 } as de.HkvHashTableCreatorOptions), 'INVALID_ARGUMENT', 'options.maxCapacty');
    await expectError(() => new de.HkvHashTableCreator([] as unknown as de.HkvHashTableCreatorOptions), 'INVALID_TYPE', 'options');
    await expectError(() => new de.HkvHashTableCreator(7 as unknown as de.HkvHashTableCreatorOptions), 'INVALID_TYPE', 'options');
  });

  it('lru: a full shard evicts its least recently used row', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName('hkv'), kvCreator: new de.HkvHashTableCreator({ initCapacity: 4, maxCapacity: 4 }) });
    for (const k of [1n, 2n, 3n, 4n]) await v.upsert([k], [Number(k)]);
    await v.lookup([1n]); // 1 becomes the most recently used
    await v.upsert([5n], [5]);
    expect(sortedKeys((await v.export())[0])).toEqual([1n, 3n, 4n, 5n]);
  });

  it('customized: scores from genScoresFn; a new key scoring below every resident is refused', async () => {
    const creator = new de.HkvHashTableCreator({
      initCapacity: 2,
      maxCapacity: 2,
      evictStrategy: 'customized',
      genScoresFn: (keys) => BigUint64Array.from(keys as BigInt64Array, (k) => BigInt.asUintN(64, k)),
    });
    const v = new de.Variable({ dim: 1, name: uniqueName('hkv'), kvCreator: creator });
    await v.upsert([10n, 20n], [1, 2]);
    await v.upsert([5n], [3]);
    expect(sortedKeys((await v.export())[0])).toEqual([10n, 20n]);
    await v.upsert([30n], [4]);
    expect(sortedKeys((await v.export())[0])).toEqual([20n, 30n]);
    // training inserts with the creator's scores too
    const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 }));
    const [, tw] = await de.embeddingLookup(v, [40n], { name: 't', returnTrainable: true });
    await opt.applyGradients([[[1], tw]]);
    expect(sortedKeys((await v.export())[0])).toEqual([30n, 40n]);
    expect(Array.from((await v.lookup([40n])).data)).toEqual([-1]);
  });

  it('epoch strategies follow the optimizer step (epoch = floor(step / stepPerEpoch))', () => {
    const c = new de.HkvHashTableCreator({ evictStrategy: 'epochLfu', stepPerEpoch: 10, initCapacity: 8, maxCapacity: 8 });
    expect([c.epochFor(1), c.epochFor(9), c.epochFor(10), c.epochFor(25)]).toEqual([0, 0, 1, 2]);
    expect(new de.HkvHashTableCreator({ initCapacity: 8, maxCapacity: 8 }).epochFor(25)).toBeNull();
  });
});

describe('saveToFileSystem / loadFromFileSystem', () => {
  it('several processes save into one directory; a loader takes every key, or only its rank', async () => {
    const dir = tmp();
    const name = uniqueName('procs');
    for (const rank of [0, 1]) {
      const v = new de.Variable({ dim: 2, name, devices: ['a', 'b'] });
      const keys = [0n, 1n, 2n, 3n, 4n, 5n].filter((k) => Number(k % 2n) === rank);
      await v.upsert(keys, Float32Array.from(keys.flatMap((k) => [Number(k), -Number(k)])));
      await v.saveToFileSystem(dir, { procSize: 2, procRank: rank });
    }
    const all = new de.Variable({ dim: 2, name, devices: ['a', 'b', 'c'] });
    await all.loadFromFileSystem(dir);
    expect(rowsOf((await all.lookup([0n, 1n, 2n, 3n, 4n, 5n])).data, 2)).toEqual([0, 1, 2, 3, 4, 5].map((k) => [k, -k]));
    const odd = new de.Variable({ dim: 2, name });
    await odd.loadFromFileSystem(dir, { procSize: 2, procRank: 1 });
    expect(sortedKeys((await odd.export())[0])).toEqual([1n, 3n, 5n]);
  });

  it('bpV2 variables save and restore their slot tables', async () => {
    const dir = tmp();
    const name = uniqueName('bp');
    const v = new de.Variable({ dim: 2, name, devices: ['a', 'b'], bpV2: true });
    const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.Adagrad({ learningRate: 0.1 }));
    const [, tw] = await de.embeddingLookup(v, [1n, 2n, 3n], { name: 't', returnTrainable: true });
    await opt.applyGradients([[[1, 2, 3, 4, 5, 6], tw]]);
    await v.saveToFileSystem(dir);
    const w = new de.Variable({ dim: 2, name, devices: ['a', 'b', 'c'], bpV2: true });
    const opt2 = de.DynamicEmbeddingOptimizer(new de.optimizers.Adagrad({ learningRate: 0.1 }));
    await w.loadFromFileSystem(dir, { optimizer: opt2 });
    const ids = [1n, 2n, 3n];
    expect(Array.from((await w.lookup(ids)).data)).toEqual(Array.from((await v.lookup(ids)).data));
    const [acc] = w.getSlotVariables(opt2);
    // accumulator = 0.1 + g²
    expect(rowsOf((await acc!.lookup(ids)).data, 2).flat()).toEqual([1, 2, 3, 4, 5, 6].map((g) => Math.fround(0.1 + g * g)));
  });

  it('refuses an empty directory, a bad rank and a checkpoint of another dim; nothing changes', async () => {
    const dir = tmp();
    const name = uniqueName('bad');
    const v = new de.Variable({ dim: 2, name });
    await v.upsert([1n], [1, 1]);
    await expectError(v.loadFromFileSystem(dir), 'NOT_FOUND', 'dir', name);
    await expectError(v.saveToFileSystem(dir, { procSize: 2, procRank: 2 }), 'INVALID_ARGUMENT', 'procRank');
    await expectError(v.saveToFileSystem(dir, { procsize: 2 } as de.SaveOptions), 'INVALID_ARGUMENT', 'options.procsize');
    await v.saveToFileSystem(dir);
    const other = new de.Variable({ dim: 3, name });
    await other.upsert([7n], [7, 7, 7]);
    await expectError(other.loadFromFileSystem(dir), 'INVALID_ARGUMENT', 'dir', 'dim 2');
    expect(sortedKeys((await other.export())[0])).toEqual([7n]);
  });
});

describe('slot variables', () => {
  it('are read views: upsert rewrites a slot of present keys, remove is unsupported', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName('sv') });
    const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.Momentum({ learningRate: 1, momentum: 0.5 }));
    const [, tw] = await de.embeddingLookup(v, [1n], { name: 't', returnTrainable: true });
    await opt.applyGradients([[[2], tw]]);
    const [m] = v.getSlotVariables(opt);
    expect(m!.name).toBe(`${v.name}/Momentum/momentum`);
    expect(Array.from((await m!.lookup([1n, 2n])).data)).toEqual([2, 0]);
    await m!.upsert([1n, 2n], [10, 20]);
    expect(Array.from((await m!.lookup([1n, 2n])).data)).toEqual([10, 0]);
    expect(await v.size()).toBe(1);
    await expectError(m!.remove([1n]), 'UNSUPPORTED', 'remove');
    // the next step uses the rewritten slot: m = 0.5*10 + 2 = 7; w = -2 - 7
    await de.embeddingLookup(v, [1n], { name: 't' });
    await opt.applyGradients([[[2], tw]]);
    expect(Array.from((await v.lookup([1n])).data)).toEqual([-9]);
  });
});
