import { describe, expect, it } from 'vitest';
import { LOOKUP_COMBINERS, type LookupCombiner } from '../../combiners.js';
import { initializers } from '../../initializers.js';
import { RaggedTensor, SparseTensor } from '../../sparse.js';
import { expectClose, opsFor, type SuiteContext } from '../harness.js';

const DIM = 3;
/** Known rows of keys 1..4 (key 4 has norm 13, key 2 norm 5). */
const ROWS: Record<number, number[]> = { 1: [1, 2, 3], 2: [0, 3, 4], 3: [-1, 0.5, 2], 4: [3, 4, 12] };
const INIT = [0.25, 0.5, -0.25];

/** Straightforward embedding bag: rows of ids with optional weights. */
function expectedBag(ids: number[][], combiner: LookupCombiner, weights?: number[][], maxNorm = 0, row = (k: number) => ROWS[k] ?? INIT): number[] {
  return ids.flatMap((r, i) => {
    const terms = r.map((k, j) => {
      const w = weights ? weights[i]![j]! : 1;
      let e = row(k);
      const norm = Math.hypot(...e);
      if (maxNorm > 0 && norm > maxNorm) e = e.map((x) => (x * maxNorm) / norm);
      return { w, we: e.map((x) => w * x) };
    });
    if (terms.length === 0) return [0, 0, 0];
    if (combiner === 'max' || combiner === 'min') {
      const pick = combiner === 'max' ? Math.max : Math.min;
      return [0, 1, 2].map((c) => pick(...terms.map((t) => t.we[c]!)));
    }
    const out = [0, 1, 2].map((c) => terms.reduce((a, t) => a + t.we[c]!, 0));
    const ws = terms.reduce((a, t) => a + t.w, 0);
    const ws2 = terms.reduce((a, t) => a + t.w * t.w, 0);
    const d = combiner === 'sum' ? 1 : combiner === 'mean' ? ws : Math.sqrt(ws2);
    return d === 0 ? [0, 0, 0] : out.map((x) => x / d);
  });
}

