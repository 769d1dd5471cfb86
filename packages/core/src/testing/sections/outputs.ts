import { describe, expect, it } from 'vitest';
import { initializers } from '../../initializers.js';
import { RaggedTensor } from '../../sparse.js';
import { expectClose, expectRejected, opsFor, type SuiteContext } from '../harness.js';

const DIM = 2;
const INIT = [0.5, -1];

/** Caller-provided output arrays (`out`): filled in place and returned, views at an offset, wrong arrays rejected. */
export function outputsSection(ctx: SuiteContext): void {
  for (const form of ctx.forms) {
    const ops = opsFor(form);
    for (const kind of ['dynamic', 'static'] as const) {
      describe(`caller-provided outputs on a ${kind} table, ${form} form`, () => {
        const make = async () => {
          const t =
            kind === 'static'
              ? ctx.make({ kind: 'static', dim: DIM, vocabularySize: 8, initializer: initializers.row(INIT) })
              : ctx.make({ dim: DIM, initializer: initializers.row(INIT) });
          await ops.upsert(t, [1, 2, 3], [1, 2, 3, 4, 5, 6]);
          return t;
        };

        it('find fills out.values / out.exists (views into larger arrays) and returns them; the rest is untouched', async () => {
          const t = await make();
          const big = new Float32Array(10).fill(7);
          const flags = new Uint8Array(5).fill(9);
          const out = { values: big.subarray(2, 8), exists: flags.subarray(1, 4) };
          const r = await ops.find(t, [3, 7, 1], { out });
          expect(r.values).toBe(out.values);
          expect(r.exists).toBe(out.exists);
          expect(Array.from(big)).toEqual([7, 7, 5, 6, ...INIT, 1, 2, 7, 7]);
          expect(Array.from(flags)).toEqual([9, 1, kind === 'static' ? 1 : 0, 1, 9]);
        });

        it('find with out.values only allocates exists; reused outputs are overwritten', async () => {
          const t = await make();
          const values = new Float32Array(4).fill(NaN);
          const r = await ops.find(t, [2, 1], { out: { values } });
          expect(r.values).toBe(values);
          expect(Array.from(r.exists)).toEqual([1, 1]);
          const again = await ops.find(t, [1, 2], { out: { values, exists: r.exists } });
          expect(Array.from(again.values)).toEqual([1, 2, 3, 4]);
        });

        it('findOrInsert fills out and inserts missing keys', async () => {
          const t = await make();
          const values = new Float32Array(4);
          const exists = new Uint8Array(2);
          const r = await ops.findOrInsert(t, [6, 2], { out: { values, exists } });
          expect(r.values).toBe(values);
          expect(Array.from(values)).toEqual([...INIT, 3, 4]);
          expect(Array.from(exists)).toEqual([kind === 'static' ? 1 : 0, 1]);
          if (kind === 'dynamic') expect(t.size()).toBe(4);
        });

        it('lookupCombined fills out (a view) and returns it', async () => {
          const t = await make();
          const big = new Float32Array(8).fill(-3);
          const out = big.subarray(1, 7);
          const r = await ops.lookupCombined(t, RaggedTensor.fromNestedArray([[1, 2], [], [3]]), { combiner: 'sum', out });
          expect(r).toBe(out);
          expect(Array.from(big)).toEqual([-3, 4, 6, 0, 0, 5, 6, -3]);
          const weights = RaggedTensor.fromNestedArray([[1, 3], [], [2]], { dtype: 'float32' });
          await ops.lookupCombined(t, RaggedTensor.fromNestedArray([[1, 2], [], [3]]), { combiner: 'mean', weights, out });
          expectClose(out, [2.5, 3.5, 0, 0, 5, 6]);
        });

        it('wrong outputs are rejected and change nothing', async () => {
          const t = await make();
          await expectRejected(t, () => ops.find(t, [1, 2], { out: { values: new Float32Array(3) } }), 'SHAPE_MISMATCH', 'out.values');
          await expectRejected(t, () => ops.find(t, [1], { out: { values: new Float64Array(2) as never } }), 'INVALID_TYPE', 'out.values');
          await expectRejected(t, () => ops.find(t, [1], { out: { values: new Float32Array(2), exists: new Uint8Array(2) } }), 'SHAPE_MISMATCH', 'out.exists');
          await expectRejected(t, () => ops.findOrInsert(t, [5], { out: { values: new Float32Array(1) } }), 'SHAPE_MISMATCH', 'out.values');
          await expectRejected(
            t,
            () => ops.lookupCombined(t, RaggedTensor.fromNestedArray([[1], [2]]), { out: new Float32Array(2), insertMissing: true }),
            'SHAPE_MISMATCH',
            'out',
          );
          await expectRejected(t, () => ops.lookupCombined(t, RaggedTensor.fromNestedArray([[1]]), { out: [0, 0] as never }), 'INVALID_TYPE', 'out');
        });
      });
    }
  }
}
