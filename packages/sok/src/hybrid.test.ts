// 'hybrid' DynamicVariables: capped at maxCapacity over the devices, evicting by score.
import * as sok from '@embedstack/sok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, initDevices, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});
afterAll(() => sok.shutdown());

async function keysOf(v: sok.DynamicVariable): Promise<bigint[]> {
  const [keys] = await sok.exportVariable(v);
  return Array.from(keys as ArrayLike<bigint | number>, (k) => BigInt(k)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

describe('hybrid variables', () => {
  it('never exceed maxCapacity while training inserts keys (2 devices)', async () => {
    await initDevices(2);
    const v = new sok.DynamicVariable({ dimension: 2, varType: 'hybrid', maxCapacity: 8, initializer: 'ones' });
    for (let batch = 0; batch < 10; batch++) {
      const keys = Array.from({ length: 5 }, (_, i) => BigInt(batch * 5 + i));
      await sok.embeddingLookup(v, keys, { tape: new sok.GradientTape() });
      expect(await v.size()).toBeLessThanOrEqual(8);
    }
    expect(await v.size()).toBe(8);
  });

  it("'lru' evicts the least recently used row of the owning device", async () => {
    await initDevices(2);
    const v = new sok.DynamicVariable({ dimension: 1, varType: 'hybrid', maxCapacity: 8, initializer: 'zeros' });
    const train = (keys: bigint[]) => sok.embeddingLookup(v, keys, { tape: new sok.GradientTape() });
    // Device 0 (even keys, cap 4): 0, 2, 4, 6 in that order; device 1: 1, 3, 5, 7.
    for (const k of [0n, 2n, 4n, 6n, 1n, 3n, 5n, 7n]) await train([k]);
    await train([0n]); // 0 is now the most recent; 2 the least recent on device 0
    await train([8n]);
    expect(await keysOf(v)).toEqual([0n, 1n, 3n, 4n, 5n, 6n, 7n, 8n]);
    // Inference (training: false) never inserts, so never evicts.
    await sok.embeddingLookup(v, [10n, 12n], { training: false });
    expect(await keysOf(v)).toEqual([0n, 1n, 3n, 4n, 5n, 6n, 7n, 8n]);
  });

  it("'customized' evicts the lowest caller score and refuses a new key scored below every resident", async () => {
    await initDevices(2);
    const v = new sok.DynamicVariable({ dimension: 1, varType: 'hybrid', maxCapacity: 8, evictStrategy: 'customized' });
    await sok.assign(v, [0n, 2n, 4n, 6n], Float32Array.from([0, 2, 4, 6]), { scores: [10n, 40n, 20n, 30n] });
    await sok.assign(v, [8n], Float32Array.from([8]), { scores: [25n] });
    expect(await keysOf(v)).toEqual([2n, 4n, 6n, 8n]);
    await sok.assign(v, [10n], Float32Array.from([10]), { scores: [5n] });
    expect(await keysOf(v)).toEqual([2n, 4n, 6n, 8n]);
  });

  it('filterRatio trims a full device table to that fraction by score after a training lookup', async () => {
    await initDevices(1);
    const v = new sok.DynamicVariable({ dimension: 1, varType: 'hybrid', maxCapacity: 8, filterRatio: 0.5 });
    for (let k = 0n; k < 7n; k++) await sok.embeddingLookup(v, [k], { tape: new sok.GradientTape() });
    expect(await v.size()).toBe(7);
    await sok.embeddingLookup(v, [7n], { tape: new sok.GradientTape() });
    expect(await keysOf(v)).toEqual([4n, 5n, 6n, 7n]);
  });

  it('hbm grows without a cap; initCapacity is a hint', async () => {
    await initDevices(4);
    const v = new sok.DynamicVariable({ dimension: 1, initCapacity: 4 });
    await sok.embeddingLookup(v, Array.from({ length: 1000 }, (_, i) => BigInt(i * 7919 - 5000)), { tape: new sok.GradientTape() });
    expect(await v.size()).toBe(1000);
  });
});

describe("options of 'hybrid' tables on 'hbm' (review32c #8)", () => {
  it('refuses evictStrategy and filterRatio unless varType is hybrid, as maxCapacity', async () => {
    await initDevices(2);
    for (const varType of [undefined, 'hbm'] as const) {
      for (const [key, value] of [['evictStrategy', 'customized'], ['evictStrategy', 'lru'], ['filterRatio', 0.5], ['filterRatio', 1], ['maxCapacity', 8]] as const) {
        await expectError(() => new sok.DynamicVariable({ dimension: 1, varType, [key]: value }), 'INVALID_ARGUMENT', key, "'hbm'", "'hybrid'");
      }
    }
    // unset (undefined / null) is fine on 'hbm'; every option is taken on 'hybrid'
    const hbm = new sok.DynamicVariable({ dimension: 1, evictStrategy: null as never, filterRatio: null as never, maxCapacity: null as never });
    expect([hbm.evictStrategy, hbm.filterRatio, hbm.maxCapacity]).toEqual(['lru', 1, Infinity]);
    const hybrid = new sok.DynamicVariable({ dimension: 1, varType: 'hybrid', maxCapacity: 8, evictStrategy: 'customized', filterRatio: 0.5 });
    expect([hybrid.evictStrategy, hybrid.filterRatio, hybrid.maxCapacity]).toEqual(['customized', 0.5, 8]);
  });
});