/** Embedding bags: every combiner, weights, maxNorm, empty rows, zero weight sums, sparse and ragged inputs. */
export function combinersSection(ctx: SuiteContext): void {
  for (const form of ctx.forms) {
    const ops = opsFor(form);
    for (const kind of ['dynamic', 'static'] as const) {
      describe(`lookupCombined on a ${kind} table, ${form} form`, () => {
        const make = async () => {
          const t =
            kind === 'static'
              ? ctx.make({ kind: 'static', dim: DIM, vocabularySize: 6, initializer: initializers.row(INIT) })
              : ctx.make({ dim: DIM, initializer: initializers.row(INIT) });
          await ops.upsert(t, [1, 2, 3, 4], Object.values(ROWS).flat());
          return t;
        };
        const ids = [[1, 2], [], [4, 4, 3], [2]];

        for (const combiner of LOOKUP_COMBINERS) {
          it(`${combiner}: ragged ids, duplicates, empty rows give zeros`, async () => {
            const t = await make();
            const out = await ops.lookupCombined(t, RaggedTensor.fromNestedArray(ids), { combiner });
            expectClose(out, expectedBag(ids, combiner), combiner);
          });

          it(`${combiner}: ragged weights`, async () => {
            const t = await make();
            const w = [[0.5, 2], [], [1, -3, 0.25], [4]];
            const out = await ops.lookupCombined(t, RaggedTensor.fromNestedArray(ids), {
              combiner,
              weights: RaggedTensor.fromNestedArray(w, { dtype: 'float32' }),
            });
            expectClose(out, expectedBag(ids, combiner, w), combiner);
          });

          it(`${combiner}: sparse ids and weights, entries out of row order, rank 3 segmented by the first index`, async () => {
            const t = await make();
            // rows: 0 -> [2 (w 1.5), 1 (w -0.5)]; 1 -> []; 2 -> [4 (w 2)]; in file order 2, 0, 0.
            const sp = new SparseTensor([[2, 0, 1], [0, 0, 0], [0, 1, 0]], [4, 2, 1], [3, 2, 2]);
            const sw = new SparseTensor([[2, 0, 1], [0, 0, 0], [0, 1, 0]], Float32Array.from([2, 1.5, -0.5]), [3, 2, 2]);
            const out = await ops.lookupCombined(t, sp, { combiner, weights: sw });
            expectClose(out, expectedBag([[2, 1], [], [4]], combiner, [[1.5, -0.5], [], [2]]), combiner);
          });

          it(`${combiner}: maxNorm clips each row before combining`, async () => {
            const t = await make();
            const out = await ops.lookupCombined(t, RaggedTensor.fromNestedArray(ids), { combiner, maxNorm: 4.5 });
            expectClose(out, expectedBag(ids, combiner, undefined, 4.5), combiner);
            // The clip applies to the row itself, before its weight.
            const w = [[0.5, 3], [], [0.1, 2, 1], [0.2]];
            const weighted = await ops.lookupCombined(t, RaggedTensor.fromNestedArray(ids), {
              combiner,
              maxNorm: 4.5,
              weights: RaggedTensor.fromNestedArray(w, { dtype: 'float32' }),
            });
            expectClose(weighted, expectedBag(ids, combiner, w, 4.5), `${combiner} weighted`);
          });
        }

        it('hand-computed values: mean of [1,2,3] and [0,3,4]; sqrtn with weights 3 and 4; maxNorm 6.5 halves key 4', async () => {
          const t = await make();
          const rt = RaggedTensor.fromNestedArray([[1, 2]]);
          expectClose(await ops.lookupCombined(t, rt, { combiner: 'mean' }), [0.5, 2.5, 3.5]);
          const w = RaggedTensor.fromNestedArray([[3, 4]], { dtype: 'float32' });
          expectClose(await ops.lookupCombined(t, rt, { combiner: 'sqrtn', weights: w }), [3 / 5, 18 / 5, 25 / 5]);
          expectClose(await ops.lookupCombined(t, RaggedTensor.fromNestedArray([[4]]), { combiner: 'sum', maxNorm: 6.5 }), [1.5, 2, 6]);
          expectClose(await ops.lookupCombined(t, RaggedTensor.fromNestedArray([[2]]), { combiner: 'sum', maxNorm: 6.5 }), [0, 3, 4]);
        });

        it('max / min: element-wise over the weighted rows, first entry kept on ties; no backward', async () => {
          const t = await make();
          const rt = RaggedTensor.fromNestedArray([[1, 2], [3], []]);
          expectClose(await ops.lookupCombined(t, rt, { combiner: 'max' }), [1, 3, 4, -1, 0.5, 2, 0, 0, 0]);
          expectClose(await ops.lookupCombined(t, rt, { combiner: 'min' }), [0, 2, 3, -1, 0.5, 2, 0, 0, 0]);
          const w = RaggedTensor.fromNestedArray([[-1, 2], [3], []], { dtype: 'float32' });
          expectClose(await ops.lookupCombined(t, rt, { combiner: 'max', weights: w }), [0, 6, 8, -3, 1.5, 6, 0, 0, 0]);
          const grads = new Float32Array(9);
          for (const combiner of ['max', 'min'] as const) {
            await expect(t.lookupCombinedBackward(rt, grads, { combiner: combiner as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
          }
        });

        it('the default combiner is mean', async () => {
          const t = await make();
          expectClose(await ops.lookupCombined(t, RaggedTensor.fromNestedArray([[1, 3]])), expectedBag([[1, 3]], 'mean'));
        });

        it('zero weight sums give zeros, never NaN (div-no-nan)', async () => {
          const t = await make();
          const rt = RaggedTensor.fromNestedArray([[1, 2], [3]]);
          const w = RaggedTensor.fromNestedArray([[1, -1], [0]], { dtype: 'float32' });
          expect(Array.from(await ops.lookupCombined(t, rt, { combiner: 'mean', weights: w }))).toEqual([0, 0, 0, 0, 0, 0]);
          expect(Array.from(await ops.lookupCombined(t, rt, { combiner: 'sqrtn', weights: RaggedTensor.fromNestedArray([[0, 0], [0]], { dtype: 'float32' }) }))).toEqual([0, 0, 0, 0, 0, 0]);
          expectClose(await ops.lookupCombined(t, rt, { combiner: 'sum', weights: w }), [1, -1, -1, 0, 0, 0]);
        });

        it('weights as a flat Float32Array; a bag with no rows; rows that are all empty', async () => {
          const t = await make();
          const out = await ops.lookupCombined(t, RaggedTensor.fromNestedArray([[1], [2, 3]]), { combiner: 'sum', weights: Float32Array.from([2, 1, 1]) });
          expectClose(out, expectedBag([[1], [2, 3]], 'sum', [[2], [1, 1]]));
          expect((await ops.lookupCombined(t, RaggedTensor.fromRowSplits(new BigInt64Array(0), [0]))).length).toBe(0);
          expect(Array.from(await ops.lookupCombined(t, RaggedTensor.fromNestedArray([[], []]), { combiner: 'sum' }))).toEqual([0, 0, 0, 0, 0, 0]);
        });

        if (kind === 'dynamic') {
          it('missing keys read their initial value and are not inserted; insertMissing inserts them', async () => {
            const t = await make();
            const rt = RaggedTensor.fromNestedArray([[1, 9], [9, -7]]);
            expectClose(await ops.lookupCombined(t, rt, { combiner: 'sum' }), expectedBag([[1, 9], [9, -7]], 'sum'));
            expect(t.size()).toBe(4);
            expectClose(await ops.lookupCombined(t, rt, { combiner: 'sum', insertMissing: true }), expectedBag([[1, 9], [9, -7]], 'sum'));
            expect(t.size()).toBe(6);
            const f = await ops.find(t, [9, -7]);
            expect(Array.from(f.exists)).toEqual([1, 1]);
            expectClose(f.values, [...INIT, ...INIT]);
          });
        }
      });
    }
  }
}
