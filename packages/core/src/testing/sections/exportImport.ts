import { describe, expect, it } from 'vitest';
import type { KeyDtype } from '../../dtypes.js';
import { initializers } from '../../initializers.js';
import { optimizers } from '../../optimizers.js';
import { addBatch, expectClose, expectSameState, opsFor, type RowState, snapshot, specialKeys, type SuiteContext } from '../harness.js';

/** export (offset/limit, exportBatches) compared as sets, and importRows round trips with slots and scores. */
export function exportImportSection(ctx: SuiteContext): void {
  const opt = optimizers.adagrad({ learningRate: 0.1 });
  for (const form of ctx.forms) {
    const ops = opsFor(form);
    for (const keyDtype of ['int64', 'int32'] as KeyDtype[]) {
      const K = [...specialKeys(keyDtype), ...(keyDtype === 'int64' ? [7n, -8n, 9n, 10n, 11n] : [7, -8, 9, 10, 11])] as bigint[];
      const filled = async (scorePolicy: 'lru' | 'lfu' | 'customized' = 'lfu') => {
        const t = ctx.make({ dim: 2, keyDtype, optimizer: opt, scorePolicy, initializer: initializers.uniform(-1, 1), seed: 3 });
        await ops.findOrInsert(t, K);
        await ops.applyGradients(t, [K[0]!, K[3]!, K[0]!, K[9]!], [1, -1, 0.5, 0.5, 2, 0, -3, 1], opt, 1);
        await ops.find(t, K.slice(0, 4));
        return t;
      };

      describe(`export and import, ${keyDtype} keys, ${form} form`, () => {
        it('offset/limit pages cover every row exactly once', async () => {
          const t = await filled();
          const full = await snapshot(t);
          expect(full.size).toBe(10);
          const paged = new Map<string, RowState>();
          const sizes: number[] = [];
          for (let offset = 0; offset < 12; offset += 3) {
            const b = await ops.export(t, { offset, limit: 3 });
            sizes.push(b.keys.length);
            expect(b.values.length).toBe(b.keys.length * 2);
            expect(b.scores.length).toBe(b.keys.length);
            expect(b.slots.map((s) => s.length)).toEqual([b.keys.length * 2]);
            addBatch(paged, b, 2, [2]);
          }
          expect(sizes).toEqual([3, 3, 3, 1]);
          expectSameState(paged, full, 'paged export');
          expect((await ops.export(t, { offset: 10 })).keys.length).toBe(0);
          expect((await ops.export(t, { offset: 1000, limit: 5 })).keys.length).toBe(0);
          expect((await ops.export(t, { limit: 0 })).keys.length).toBe(0);
          const all = await ops.export(t);
          expect(all.keys).toBeInstanceOf(keyDtype === 'int64' ? BigInt64Array : Int32Array);
          expect(all.scores).toBeInstanceOf(BigUint64Array);
        });

        it('exportBatches yields batches of batchSize that together are the table', async () => {
          const t = await filled();
          const full = await snapshot(t);
          for (const [size, expected] of [[3, [3, 3, 3, 1]], [5, [5, 5]], [64, [10]]] as const) {
            const got = new Map<string, RowState>();
            const sizes: number[] = [];
            for await (const b of t.exportBatches(size)) {
              sizes.push(b.keys.length);
              addBatch(got, b, 2, [2]);
            }
            expect(sizes).toEqual(expected);
            expectSameState(got, full, `exportBatches(${size})`);
          }
        });

        it('an empty table exports empty arrays of the right types', async () => {
          const t = ctx.make({ dim: 2, keyDtype, optimizer: opt });
          const b = await ops.export(t);
          expect(b.keys.length).toBe(0);
          expect(b.keys).toBeInstanceOf(keyDtype === 'int64' ? BigInt64Array : Int32Array);
          expect(b.slots.length).toBe(1);
          const batches = [];
          for await (const x of t.exportBatches(4)) batches.push(x);
          expect(batches).toEqual([]);
        });

        it('importRows with slots and scores round-trips an export exactly', async () => {
          for (const policy of ['lfu', 'customized', 'lru'] as const) {
            const a = await filled(policy);
            const e = await ops.export(a);
            const b = ctx.make({ dim: 2, keyDtype, optimizer: opt, scorePolicy: policy });
            await ops.importRows(b, e.keys as BigInt64Array, e.values, e.slots, e.scores);
            expect(b.size()).toBe(a.size());
            expectSameState(await snapshot(b), await snapshot(a), `round trip (${policy})`);
          }
        });

        it('importRows without slots gives slot initial values; without scores, rows are scored as by upsert', async () => {
          const t = ctx.make({ dim: 2, keyDtype, optimizer: opt });
          await ops.applyGradients(t, K.slice(0, 1), [1, 1], opt, 1); // call 1
          await ops.importRows(t, K.slice(0, 3), [1, 2, 3, 4, 5, 6]); // call 2
          const st = await snapshot(t);
          expect(st.size).toBe(3);
          K.slice(0, 3).forEach((k, i) => {
            const r = st.get(String(k))!;
            expect(r.value).toEqual([2 * i + 1, 2 * i + 2]);
            expectClose(r.slots[0]!, [0.1, 0.1], `slots of ${k}`);
            expect(r.score).toBe(2n);
          });
        });

        it('importRows into a static table sets values and slots', async () => {
          const V = 4;
          const t = ctx.make({ kind: 'static', dim: 2, vocabularySize: V, keyDtype, optimizer: opt, initializer: initializers.ones() });
          await ops.importRows(t, [3, 1], [1, 2, 3, 4], [Float32Array.from([7, 8, 9, 10])]);
          const st = await snapshot(t);
          expect(st.get('3')!.value).toEqual([1, 2]);
          expect(st.get('1')!.value).toEqual([3, 4]);
          expect(st.get('3')!.slots[0]).toEqual([7, 8]);
          expect(st.get('0')!.value).toEqual([1, 1]);
          expectClose(st.get('0')!.slots[0]!, [0.1, 0.1]);
        });
      });
    }
  }
}
