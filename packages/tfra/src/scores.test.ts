import { beforeAll, describe, expect, it } from 'vitest';
import * as de from './index.js';
import { stateOf } from './variableState.js';
import { expectError, uniqueName, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});

/** Every shard's rows: keys, values, slots and scores, sorted by key. */
function shards(v: de.Variable): unknown[] {
  return stateOf(v)!.tables.map((t) => {
    const b = t.exportSync();
    const rows = Array.from(b.keys as ArrayLike<bigint>, (k, i) => ({
      key: String(k),
      values: Array.from(b.values.subarray(i * v.dim, (i + 1) * v.dim)),
      slots: b.slots.map((s) => Array.from(s.subarray(i * (s.length / b.keys.length), (i + 1) * (s.length / b.keys.length)))),
      score: String(b.scores[i]),
    }));
    return rows.sort((a, b) => Number(BigInt(a.key) - BigInt(b.key)));
  });
}

/** A 2-shard customized variable whose genScoresFn gives `bad(keys)` when it returns non-undefined, else key + 100. */
function variable(bad: (keys: BigInt64Array) => unknown): de.Variable {
  const genScoresFn = (keys: unknown): BigUint64Array => {
    const r = bad(keys as BigInt64Array);
    return (r ?? BigUint64Array.from(keys as BigInt64Array, (k) => BigInt(k) + 100n)) as BigUint64Array;
  };
  const kvCreator = new de.HkvHashTableCreator({ evictStrategy: 'customized', genScoresFn, initCapacity: 16, maxCapacity: 16 });
  return new de.Variable({ dim: 1, name: uniqueName('scores'), devices: ['a', 'b'], kvCreator });
}

describe("evictStrategy 'customized' on several shards: every shard's scores are checked before the first write", () => {
  // keys 0, 2 go to shard 0 and 1, 3 to shard 1; the result is bad only for shard 1's keys
  const shard1 = (r: unknown) => (keys: BigInt64Array) => (keys.includes(1n) || keys.includes(3n) ? r : undefined);
  const cases: [string, unknown, string, string][] = [
    ['a wrong length', new BigUint64Array(1), 'INVALID_ARGUMENT', '2 uint64 scores'],
    ['numbers', [1, 2], 'INVALID_TYPE', 'BigUint64Array or an array of bigint'],
    ['a negative score', [5n, -1n], 'INVALID_ARGUMENT', 'genScoresFn(keys)[1]'],
    ['a score above 2^64 - 1', [5n, 1n << 64n], 'INVALID_ARGUMENT', 'genScoresFn(keys)[1]'],
  ];
  for (const [what, result, code, fragment] of cases) {
    it(`${what}: upsert, upsertSync, accum and accumSync refuse it and change nothing`, async () => {
      const v = variable(shard1(result));
      v.upsertSync([0n, 2n], [1, 2]); // shard 0 only: fine
      const before = shards(v);
      expect(before).toEqual([
        [
          { key: '0', values: [1], slots: [], score: '100' },
          { key: '2', values: [2], slots: [], score: '102' },
        ],
        [],
      ]);
      const keys = [0n, 1n, 2n, 3n];
      await expectError(() => v.upsertSync(keys, [9, 9, 9, 9]), code, 'genScoresFn(keys)', fragment);
      expect(shards(v)).toEqual(before);
      await expectError(v.upsert(keys, [9, 9, 9, 9]), code, 'genScoresFn(keys)', fragment);
      expect(shards(v)).toEqual(before);
      const exists = [true, false, true, false];
      await expectError(() => v.accumSync(keys, [1, 0, 2, 0], [5, 5, 5, 5], exists), code, 'genScoresFn(keys)', fragment);
      expect(shards(v)).toEqual(before);
      await expectError(v.accum(keys, [1, 0, 2, 0], [5, 5, 5, 5], exists), code, 'genScoresFn(keys)', fragment);
      expect(shards(v)).toEqual(before);
    });
  }

  it('a genScoresFn that throws: a coded error naming it, with the cause', async () => {
    const v = variable(shard1(undefined));
    const boom = new Error('boom');
    const w = variable((keys) => {
      if (keys.includes(3n)) throw boom;
      return undefined;
    });
    await v.upsert([3n], [1]);
    const e = await expectError(w.upsert([0n, 3n], [1, 1]), 'INVALID_ARGUMENT', 'genScoresFn(keys)', 'boom');
    expect(e.cause).toBe(boom);
    expect(shards(w)).toEqual([[], []]);
  });

  it('the training write-back (fused slots and companion tables) checks every shard first: a refused step changes nothing', async () => {
    for (const bpV2 of [false, true]) {
      let bad = false;
      const v = variable((keys) => (bad && keys.includes(3n) ? [-1n] : undefined));
      const w = new de.Variable({ dim: 1, name: uniqueName('scores'), devices: ['a', 'b'], kvCreator: v.kvCreator, bpV2 });
      const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.Adagrad({ learningRate: 0.5 }));
      const [, tw] = await de.embeddingLookup(w, [0n, 3n], { name: 't', returnTrainable: true });
      await opt.applyGradients([[[1, 1], tw]]);
      await de.embeddingLookup(w, [0n, 3n], { name: 't', returnTrainable: true });
      await w.upsert([0n, 3n], [7, 7]); // written after the lookup: the step writes v0 back first
      const before = { rows: shards(w), slots: await Promise.all(w.getSlotVariables(opt).map((s) => s.export())), iterations: opt.iterations };
      bad = true;
      await expectError(opt.applyGradients([[[1, 1], tw]]), 'INVALID_ARGUMENT', 'genScoresFn(keys)');
      const after = { rows: shards(w), slots: await Promise.all(w.getSlotVariables(opt).map((s) => s.export())), iterations: opt.iterations };
      expect(after).toEqual(before);
    }
  });
});
