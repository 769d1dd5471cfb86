// The behaviours every kv creator must show: worked examples, training, restrict,
// save with 2 shards / load with 3. Used by behaviours.test.ts (in memory) and
// redis.test.ts (standalone and cluster).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import * as de from '../src/index.js';
import { BATCHES, DIM, expectClose, gradOf, INIT, type Kind, optimizerFor, PlainModel } from './plainModel.js';
import { rowsOf, sortedKeys, uniqueName } from './setup.js';

async function contents(v: de.AnyVariable): Promise<Map<bigint, number[]>> {
  const [keys, values] = await v.export();
  const rows = rowsOf(values.data, v.dim);
  return new Map(Array.from(keys as ArrayLike<bigint | number>, (k, i) => [BigInt(k), rows[i]!]));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One training step on `ids` with gradient 2*(e - target). */
async function step(v: de.AnyVariable, opt: de.Optimizer, ids: bigint[], name = 'emb'): Promise<void> {
  const [e, tw] = await de.embeddingLookup(v, ids, { name, returnTrainable: true });
  await opt.applyGradients([[Float32Array.from(gradOf(ids, rowsOf(e.data, v.dim)).flat()), tw]]);
}

export function describeBehaviours(label: string, creator: () => de.KVCreator): void {
  describe(`${label}: behaviours`, () => {
    const made: de.AnyVariable[] = [];
    const variable = (o: de.VariableOptions) => {
      const v = new de.Variable({ ...o, kvCreator: creator() });
      made.push(v);
      return v;
    };
    const dirs: string[] = [];
    afterAll(() => {
      for (const v of made) v.dispose();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    });

    it('worked example 1: upsert, remove, lookup, export', async () => {
      const v = variable({ dim: 2, initializer: [-1, -2], name: uniqueName(), devices: ['cpu:0', 'cpu:1'] });
      await v.upsert([0n, 1n, 2n, 3n], new Float32Array([0, 1, 2, 3, 4, 5, 6, 7]));
      expect(await v.size()).toBe(4);
      await v.remove([3n, 4n]);
      expect(await v.size()).toBe(3);
      const { values, exists } = await v.lookup([0n, 1n, 4n], { returnExists: true });
      expect(rowsOf(values.data, 2)).toEqual([[0, 1], [2, 3], [-1, -2]]);
      expect(exists).toEqual([true, true, false]);
      expect(sortedKeys((await v.export())[0])).toEqual([0n, 1n, 2n]);
      await v.clear();
      expect(await v.size()).toBe(0);
    });

    it('worked example 3: accum', async () => {
      const v = variable({ dim: 1, name: uniqueName() });
      await v.upsert([0n, 1n, 2n, 3n], [0, 1, 2, 3]);
      await v.upsert([100n], [99]);
      await v.remove([1n]);
      await v.accum([0n, 1n, 100n, 3n], [0, 1, 2, 3], [10, 11, 100, 13], [true, true, false, true]);
      expect(await contents(v)).toEqual(new Map([[0n, [10]], [2n, [2]], [3n, [13]], [100n, [99]]]));
    });

    it('worked example 4: two shards', async () => {
      const v = variable({ dim: 1, name: uniqueName(), devices: ['cpu:0', 'cpu:1'] });
      await v.upsert([0n, 1n, 2n, 3n, 4n], [0, 1, 2, 3, 4]);
      expect([await v.size(0), await v.size(1)]).toEqual([3, 2]);
      expect(rowsOf((await v.lookup([1n, 3n, 2n, 3n, 0n])).data, 1)).toEqual([[1], [3], [2], [3], [0]]);
    });

    const training: [Kind, boolean][] = [
      ['sgd', false],
      ['adam', false],
      ['adam', true],
      ['adagrad', true],
    ];
    for (const [kind, bpV2] of training) {
      it(`training with ${kind}${bpV2 ? ' and bpV2' : ''} matches the plain reimplementation`, async () => {
        const lr = 0.05;
        const v = variable({ dim: DIM, initializer: INIT, name: uniqueName(kind), devices: ['a', 'b'], bpV2 });
        const opt = de.DynamicEmbeddingOptimizer(optimizerFor(kind, lr));
        const ref = new PlainModel(kind, lr);
        for (const ids of BATCHES) {
          await step(v, opt, ids);
          ref.apply(ids, gradOf(ids, ref.lookup(ids)));
        }
        const got = await contents(v);
        expect(sortedKeys([...got.keys()])).toEqual(sortedKeys([...ref.rows.keys()]));
        for (const [k, r] of ref.rows) expectClose([got.get(k)!], [r.w], 1e-6, `row ${k}`);
        for (const [j, slot] of v.getSlotVariables(opt).entries()) {
          const ids = [...ref.rows.keys()];
          expectClose(rowsOf((await slot.lookup(ids)).data, DIM), ids.map((k) => ref.rows.get(k)!.s[j]!), 1e-6, slot.name);
        }
      });
    }

    it('timestamp restrict keeps the newest keys in the variable, its status and every slot', async () => {
      const v = variable({ dim: DIM, name: uniqueName('ts'), restrictPolicy: de.TimestampRestrictPolicy });
      const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.Adam({ learningRate: 0.01 }));
      await step(v, opt, [0n, 1n, 2n, 3n, 4n, 5n]);
      await sleep(1100);
      await step(v, opt, [4n, 5n, 6n, 7n, 8n]);
      expect(await v.size()).toBe(9);
      expect(await v.restrict(5, { trigger: 9 })).toBe(0); // size 9 is not > trigger 9
      expect(await v.size()).toBe(9);
      expect(await v.restrict(5)).toBe(4);
      const kept = [4n, 5n, 6n, 7n, 8n];
      expect(sortedKeys((await v.export())[0])).toEqual(kept);
      const policy = v.restrictPolicy as de.TimestampRestrictPolicy;
      expect(policy.status.name).toBe(`${v.name}/timestamp`);
      expect(sortedKeys((await policy.status.export())[0])).toEqual(kept);
      const slots = v.getSlotVariables(opt);
      expect(slots.length).toBe(2);
      for (const s of slots) {
        expect(sortedKeys((await s.export())[0])).toEqual(kept);
        expect((await s.lookup([0n, 4n], { returnExists: true })).exists).toEqual([false, true]);
      }
    });

    it('frequency restrict keeps the most frequent keys (a key counts once per step)', async () => {
      const v = variable({ dim: DIM, name: uniqueName('freq'), restrictPolicy: de.FrequencyRestrictPolicy, devices: ['a', 'b'] });
      const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.Adagrad({ learningRate: 0.01 }));
      for (let i = 0; i < 3; i++) await step(v, opt, [0n, 1n, 2n, 3n, 4n, 5n]);
      await step(v, opt, [4n, 5n, 6n, 7n, 8n, 9n]);
      await step(v, opt, [6n, 6n, 6n, 6n, 7n, 8n, 9n]);
      // counts: 0-3: 3, 4-5: 4, 6-9: 2
      const policy = v.restrictPolicy as de.FrequencyRestrictPolicy;
      expect(rowsOf((await policy.status.lookup([0n, 4n, 6n, 9n, 42n])).data, 1)).toEqual([[3], [4], [2], [2], [0]]);
      // two shards: each keeps floor(6 / 2) = 3 keys (even: 4, 0, 2; odd: 5, 1, 3)
      expect(await v.restrict(6)).toBe(4);
      const kept = [0n, 1n, 2n, 3n, 4n, 5n];
      expect(sortedKeys((await v.export())[0])).toEqual(kept);
      expect(sortedKeys((await policy.status.export())[0])).toEqual(kept);
      for (const s of v.getSlotVariables(opt)) expect(sortedKeys((await s.export())[0])).toEqual(kept);
    });

    it('save with 2 shards, load with 3: same lookups, slots and an upsert that does not clear', async () => {
      const name = uniqueName('ckpt');
      const dir = mkdtempSync(join(tmpdir(), 'tfra-ckpt-'));
      dirs.push(dir);
      const v2 = variable({ dim: DIM, initializer: INIT, name, devices: ['a', 'b'] });
      const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.Adam({ learningRate: 0.05 }));
      for (const ids of BATCHES) await step(v2, opt, ids);
      await v2.upsert([1000n, -1001n], new Float32Array(2 * DIM).fill(7));
      await v2.saveToFileSystem(dir);
      const v3 = variable({ dim: DIM, initializer: INIT, name, devices: ['a', 'b', 'c'] });
      await v3.upsert([5000n], [1, 2, 3]);
      const opt3 = de.DynamicEmbeddingOptimizer(new de.optimizers.Adam({ learningRate: 0.05 }));
      await v3.loadFromFileSystem(dir, { optimizer: opt3 });
      const before = await contents(v2);
      const after = await contents(v3);
      expect(after.size).toBe(before.size + 1);
      expect(after.get(5000n)).toEqual([1, 2, 3]);
      for (const [k, row] of before) expect(after.get(k), `key ${k}`).toEqual(row);
      // rows sit on the shard of the default partitioner for 3 shards
      const keys = [...before.keys()];
      const expectedSizes = [0, 1, 2].map((s) => keys.filter((k) => Number(((k % 3n) + 3n) % 3n) === s).length + (s === Number(5000n % 3n) ? 1 : 0));
      expect([await v3.size(0), await v3.size(1), await v3.size(2)]).toEqual(expectedSizes);
      const ids = [...before.keys()];
      const s2 = v2.getSlotVariables(opt);
      const s3 = v3.getSlotVariables(opt3);
      expect(s3.length).toBe(2);
      for (let j = 0; j < 2; j++) expect(rowsOf((await s3[j]!.lookup(ids)).data, DIM)).toEqual(rowsOf((await s2[j]!.lookup(ids)).data, DIM));
      // training continues from the loaded slots exactly as it would have on v2
      await step(v2, opt, [1n, 2n, 77n]);
      opt3.iterations = opt.iterations - 1;
      await step(v3, opt3, [1n, 2n, 77n]);
      expect(rowsOf((await v3.lookup([1n, 2n, 77n])).data, DIM)).toEqual(rowsOf((await v2.lookup([1n, 2n, 77n])).data, DIM));
    });
  });
}
