import { describe, expect, it } from 'vitest';
import { initializers } from '../../initializers.js';
import { optimizers } from '../../optimizers.js';
import { RaggedTensor } from '../../sparse.js';
import type { EmbeddingTable } from '../../table.js';
import { INT64_MAX, INT64_MIN, opsFor, snapshot, type SuiteContext } from '../harness.js';

const E32 = 1n << 32n;

async function scores(t: EmbeddingTable): Promise<Record<string, bigint>> {
  const out: Record<string, bigint> = {};
  for (const [k, r] of await snapshot(t)) out[k] = r.score;
  return out;
}

/** Presence read through export, which does not touch scores (find would). */
async function present(t: EmbeddingTable, keys: number[]): Promise<number[]> {
  const resident = await scores(t);
  return keys.map((k) => (String(k) in resident ? 1 : 0));
}

const s = (...xs: number[]) => BigUint64Array.from(xs.map(BigInt));

/** Score policies, the eviction rule of scores.ts on capped tables, and restrict. */
export function scoresSection(ctx: SuiteContext): void {
  for (const form of ctx.forms) {
    const ops = opsFor(form);
    const capped = (scorePolicy: 'lru' | 'lfu' | 'customized' | 'epochLru' | 'epochLfu' | 'timestamp' | 'frequency', maxCapacity = 4) =>
      ctx.make({ dim: 1, scorePolicy, maxCapacity, initCapacity: 2, initializer: initializers.constant(-1) });

    describe(`scores and eviction, ${form} form`, () => {
      it('lru: the score is the clock, advanced once per scored call; the least recently used row is evicted', async () => {
        const t = capped('lru');
        for (const k of [10, 20, 30, 40]) await ops.upsert(t, [k], [k]); // calls 1..4
        await ops.find(t, [10, 999]); // call 5 (999 is missing: not inserted)
        await ops.upsert(t, [50], [50]); // call 6: evicts 20
        expect(t.size()).toBe(4);
        expect(await scores(t)).toEqual({ '10': 5n, '30': 3n, '40': 4n, '50': 6n });
        await ops.lookupCombined(t, RaggedTensor.fromNestedArray([[30]])); // call 7: reads touch under lru
        const fi = await ops.findOrInsert(t, [60]); // call 8: evicts 40
        expect(Array.from(fi.exists)).toEqual([0]);
        expect(await scores(t)).toEqual({ '10': 5n, '30': 7n, '50': 6n, '60': 8n });
        await ops.assign(t, [10], [1]); // call 9
        expect((await scores(t))['10']).toBe(9n);
      });

      it('lfu: counts occurrences; a new key that ties the lowest residents replaces the largest of them; one below every resident is refused', async () => {
        const t = capped('lfu');
        for (const k of [1, 2, 3, 4]) await ops.upsert(t, [k], [k]);
        await ops.find(t, [1]);
        await ops.upsert(t, [5], [5]); // score 1 ties 2, 3, 4: 5 is admitted, 4 (the largest tied key) evicted
        expect(await scores(t)).toEqual({ '1': 2n, '2': 1n, '3': 1n, '5': 1n });
        const fi = await ops.findOrInsert(t, [6, 6]); // score 2 beats 1; among 2, 3, 5 the largest key loses
        expect(Array.from(fi.exists)).toEqual([0, 0]);
        expect(Array.from(fi.values)).toEqual([-1, -1]);
        expect(await scores(t)).toEqual({ '1': 2n, '2': 1n, '3': 1n, '6': 2n });
        await ops.upsert(t, [2, 3], [2, 3]); // every resident now scores 2
        const refused = await ops.findOrInsert(t, [7]); // score 1 < every resident: refused
        expect(Array.from(refused.exists)).toEqual([0]);
        expect(Array.from(refused.values)).toEqual([-1]);
        expect(t.size()).toBe(4);
        expect(await scores(t)).toEqual({ '1': 2n, '2': 2n, '3': 2n, '6': 2n });
      });

      it('customized: caller scores; a lower new key is refused by every write op; touched rows are never evicted', async () => {
        const t = capped('customized');
        await ops.upsert(t, [1, 2, 3, 4], [1, 2, 3, 4], { scores: s(10, 20, 30, 40) });
        await ops.upsert(t, [5], [5], { scores: s(5) });
        expect(t.size()).toBe(4);
        expect(await present(t, [5])).toEqual([0]);
        await ops.upsert(t, [6], [6], { scores: s(25) }); // evicts 1 (score 10)
        expect(await scores(t)).toEqual({ '2': 20n, '3': 30n, '4': 40n, '6': 25n });
        const fi = await ops.findOrInsert(t, [7], { scores: s(1) });
        expect(Array.from(fi.exists)).toEqual([0]);
        expect(Array.from(fi.values)).toEqual([-1]);
        await ops.accum(t, [7], [3], [false], { scores: s(2) });
        await ops.applyGradients(t, [2, 7], [1, 1], optimizers.sgd({ learningRate: 0.5 }), 1); // 7 scores 0: refused
        await ops.importRows(t, [7], [7], null, s(3));
        expect(await present(t, [7])).toEqual([0]);
        expect(await scores(t)).toEqual({ '2': 20n, '3': 30n, '4': 40n, '6': 25n });
        expect(Array.from((await ops.find(t, [2])).values)).toEqual([1.5]);
        await ops.upsert(t, [2], [2]); // no scores: unchanged
        expect((await scores(t))['2']).toBe(20n);
        await ops.upsert(t, [2, 8], [2, 8], { scores: s(8, 26) }); // 2 is touched (kept at 8); 6 (25) is evicted
        expect(await scores(t)).toEqual({ '2': 8n, '3': 30n, '4': 40n, '8': 26n });
        await ops.upsert(t, [9, 9], [1, 2], { scores: s(1, 50) }); // the last occurrence's score counts
        expect(await scores(t)).toEqual({ '3': 30n, '4': 40n, '8': 26n, '9': 50n });
        expect(Array.from((await ops.find(t, [9])).values)).toEqual([2]);
      });

      it('customized ties: new keys are kept first (as HierarchicalKV admits them), then smaller keys', async () => {
        const t = capped('customized', 2);
        await ops.upsert(t, [1, 2], [1, 2], { scores: s(5, 5) });
        await ops.upsert(t, [9], [9], { scores: s(5) }); // ties 1 and 2: 9 admitted, the larger tied resident (2) evicted
        expect(await scores(t)).toEqual({ '1': 5n, '9': 5n });
        await ops.upsert(t, [-4], [1], { scores: s(4) }); // below every resident: refused
        expect(await present(t, [-4])).toEqual([0]);
        await ops.upsert(t, [7, 3, -6], [1, 1, 1], { scores: s(5, 5, 5) }); // five tie at 5, room for 2: new keys, smaller first
        expect(await scores(t)).toEqual({ '-6': 5n, '3': 5n });
        await ops.upsert(t, [3, 8], [3, 8], { scores: s(1, 5) }); // 3 is touched (kept at 1); 8 ties -6 and replaces it
        expect(await scores(t)).toEqual({ '3': 1n, '8': 5n });
      });

      it('epochLru: epoch * 2^32 + clock; a row from a later epoch outranks a new key of an earlier one', async () => {
        const t = capped('epochLru', 2);
        t.setEpoch(5);
        await ops.upsert(t, [1], [1]); // call 1
        await ops.upsert(t, [2], [2]); // call 2
        expect(await scores(t)).toEqual({ '1': 5n * E32 + 1n, '2': 5n * E32 + 2n });
        t.setEpoch(6);
        await ops.find(t, [1]); // call 3
        expect((await scores(t))['1']).toBe(6n * E32 + 3n);
        t.setEpoch(3);
        await ops.upsert(t, [3], [3]); // call 4: 3*2^32+4 loses to both residents
        expect(await present(t, [1, 2, 3])).toEqual([1, 1, 0]);
        t.setEpoch(7);
        await ops.upsert(t, [3], [3]); // call 5: evicts 2
        expect(await scores(t)).toEqual({ '1': 6n * E32 + 3n, '3': 7n * E32 + 5n });
      });

      it('epochLfu: epoch * 2^32 + count in this epoch, reset on a new epoch', async () => {
        const t = capped('epochLfu');
        t.setEpoch(1);
        await ops.upsert(t, [1, 1], [1, 1]);
        expect((await scores(t))['1']).toBe(E32 + 2n);
        await ops.find(t, [1]);
        expect((await scores(t))['1']).toBe(E32 + 3n);
        t.setEpoch(2);
        await ops.find(t, [1]);
        expect((await scores(t))['1']).toBe(2n * E32 + 1n);
        await ops.findOrInsert(t, [1, 1, 1, 2]);
        expect(await scores(t)).toEqual({ '1': 2n * E32 + 4n, '2': 2n * E32 + 1n });
      });

      it('timestamp: seconds of the last write; reads do not change it; explicit imported scores are kept', async () => {
        const t = capped('timestamp');
        const before = BigInt(Math.floor(Date.now() / 1000));
        await ops.upsert(t, [1], [1]);
        const after = BigInt(Math.floor(Date.now() / 1000));
        const s1 = (await scores(t))['1']!;
        expect(s1 >= before && s1 <= after).toBe(true);
        await ops.importRows(t, [2, 3, 4], [2, 3, 4], null, s(100, 101, 102));
        await ops.find(t, [2, 3]);
        await ops.lookupCombined(t, RaggedTensor.fromNestedArray([[2]]));
        expect(await scores(t)).toMatchObject({ '2': 100n, '3': 101n, '4': 102n });
        await ops.assign(t, [3], [3]);
        expect((await scores(t))['3']! >= before).toBe(true);
        await ops.upsert(t, [5], [5]); // evicts 2 (the oldest)
        expect(await present(t, [1, 2, 3, 4, 5])).toEqual([1, 0, 1, 1, 1]);
      });

      it('timestamp: a new key always enters a full table, even in the same second as every resident', async () => {
        const t = capped('timestamp', 2);
        await ops.upsert(t, [1, 2], [1, 2]);
        await ops.upsert(t, [3], [3]); // the same second as 1 and 2 (or a later one): 3 enters, the larger tied key goes
        const after = await scores(t);
        expect('3' in after).toBe(true);
        expect(t.size()).toBe(2);
        const fi = await ops.findOrInsert(t, [4]);
        expect(Array.from(fi.exists)).toEqual([0]);
        expect('4' in (await scores(t))).toBe(true);
      });

      it('frequency: +1 per write call in which the key appears; reads do not count', async () => {
        const t = capped('frequency', 10);
        await ops.upsert(t, [1], [1]);
        await ops.upsert(t, [1], [1]);
        await ops.upsert(t, [2, 2], [2, 2]);
        await ops.find(t, [1, 2]);
        expect(await scores(t)).toEqual({ '1': 2n, '2': 1n });
        await ops.findOrInsert(t, [1]);
        await ops.assign(t, [2, 2], [3, 3]);
        await ops.accum(t, [3], [1], [false]);
        expect(await scores(t)).toEqual({ '1': 3n, '2': 2n, '3': 1n });
      });

      it('uncapped tables never evict', async () => {
        const t = ctx.make({ dim: 1, initCapacity: 2 });
        for (let i = 0; i < 50; i++) await ops.upsert(t, [i], [i]);
        expect(t.size()).toBe(50);
      });

      it('restrict keeps the highest scores and returns how many rows it removed', async () => {
        const t = ctx.make({ dim: 1, scorePolicy: 'customized' });
        await ops.upsert(t, [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], { scores: s(3, 1, 4, 1, 5, 9) });
        expect(await ops.restrict(t, 10)).toBe(0);
        expect(await ops.restrict(t, 3)).toBe(3);
        expect(Object.keys(await scores(t)).sort()).toEqual(['3', '5', '6']);
        expect(t.size()).toBe(3);
        expect(await ops.restrict(t, 0)).toBe(3);
        expect(t.size()).toBe(0);
      });

      it('restrict ties keep the smaller signed keys', async () => {
        const t = ctx.make({ dim: 1, scorePolicy: 'customized' });
        await ops.upsert(t, [5n, -3n, 0n, INT64_MIN, INT64_MAX], [1, 2, 3, 4, 5], { scores: s(1, 1, 1, 1, 1) });
        expect(await ops.restrict(t, 2)).toBe(3);
        expect(Object.keys(await scores(t)).sort()).toEqual([String(-3n), String(INT64_MIN)].sort());
      });

      it('restrict under lru keeps the most recently used rows', async () => {
        const t = ctx.make({ dim: 1 });
        for (const k of [1, 2, 3, 4]) await ops.upsert(t, [k], [k]);
        await ops.find(t, [1]);
        expect(await ops.restrict(t, 2)).toBe(2);
        expect(await present(t, [1, 2, 3, 4])).toEqual([1, 0, 0, 1]);
      });
    });
  }
}
