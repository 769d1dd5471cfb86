import { describe, expect, it } from 'vitest';
import type { Combiner } from '../../combiners.js';
import { initializers } from '../../initializers.js';
import { optimizers } from '../../optimizers.js';
import { RaggedTensor, SparseTensor } from '../../sparse.js';
import { expectClose, expectRejected, opsFor, type SuiteContext } from '../harness.js';
import { modelStep } from '../model.js';
import { DIM, denominator, entryGradient, INIT, summedGradients } from './shardModel.js';

/** Known rows of keys 1..4 (key 4 has norm 13, key 2 norm 5). */
const ROWS: Record<string, number[]> = { 1: [1, 2, 3], 2: [0, 3, 4], 3: [-1, 0.5, 2], 4: [3, 4, 12] };
const row = (k: number): number[] => ROWS[String(k)] ?? INIT;

/** The combiner's backward and the fused training step on whole (unsharded) tables. */
export function backwardSection(ctx: SuiteContext): void {
  for (const form of ctx.forms) {
    const ops = opsFor(form);
    for (const kind of ['dynamic', 'static'] as const) {
      describe(`lookupCombinedBackward / applyCombinedGradients on a ${kind} table, ${form} form`, () => {
        const make = async (optimizer = optimizers.sgd({ learningRate: 1 })) => {
          const t =
            kind === 'static'
              ? ctx.make({ kind: 'static', dim: DIM, vocabularySize: 8, initializer: initializers.row(INIT), optimizer })
              : ctx.make({ dim: DIM, initializer: initializers.row(INIT), optimizer });
          await ops.upsert(t, [1, 2, 3, 4], Object.values(ROWS).flat());
          return t;
        };
        const ids = [[1, 2, 1], [], [4, 3], [2], [3, 5]];
        const weights = [[0.5, 2, 1], [], [3, -1], [4], [1, -1]];
        const grads = [1, -2, 0.5, 9, 9, 9, -1, 1, 2, 0.25, 0.5, 1, 3, 2, 1];

        /** Expected [nnz * dim] in entry order. */
        const expected = (combiner: Combiner, w: number[][] | null, maxNorm: number) =>
          ids.flatMap((r, i) => {
            const ws = r.map((_, j) => (w ? w[i]![j]! : 1));
            const d = denominator(ws, combiner);
            return r.flatMap((k, j) => entryGradient(row(k), grads.slice(i * DIM, (i + 1) * DIM), ws[j]!, d, maxNorm));
          });

        for (const combiner of ['sum', 'mean', 'sqrtn'] as Combiner[]) {
          it(`${combiner}: each entry gets w_j / denom_r * g_r (weights, duplicates, empty rows, zero denominators)`, async () => {
            const t = await make();
            const bag = RaggedTensor.fromNestedArray(ids);
            expectClose(await ops.lookupCombinedBackward(t, bag, grads, { combiner }), expected(combiner, null, 0), `${combiner} unweighted`);
            const w = RaggedTensor.fromNestedArray(weights, { dtype: 'float32' });
            expectClose(await ops.lookupCombinedBackward(t, bag, grads, { combiner, weights: w }), expected(combiner, weights, 0), `${combiner} weighted`);
          });

          it(`${combiner}: with maxNorm, the gradient of clip_by_norm at each entry's row`, async () => {
            const t = await make();
            const w = RaggedTensor.fromNestedArray(weights, { dtype: 'float32' });
            const out = await ops.lookupCombinedBackward(t, RaggedTensor.fromNestedArray(ids), grads, { combiner, weights: w, maxNorm: 4.5 });
            expectClose(out, expected(combiner, weights, 4.5), `${combiner} maxNorm`, 1e-5, 1e-6);
          });
        }

        it('hand-computed: mean of [1, 2] with g = [2, 4, 6] gives [1, 2, 3] to each; sqrtn weights 3, 4 give 0.6 g and 0.8 g', async () => {
          const t = await make();
          const one = RaggedTensor.fromNestedArray([[1, 2]]);
          expect(Array.from(await ops.lookupCombinedBackward(t, one, [2, 4, 6], { combiner: 'mean' }))).toEqual([1, 2, 3, 1, 2, 3]);
          const w = RaggedTensor.fromNestedArray([[3, 4]], { dtype: 'float32' });
          expectClose(await ops.lookupCombinedBackward(t, one, [5, 10, -5], { combiner: 'sqrtn', weights: w }), [3, 6, -3, 4, 8, -4]);
        });

        it('an unsorted SparseTensor gets its gradients in its own entry order; out is filled and returned', async () => {
          const t = await make();
          // entries (in file order): row 1 key 3 (w 2), row 0 key 1 (w 1), row 0 key 2 (w 3)
          const sp = new SparseTensor([[1, 0], [0, 0], [0, 1]], [3, 1, 2], [2, 2]);
          const sw = new SparseTensor([[1, 0], [0, 0], [0, 1]], Float32Array.from([2, 1, 3]), [2, 2]);
          const out = new Float32Array(9).fill(NaN);
          const r = await ops.lookupCombinedBackward(t, sp, [4, 8, 12, 1, 1, 1], { combiner: 'mean', weights: sw, out });
          expect(r).toBe(out);
          expectClose(out, [1, 1, 1, 1, 2, 3, 3, 6, 9]);
        });

        it('applyCombinedGradients: one fused step with the summed per-entry gradients (adagrad, duplicates, a missing key)', async () => {
          const t = await make(optimizers.adagrad({ learningRate: 0.1, initialAccumulatorValue: 0.1 }));
          const w = RaggedTensor.fromNestedArray(weights, { dtype: 'float32' });
          await ops.applyCombinedGradients(t, RaggedTensor.fromNestedArray(ids), grads, optimizers.adagrad({ learningRate: 0.1, initialAccumulatorValue: 0.1 }), 1, {
            combiner: 'mean',
            weights: w,
          });
          const per = expected('mean', weights, 0);
          const flat = ids.flat().map(BigInt);
          const sums = summedGradients(
            flat,
            flat.map((_, i) => per.slice(i * DIM, (i + 1) * DIM)),
          );
          for (const [key, g] of sums) {
            const m = { w: row(Number(key)).slice(), slots: [[0.1, 0.1, 0.1]] };
            modelStep({ kind: 'adagrad', lr: 0.1 }, m, g, 1);
            expectClose((await ops.find(t, [Number(key)])).values, m.w, `key ${key}`);
          }
          expect((await ops.find(t, [5])).exists[0]).toBe(1);
        });

        it('applyCombinedGradients with maxNorm uses the rows as they were before the step', async () => {
          const t = await make();
          const bag = RaggedTensor.fromNestedArray([[4, 4], [2]]);
          const g = [1, 0, 0, 0, 1, 0];
          await ops.applyCombinedGradients(t, bag, g, optimizers.sgd({ learningRate: 1 }), 1, { combiner: 'sum', maxNorm: 6.5 });
          const g4 = entryGradient(ROWS[4]!, [1, 0, 0], 1, 1, 6.5);
          const g2 = entryGradient(ROWS[2]!, [0, 1, 0], 1, 1, 6.5);
          expectClose((await ops.find(t, [4])).values, ROWS[4]!.map((x, c) => x - 2 * g4[c]!), 'key 4 (twice)', 1e-5, 1e-6);
          expectClose((await ops.find(t, [2])).values, ROWS[2]!.map((x, c) => x - g2[c]!), 'key 2', 1e-5, 1e-6);
        });

        it('bad gradients, outputs and optimizers are rejected and change nothing', async () => {
          const t = await make();
          const bag = RaggedTensor.fromNestedArray([[1], [2]]);
          await expectRejected(t, () => ops.lookupCombinedBackward(t, bag, new Float32Array(5)), 'SHAPE_MISMATCH', 'grads');
          await expectRejected(t, () => ops.lookupCombinedBackward(t, bag, new Float32Array(6), { out: new Float32Array(5) }), 'SHAPE_MISMATCH', 'out');
          await expectRejected(t, () => ops.applyCombinedGradients(t, bag, new Float32Array(3), optimizers.sgd({ learningRate: 1 }), 1), 'SHAPE_MISMATCH', 'grads');
          await expectRejected(
            t,
            () => ops.applyCombinedGradients(t, bag, new Float32Array(6), optimizers.adagrad({ learningRate: 1 }), 1, { maxNorm: 1 }),
            'INVALID_ARGUMENT',
            'optimizer',
          );
          await expectRejected(t, () => ops.applyCombinedGradients(t, bag, new Float32Array(6), optimizers.sgd({ learningRate: 1 }), 0), 'INVALID_ARGUMENT', 'step');
          if (kind === 'static') {
            await expectRejected(t, () => ops.lookupCombinedBackward(t, RaggedTensor.fromNestedArray([[9]]), new Float32Array(3)), 'OUT_OF_RANGE', 'ids');
          }
        });
      });
    }
  }
}
