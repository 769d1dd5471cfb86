import { describe, expect, it } from 'vitest';
import type { KeyDtype } from '../../dtypes.js';
import { initializers } from '../../initializers.js';
import { optimizers } from '../../optimizers.js';
import { Tensor } from '../../tensor.js';
import { expectClose, opsFor, snapshot, specialKeys, type SuiteContext, valuesOf } from '../harness.js';

const INIT = [0.5, -1, 2];
const rep = (row: number[], n: number): number[] => Array.from({ length: n }, () => row).flat();

/** Every op on dynamic and static tables, both key dtypes, every API form the backend offers. */
export function basicOpsSection(ctx: SuiteContext): void {
  for (const form of ctx.forms) {
    const ops = opsFor(form);
    for (const keyDtype of ['int64', 'int32'] as KeyDtype[]) {
      const K = specialKeys(keyDtype) as (bigint | number)[];
      const key = (i: number) => [K[i]!] as bigint[];
      const keys = (...idx: number[]) => idx.map((i) => K[i]!) as bigint[];
      const dynamic = () => ctx.make({ dim: 3, keyDtype, initializer: initializers.row(INIT), initCapacity: 4 });

      describe(`dynamic table, ${keyDtype} keys, ${form} form`, () => {
        it('find on an empty table returns the initial row and never inserts', async () => {
          const t = dynamic();
          const r = await ops.find(t, K as bigint[]);
          expect(Array.from(r.values)).toEqual(rep(INIT, K.length));
          expect(Array.from(r.exists)).toEqual([0, 0, 0, 0, 0]);
          expect(t.size()).toBe(0);
        });

        it('upsert then find, special keys, duplicates: last write wins', async () => {
          const t = dynamic();
          const vals = K.flatMap((_, i) => [i, i + 0.5, -i]);
          await ops.upsert(t, [...K, K[0]!] as bigint[], [...vals, 9, 9, 9]);
          expect(t.size()).toBe(5);
          const r = await ops.find(t, keys(4, 3, 2, 1, 0));
          expect(Array.from(r.values)).toEqual([4, 4.5, -4, 3, 3.5, -3, 2, 2.5, -2, 1, 1.5, -1, 9, 9, 9]);
          expect(Array.from(r.exists)).toEqual([1, 1, 1, 1, 1]);
        });

        it('findOrInsert inserts missing keys with their initial value; exists reports the state before the call', async () => {
          const t = dynamic();
          await ops.upsert(t, key(1), [1, 2, 3]);
          const r = await ops.findOrInsert(t, keys(0, 1, 0, 2));
          expect(Array.from(r.values)).toEqual([...INIT, 1, 2, 3, ...INIT, ...INIT]);
          expect(Array.from(r.exists)).toEqual([0, 1, 0, 0]);
          expect(t.size()).toBe(3);
          const f = await ops.find(t, keys(0, 2));
          expect(Array.from(f.exists)).toEqual([1, 1]);
          expect(Array.from(f.values)).toEqual([...INIT, ...INIT]);
        });

        it('assign overwrites existing keys only (duplicates in order)', async () => {
          const t = dynamic();
          await ops.upsert(t, keys(0, 1), [1, 1, 1, 2, 2, 2]);
          await ops.assign(t, keys(0, 2, 0), [5, 5, 5, 6, 6, 6, 7, 7, 7]);
          expect(t.size()).toBe(2);
          const r = await ops.find(t, keys(0, 1, 2));
          expect(Array.from(r.values)).toEqual([7, 7, 7, 2, 2, 2, ...INIT]);
          expect(Array.from(r.exists)).toEqual([1, 1, 0]);
        });

        it('accum follows the bp_v2 rule, duplicates applied in order', async () => {
          const t = dynamic();
          await ops.upsert(t, keys(0), [10, 20, 30]);
          // K0 present: +1 (exists), no-op (!exists), +2 (exists)
          // K1 absent: no-op (exists), insert [5,5,5] (!exists), +[1,1,1] (exists), no-op (!exists)
          // K2 absent & exists only: never inserted
          await ops.accum(
            t,
            keys(0, 1, 0, 1, 2, 1, 0, 1),
            [1, 1, 1, 100, 100, 100, 7, 7, 7, 5, 5, 5, 3, 3, 3, 1, 1, 1, 2, 2, 2, 8, 8, 8],
            [true, true, false, false, true, true, true, false],
          );
          const r = await ops.find(t, keys(0, 1, 2));
          expect(Array.from(r.values)).toEqual([13, 23, 33, 6, 6, 6, ...INIT]);
          expect(Array.from(r.exists)).toEqual([1, 1, 0]);
          expect(t.size()).toBe(2);
        });

        it('remove returns the number of keys removed; missing keys and repeats are ignored', async () => {
          const t = dynamic();
          await ops.upsert(t, K as bigint[], new Float32Array(15).fill(1));
          const missing = keyDtype === 'int64' ? 12345n : 12345;
          expect(await ops.remove(t, [K[0], K[0], missing, K[3]] as bigint[])).toBe(2);
          expect(t.size()).toBe(3);
          const r = await ops.find(t, keys(0, 1, 3));
          expect(Array.from(r.exists)).toEqual([0, 1, 0]);
          expect(Array.from(r.values)).toEqual([...INIT, 1, 1, 1, ...INIT]);
          expect(await ops.remove(t, keys(0))).toBe(0);
        });

        it('clear empties the table, which stays usable', async () => {
          const t = dynamic();
          await ops.upsert(t, K as bigint[], new Float32Array(15).fill(1));
          await ops.clear(t);
          expect(t.size()).toBe(0);
          expect(Array.from((await ops.find(t, K as bigint[])).exists)).toEqual([0, 0, 0, 0, 0]);
          expect((await ops.export(t)).keys.length).toBe(0);
          await ops.upsert(t, key(2), [4, 5, 6]);
          expect(await valuesOf(ops, t, key(2))).toEqual([4, 5, 6]);
          expect(t.size()).toBe(1);
        });

        it('grows past initCapacity: size, capacity and memoryUsage', async () => {
          const t = dynamic();
          expect(t.capacity()).toBeGreaterThanOrEqual(1);
          const n = 3000;
          // Keys spread over the whole key space, plus keys equal modulo 2^32 / 2^16.
          const ks: (bigint | number)[] = [];
          for (let i = 0; i < n; i++) {
            if (keyDtype === 'int64') ks.push(i % 3 === 0 ? BigInt(i) << 32n : i % 3 === 1 ? -BigInt(i) * 7919n : BigInt.asIntN(64, BigInt(i) * 0x9e3779b97f4a7c15n));
            else ks.push(i % 2 === 0 ? (i << 16) | 0 : -i * 7919);
          }
          const vals = new Float32Array(n * 3);
          for (let i = 0; i < n * 3; i++) vals[i] = i * 0.25;
          for (let b = 0; b < 3; b++) {
            await ops.upsert(t, ks.slice(b * 1000, (b + 1) * 1000) as bigint[], vals.subarray(b * 3000, (b + 1) * 3000));
          }
          expect(t.size()).toBe(n);
          expect(t.capacity()).toBeGreaterThanOrEqual(n);
          expect(t.memoryUsage()).toBeGreaterThanOrEqual(n * 3 * 4);
          const r = await ops.find(t, ks as bigint[]);
          expect(r.exists.every((e) => e === 1)).toBe(true);
          expect(Array.from(r.values)).toEqual(Array.from(vals));
        });

        it('accepts every key form; an id Tensor keeps its shape', async () => {
          const t = dynamic();
          const small = [3, -4];
          await ops.upsert(t, Int32Array.from(small), [1, 1, 1, 2, 2, 2]);
          expect(await valuesOf(ops, t, small)).toEqual([1, 1, 1, 2, 2, 2]);
          expect(await valuesOf(ops, t, small.map(BigInt))).toEqual([1, 1, 1, 2, 2, 2]);
          expect(await valuesOf(ops, t, BigInt64Array.from(small.map(BigInt)))).toEqual([1, 1, 1, 2, 2, 2]);
          const ids = keyDtype === 'int64' ? new Tensor(BigInt64Array.from([5n, 6n, 3n, 5n]), [2, 2]) : new Tensor(Int32Array.from([5, 6, 3, 5]), [2, 2]);
          const vals = new Tensor(Float32Array.from({ length: 12 }, (_, i) => i), [2, 2, 3]);
          await ops.upsert(t, ids as Tensor<BigInt64Array>, vals);
          const r = await ops.find(t, ids as Tensor<BigInt64Array>);
          expect(Array.from(r.values)).toEqual([9, 10, 11, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        });
      });

      const V = 5;
      const table0 = Array.from({ length: V * 2 }, (_, i) => i / 4);
      const row0 = (r: number) => [table0[2 * r]!, table0[2 * r + 1]!];
      const idx = (...rows: number[]) => (keyDtype === 'int64' ? rows.map(BigInt) : rows) as bigint[];
      const staticTable = (withSlots = false) =>
        ctx.make({
          kind: 'static',
          dim: 2,
          vocabularySize: V,
          keyDtype,
          initializer: initializers.fromArray(table0),
          ...(withSlots ? { optimizer: optimizers.adagrad({ learningRate: 0.5 }) } : {}),
        });

      describe(`static table, ${keyDtype} keys, ${form} form`, () => {
        it('every row exists; find reads the initializer array by row index', async () => {
          const t = staticTable();
          expect(t.size()).toBe(V);
          expect(t.capacity()).toBe(V);
          expect(t.memoryUsage()).toBeGreaterThanOrEqual(V * 2 * 4);
          const r = await ops.find(t, idx(4, 0, 2, 4));
          expect(Array.from(r.values)).toEqual([...row0(4), ...row0(0), ...row0(2), ...row0(4)]);
          expect(Array.from(r.exists)).toEqual([1, 1, 1, 1]);
          const fi = await ops.findOrInsert(t, idx(1, 3));
          expect(Array.from(fi.values)).toEqual([...row0(1), ...row0(3)]);
          expect(Array.from(fi.exists)).toEqual([1, 1]);
          expect(t.size()).toBe(V);
        });

        it('upsert and assign overwrite rows, duplicates in order', async () => {
          const t = staticTable();
          await ops.upsert(t, idx(1, 1), [1, 2, 3, 4]);
          await ops.assign(t, idx(2, 0, 2), [5, 6, 7, 8, 9, 10]);
          expect(await valuesOf(ops, t, idx(0, 1, 2, 3))).toEqual([7, 8, 3, 4, 9, 10, ...row0(3)]);
        });

        it('accum adds where exists is true and is a no-op elsewhere (every row is present)', async () => {
          const t = staticTable();
          await ops.accum(t, idx(1, 1, 2), [1, 1, 10, 10, 100, 100], [true, true, false]);
          expect(await valuesOf(ops, t, idx(1, 2))).toEqual([row0(1)[0]! + 11, row0(1)[1]! + 11, ...row0(2)]);
        });

        it('remove resets rows (values and slots) to their initial values and counts distinct keys', async () => {
          const t = staticTable(true);
          const opt = optimizers.adagrad({ learningRate: 0.5 });
          await ops.applyGradients(t, idx(1, 3), [1, 1, 1, 1], opt, 1);
          expect((await valuesOf(ops, t, idx(1)))[0]).not.toBe(row0(1)[0]);
          expect(await ops.remove(t, idx(1, 1, 3))).toBe(2);
          expect(t.size()).toBe(V);
          expect(await valuesOf(ops, t, idx(1, 3))).toEqual([...row0(1), ...row0(3)]);
          const state = await snapshot(t);
          expectClose(state.get('1')!.slots[0]!, [0.1, 0.1], 'accumulators of row 1 after remove');
          expectClose(state.get('3')!.slots[0]!, [0.1, 0.1], 'accumulators of row 3 after remove');
        });

        it('clear resets every row', async () => {
          const t = staticTable();
          await ops.upsert(t, idx(0, 4), [9, 9, 9, 9]);
          await ops.clear(t);
          expect(t.size()).toBe(V);
          expect(await valuesOf(ops, t, idx(0, 1, 2, 3, 4))).toEqual(table0);
        });

        it('export lists rows 0..V-1 with zero scores; offset and limit page through them', async () => {
          const t = staticTable();
          const all = await ops.export(t);
          const order = Array.from(all.keys, Number);
          expect(order.slice().sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4]);
          order.forEach((r, i) => expect(Array.from(all.values.subarray(2 * i, 2 * i + 2))).toEqual(row0(r)));
          expect(Array.from(all.scores)).toEqual([0n, 0n, 0n, 0n, 0n]);
          const p1 = await ops.export(t, { offset: 0, limit: 3 });
          const p2 = await ops.export(t, { offset: 3, limit: 3 });
          expect([...Array.from(p1.keys, Number), ...Array.from(p2.keys, Number)].sort()).toEqual([0, 1, 2, 3, 4]);
          expect((await ops.export(t, { offset: 7 })).keys.length).toBe(0);
          expect(all.keys).toBeInstanceOf(keyDtype === 'int64' ? BigInt64Array : Int32Array);
        });

        it('a function initializer is called once with [vocabularySize, dim]', async () => {
          const shapes: number[][] = [];
          const t = ctx.make({
            kind: 'static',
            dim: 2,
            vocabularySize: 3,
            keyDtype,
            initializer: initializers.fromFunction((shape) => {
              shapes.push(shape);
              return [1, 2, 3, 4, 5, 6];
            }),
          });
          expect(shapes).toEqual([[3, 2]]);
          expect(await valuesOf(ops, t, idx(2, 0))).toEqual([5, 6, 1, 2]);
        });
      });
    }
  }
}
