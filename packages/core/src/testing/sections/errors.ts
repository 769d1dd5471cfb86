import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../errors.js';
import { optimizers } from '../../optimizers.js';
import { RaggedTensor, SparseTensor } from '../../sparse.js';
import { createTable, type EmbeddingTable } from '../../table.js';
import { Tensor } from '../../tensor.js';
import { expectRejected, opsFor, snapshot, type SuiteContext } from '../harness.js';

const { INVALID_ARGUMENT, INVALID_TYPE, SHAPE_MISMATCH, OUT_OF_RANGE, UNSUPPORTED, DISPOSED, NOT_FOUND } = ErrorCodes;
type Any = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Every error the table wrapper raises: code, message naming the argument, table unchanged; and dispose. */
export function errorsSection(ctx: SuiteContext): void {
  const adagrad = optimizers.adagrad({ learningRate: 0.1 });
  for (const form of ctx.forms) {
    const ops = opsFor(form);
    describe(`errors leave the table unchanged, ${form} form`, () => {
      const filled = async (extra: Record<string, unknown> = {}): Promise<EmbeddingTable> => {
        const t = ctx.make({ dim: 2, optimizer: adagrad, ...extra });
        if (t.kind === 'dynamic') await ops.upsert(t, [1, -2, 3], [1, 2, 3, 4, 5, 6]);
        return t;
      };

      it('keys: wrong types and numbers that are no safe integer (INVALID_TYPE), integers outside the key dtype (OUT_OF_RANGE); a bad key anywhere rejects the whole batch', async () => {
        const t = await filled();
        await expectRejected(t, () => ops.find(t, ['a'] as Any), INVALID_TYPE, 'keys[0]');
        await expectRejected(t, () => ops.upsert(t, [5, 1.5] as Any, [1, 1, 1, 1]), INVALID_TYPE, 'keys[1]');
        await expectRejected(t, () => ops.upsert(t, [5, 2 ** 53], [1, 1, 1, 1]), INVALID_TYPE, 'keys[1]');
        await expectRejected(t, () => ops.upsert(t, [5n, 1n << 63n], [1, 1, 1, 1]), OUT_OF_RANGE, 'keys[1]');
        await expectRejected(t, () => ops.findOrInsert(t, Float32Array.from([1]) as Any), INVALID_TYPE, 'keys');
        await expectRejected(t, () => ops.remove(t, new Tensor(Float32Array.from([1])) as Any), INVALID_TYPE, 'keys');
        await expectRejected(t, () => ops.assign(t, 'x' as Any, [1, 1]), INVALID_TYPE, 'keys');
        const t32 = ctx.make({ dim: 1, keyDtype: 'int32' });
        await ops.upsert(t32, [1], [1]);
        await expectRejected(t32, () => ops.upsert(t32, [7, 2 ** 31], [1, 1]), OUT_OF_RANGE, 'keys[1]');
        await expectRejected(t32, () => ops.findOrInsert(t32, BigInt64Array.from([1n << 40n])), OUT_OF_RANGE, 'keys[0]');
        await expectRejected(t32, () => ops.applyGradients(t32, [7, -(2 ** 31) - 1], [1, 1], optimizers.sgd(), 1), OUT_OF_RANGE, 'keys[1]');
      });

      it('values, deltas, grads and exists: wrong types and lengths', async () => {
        const t = await filled();
        await expectRejected(t, () => ops.upsert(t, [7, 8], [1, 2, 3]), SHAPE_MISMATCH, 'values');
        await expectRejected(t, () => ops.upsert(t, [7], Int32Array.from([1, 2]) as Any), INVALID_TYPE, 'values');
        await expectRejected(t, () => ops.assign(t, [1], ['a', 'b'] as Any), INVALID_TYPE, 'values');
        await expectRejected(t, () => ops.upsert(t, new Tensor(BigInt64Array.from([7n, 8n]), [2]), new Tensor(new Float32Array(4), [4])), SHAPE_MISMATCH, 'values');
        await expectRejected(t, () => ops.accum(t, [1, 9], [1, 1, 1], [true, false]), SHAPE_MISMATCH, 'deltas');
        await expectRejected(t, () => ops.accum(t, [1, 9], [1, 1, 1, 1], [true]), SHAPE_MISMATCH, 'exists');
        await expectRejected(t, () => ops.accum(t, [1, 9], [1, 1, 1, 1], [1, 0] as Any), INVALID_TYPE, 'exists');
        await expectRejected(t, () => ops.applyGradients(t, [1, 9], [1, 1, 1], adagrad, 1), SHAPE_MISMATCH, 'grads');
        await expectRejected(t, () => ops.importRows(t, [9], [1]), SHAPE_MISMATCH, 'values');
      });

      it('scores: only for the customized policy, uint64, one per key', async () => {
        const t = await filled();
        await expectRejected(t, () => ops.upsert(t, [9], [1, 1], { scores: [1n] }), INVALID_ARGUMENT, 'scores');
        const c = await filled({ scorePolicy: 'customized' });
        await expectRejected(c, () => ops.upsert(c, [9], [1, 1], { scores: [1n, 2n] }), SHAPE_MISMATCH, 'scores');
        await expectRejected(c, () => ops.findOrInsert(c, [9], { scores: [1] as Any }), INVALID_TYPE, 'scores');
        await expectRejected(c, () => ops.accum(c, [9], [1, 1], [false], { scores: [-1n] }), INVALID_ARGUMENT, 'scores');
        await expectRejected(c, () => ops.importRows(c, [9], [1, 1], null, [-1n]), INVALID_ARGUMENT, 'scores');
        await expectRejected(c, () => ops.importRows(c, [9], [1, 1], null, [1] as Any), INVALID_TYPE, 'scores');
        await expectRejected(c, () => ops.importRows(c, [9], [1, 1], null, new BigUint64Array(2)), SHAPE_MISMATCH, 'scores');
        if (c.kind === 'dynamic') {
          await ops.importRows(c, [9], [1, 1], null, [(1n << 64n) - 1n]); // a bigint[], as upsert's scores option takes it
          expect((await snapshot(c)).get('9')?.score).toBe((1n << 64n) - 1n);
        }
      });

      it('importRows slots: count and lengths', async () => {
        const t = await filled();
        await expectRejected(t, () => ops.importRows(t, [9], [1, 1], [new Float32Array(2), new Float32Array(2)]), INVALID_ARGUMENT, 'slots');
        await expectRejected(t, () => ops.importRows(t, [9], [1, 1], [new Float32Array(3)]), SHAPE_MISMATCH, 'slots[0]');
      });

      it('export ranges, exportBatches batch size, restrict count, setEpoch', async () => {
        const t = await filled();
        await expectRejected(t, () => ops.export(t, { offset: -1 }), INVALID_ARGUMENT, 'offset');
        await expectRejected(t, () => ops.export(t, { limit: 1.5 }), INVALID_ARGUMENT, 'limit');
        await expectRejected(t, () => t.exportBatches(0).next(), INVALID_ARGUMENT, 'batchSize');
        await expectRejected(t, () => ops.restrict(t, -1), INVALID_ARGUMENT, 'numReserved');
        await expectRejected(t, () => ops.restrict(t, 0.5), INVALID_ARGUMENT, 'numReserved');
        await expectRejected(t, () => t.setEpoch(-1), INVALID_ARGUMENT, 'epoch');
        await expectRejected(t, () => t.setEpoch(2 ** 32), INVALID_ARGUMENT, 'epoch');
        // another JS type (a string, a BigInt) is INVALID_TYPE
        await expectRejected(t, () => ops.export(t, { offset: '1' as Any }), INVALID_TYPE, 'offset');
        await expectRejected(t, () => ops.export(t, { limit: 1n as Any }), INVALID_TYPE, 'limit');
        await expectRejected(t, () => t.exportBatches('8' as Any).next(), INVALID_TYPE, 'batchSize');
        await expectRejected(t, () => ops.restrict(t, '1' as Any), INVALID_TYPE, 'numReserved');
        await expectRejected(t, () => t.setEpoch('1' as Any), INVALID_TYPE, 'epoch');
      });

      it('lookupCombined: combiner, maxNorm, insertMissing, ids and weights', async () => {
        const t = await filled();
        const ids = RaggedTensor.fromNestedArray([[1, 9], [-2]]);
        await expectRejected(t, () => ops.lookupCombined(t, ids, { combiner: 'maximum' as Any, insertMissing: true }), INVALID_ARGUMENT, 'combiner');
        await expectRejected(t, () => ops.lookupCombined(t, ids, { maxNorm: -1, insertMissing: true }), INVALID_ARGUMENT, 'maxNorm');
        await expectRejected(t, () => ops.lookupCombined(t, ids, { maxNorm: NaN }), INVALID_ARGUMENT, 'maxNorm');
        await expectRejected(t, () => ops.lookupCombined(t, ids, { insertMissing: 'yes' as Any }), INVALID_TYPE, 'insertMissing');
        await expectRejected(t, () => ops.lookupCombined(t, ids, { maxNorm: '1' as Any }), INVALID_TYPE, 'maxNorm');
        await expectRejected(t, () => ops.lookupCombined(t, ids, { combiner: 1 as Any }), INVALID_TYPE, 'combiner');
        await expectRejected(t, () => ops.lookupCombined(t, [[1]] as Any), INVALID_TYPE, 'ids');
        const w = RaggedTensor.fromNestedArray([[1], [1, 2]], { dtype: 'float32' });
        await expectRejected(t, () => ops.lookupCombined(t, ids, { weights: w, insertMissing: true }), SHAPE_MISMATCH, 'weights');
        await expectRejected(t, () => ops.lookupCombined(t, ids, { weights: Float32Array.from([1]) }), SHAPE_MISMATCH, 'weights');
        await expectRejected(t, () => ops.lookupCombined(t, ids, { weights: RaggedTensor.fromNestedArray([[1, 1], [1]]) }), INVALID_TYPE, 'weights');
        const sp = new SparseTensor([[0, 0], [1, 0]], [1, 9], [2, 2]);
        const sw = new SparseTensor([[0, 0], [1, 1]], Float32Array.from([1, 1]), [2, 2]);
        await expectRejected(t, () => ops.lookupCombined(t, sp, { weights: sw }), SHAPE_MISMATCH, 'weights');
        await expectRejected(t, () => ops.lookupCombined(t, new SparseTensor([0], [1], [1])), INVALID_ARGUMENT, 'ids.denseShape');
      });

      it('applyGradients: step, optimizer type and slot layout, learning-rate function result', async () => {
        const t = await filled();
        await expectRejected(t, () => ops.applyGradients(t, [1], [1, 1], adagrad, 0), INVALID_ARGUMENT, 'step');
        await expectRejected(t, () => ops.applyGradients(t, [1], [1, 1], adagrad, 1.5), INVALID_ARGUMENT, 'step');
        await expectRejected(t, () => ops.applyGradients(t, [1], [1, 1], adagrad, '1' as Any), INVALID_TYPE, 'step');
        await expectRejected(t, () => ops.applyGradients(t, [1], [1, 1], optimizers.adam(), 1), INVALID_ARGUMENT, 'optimizer');
        await expectRejected(t, () => ops.applyGradients(t, [1], [1, 1], { kind: 'nope' } as Any, 1), INVALID_TYPE, 'optimizer');
        const badLr = optimizers.adagrad({ learningRate: () => NaN });
        await expectRejected(t, () => ops.applyGradients(t, [1, 9], [1, 1, 1, 1], badLr, 1), INVALID_ARGUMENT, 'learningRate');
      });

      it('static tables: keys outside [0, vocabularySize) are OUT_OF_RANGE; restrict is UNSUPPORTED', async () => {
        const t = ctx.make({ kind: 'static', dim: 2, vocabularySize: 5 });
        await ops.upsert(t, [0, 4], [1, 2, 3, 4]);
        await expectRejected(t, () => ops.find(t, [0, 5]), OUT_OF_RANGE, 'keys[1]');
        await expectRejected(t, () => ops.upsert(t, [-1], [1, 1]), OUT_OF_RANGE, 'keys[0]');
        await expectRejected(t, () => ops.applyGradients(t, [1n, 1n << 40n], [1, 1, 1, 1], optimizers.sgd(), 1), OUT_OF_RANGE, 'keys[1]');
        await expectRejected(t, () => ops.lookupCombined(t, RaggedTensor.fromNestedArray([[1, 7]])), OUT_OF_RANGE, 'ids');
        await expectRejected(t, () => ops.restrict(t, 1), UNSUPPORTED, 'restrict');
      });

      it('options objects: an unknown name (a typo of each documented one) is INVALID_ARGUMENT naming it and the method; every documented name is accepted', async () => {
        const sfx = form === 'sync' ? 'Sync' : '';
        const plan = { placement: 'localized' } as const;
        const ids = (): RaggedTensor => RaggedTensor.fromNestedArray([[1, 3]]);
        const combined = (): Record<string, unknown> => ({ weights: Float32Array.from([1, 2]), combiner: 'sum', maxNorm: 100 });
        // rows 1 -> [1, 2], -2 -> [3, 4], 3 -> [5, 6]; ids [[1, 3]] with weights [1, 2], summed: [1 + 2 * 5, 2 + 2 * 6]
        const bag = [11, 14];
        const sgd = optimizers.sgd({ learningRate: 0.5 });
        /** The same step through plain applyGradients: the rows it leaves (the combined forms must equal it). */
        const reference = async (keys: number[], grads: number[]): Promise<number[]> => {
          const r = await filled({ scorePolicy: 'customized', optimizer: sgd });
          await ops.applyGradients(r, keys, grads, sgd, 1);
          return Array.from((await ops.find(r, [1, -2, 3])).values);
        };
        const rows = async (t: EmbeddingTable): Promise<number[]> => Array.from((await ops.find(t, [1, -2, 3])).values);
        type Case = {
          method: string;
          options: () => Record<string, unknown>;
          call: (t: EmbeddingTable, o: Any) => Promise<unknown>;
          /** After the call with every documented name: what it returned or left, against the value computed here. */
          expectAccepted: (t: EmbeddingTable, result: unknown) => Promise<void>;
        };
        const cases: Case[] = [
          {
            method: 'find',
            options: () => ({ out: { values: new Float32Array(4), exists: new Uint8Array(2) }, plan }),
            call: (t, o) => ops.find(t, [1, 3], o),
            expectAccepted: async (_t, r) => expect(Array.from((r as Any).values)).toEqual([1, 2, 5, 6]),
          },
          {
            method: 'findOrInsert',
            options: () => ({ out: { values: new Float32Array(2), exists: new Uint8Array(1) }, plan, scores: [7n] }),
            call: (t, o) => ops.findOrInsert(t, [1], o),
            expectAccepted: async (_t, r) => expect(Array.from((r as Any).values)).toEqual([1, 2]),
          },
          {
            method: 'upsert',
            options: () => ({ scores: [7n] }),
            call: (t, o) => ops.upsert(t, [9], [7, 8], o),
            expectAccepted: async (t) => expect(Array.from((await ops.find(t, [9])).values)).toEqual([7, 8]),
          },
          {
            method: 'assign',
            options: () => ({ scores: [7n] }),
            call: (t, o) => ops.assign(t, [1], [7, 8], o),
            expectAccepted: async (t) => expect(await rows(t)).toEqual([7, 8, 3, 4, 5, 6]),
          },
          {
            method: 'accum',
            options: () => ({ scores: [7n] }),
            call: (t, o) => ops.accum(t, [1], [1, 1], [true], o),
            expectAccepted: async (t) => expect(await rows(t)).toEqual([2, 3, 3, 4, 5, 6]),
          },
          {
            method: 'export',
            options: () => ({ offset: 1, limit: 10 }),
            call: (t, o) => ops.export(t, o),
            expectAccepted: async (_t, r) => expect((r as Any).keys.length).toBe(2),
          },
          {
            method: 'lookupCombined',
            options: () => ({ ...combined(), insertMissing: false, out: new Float32Array(2) }),
            call: (t, o) => ops.lookupCombined(t, ids(), o),
            expectAccepted: async (_t, r) => expect(Array.from(r as Float32Array)).toEqual(bag),
          },
          {
            method: 'lookupCombinedPartial',
            options: () => ({ ...combined(), plan, insertMissing: false, out: new Float64Array(2) }),
            call: (t, o) => ops.lookupCombinedPartial(t, ids(), o),
            expectAccepted: async (_t, r) => expect(Array.from(r as Float64Array)).toEqual(bag),
          },
          {
            method: 'lookupCombinedShards',
            options: () => ({ ...combined(), insertMissing: false, out: new Float32Array(2) }),
            call: (t, o) => ops.lookupCombinedShards([{ table: t, plan }], ids(), o),
            expectAccepted: async (_t, r) => expect(Array.from(r as Float32Array)).toEqual(bag),
          },
          {
            method: 'lookupCombinedBackward',
            options: () => ({ ...combined(), plan, out: new Float32Array(4) }),
            call: (t, o) => ops.lookupCombinedBackward(t, ids(), [1, 1], o),
            // sum combiner: weight * grads per entry (rows far inside maxNorm: the clip's gradient is the identity)
            expectAccepted: async (_t, r) => expect(Array.from(r as Float32Array)).toEqual([1, 1, 2, 2]),
          },
          {
            method: 'applyGradients',
            options: () => ({ plan }),
            call: (t, o) => ops.applyGradients(t, [1], [2, 4], sgd, 1, o),
            expectAccepted: async (t) => expect(await rows(t)).toEqual([0, 0, 3, 4, 5, 6]),
          },
          {
            method: 'applyCombinedGradients',
            options: () => ({ ...combined(), plan }),
            call: (t, o) => ops.applyCombinedGradients(t, ids(), [1, 1], sgd, 1, o),
            expectAccepted: async (t) => expect(await rows(t)).toEqual(await reference([1, 3], [1, 1, 2, 2])),
          },
          {
            method: 'applyCombinedGradientsShards',
            options: combined,
            call: (t, o) => ops.applyCombinedGradientsShards([{ table: t, plan }], ids(), [1, 1], sgd, 1, o),
            expectAccepted: async (t) => expect(await rows(t)).toEqual(await reference([1, 3], [1, 1, 2, 2])),
          },
        ];
        for (const c of cases) {
          const names = Object.keys(c.options());
          const method = c.method + sfx;
          for (const name of names) {
            const t = await filled({ scorePolicy: 'customized', optimizer: sgd });
            const typo = name.slice(0, -1);
            const { [name]: value, ...rest } = c.options();
            const err = await expectRejected(t, () => c.call(t, { ...rest, [typo]: value }), INVALID_ARGUMENT, `options.${typo} `);
            expect(err.argument).toBe(`options.${typo}`);
            expect(err.message).toContain(`${method}'s options`);
            for (const n of names) expect(err.message).toContain(n);
          }
          const t = await filled({ scorePolicy: 'customized', optimizer: sgd });
          await c.expectAccepted(t, await c.call(t, c.options()));
        }
      });

      it('createTable: bad options and unknown backends', async () => {
        await expectRejected(null, () => ctx.make({ dim: 0 }), INVALID_ARGUMENT, 'dim');
        await expectRejected(null, () => ctx.make({ dim: 2, kind: 'static' }), INVALID_TYPE, 'vocabularySize');
        await expectRejected(null, () => ctx.make({ dim: '8' as Any }), INVALID_TYPE, 'dim');
        await expectRejected(null, () => ctx.make({ dim: 2, kind: 'static', vocabularySize: 8n as Any }), INVALID_TYPE, 'vocabularySize');
        await expectRejected(null, () => ctx.make({ dim: 2, maxCapacity: 0 }), INVALID_ARGUMENT, 'maxCapacity');
        await expectRejected(null, () => createTable({ dim: 2 }, { backend: 'no-such-backend-xyz' }), NOT_FOUND, 'no-such-backend-xyz');
        const e = await expectRejected(null, () => createTable({ dim: 2 }, { backnd: ctx.backend } as Any), INVALID_ARGUMENT, 'opts.backnd ');
        expect(e.message).toContain("createTable's options (backend)");
      });

      it('after dispose every operation throws DISPOSED; dispose is idempotent', async () => {
        const t = await filled();
        t.dispose();
        t.dispose();
        expect(t.disposed).toBe(true);
        await expectRejected(null, () => ops.find(t, [1]), DISPOSED, 'disposed');
        await expectRejected(null, () => ops.findOrInsert(t, [1]), DISPOSED, 'disposed');
        await expectRejected(null, () => ops.upsert(t, [1], [1, 1]), DISPOSED, 'disposed');
        await expectRejected(null, () => ops.assign(t, [1], [1, 1]), DISPOSED, 'disposed');
        await expectRejected(null, () => ops.accum(t, [1], [1, 1], [true]), DISPOSED, 'disposed');
        await expectRejected(null, () => ops.remove(t, [1]), DISPOSED, 'disposed');
        await expectRejected(null, () => ops.clear(t), DISPOSED, 'disposed');
        await expectRejected(null, () => ops.export(t), DISPOSED, 'disposed');
        await expectRejected(null, () => t.exportBatches(2).next(), DISPOSED, 'disposed');
        await expectRejected(null, () => ops.importRows(t, [1], [1, 1]), DISPOSED, 'disposed');
        await expectRejected(null, () => ops.lookupCombined(t, RaggedTensor.fromNestedArray([[1]])), DISPOSED, 'disposed');
        await expectRejected(null, () => ops.applyGradients(t, [1], [1, 1], adagrad, 1), DISPOSED, 'disposed');
        await expectRejected(null, () => ops.restrict(t, 1), DISPOSED, 'disposed');
        await expectRejected(null, () => t.size(), DISPOSED, 'disposed');
        await expectRejected(null, () => t.capacity(), DISPOSED, 'disposed');
        await expectRejected(null, () => t.memoryUsage(), DISPOSED, 'disposed');
        await expectRejected(null, () => t.setEpoch(1), DISPOSED, 'disposed');
        const u = ctx.make({ kind: 'static', dim: 1, vocabularySize: 2 });
        u[Symbol.dispose]();
        await expectRejected(null, () => ops.find(u, [1]), DISPOSED, 'disposed');
      });
    });
  }

  if (!ctx.sync) {
    describe('async-only backend', () => {
      it('the ...Sync methods throw UNSUPPORTED', async () => {
        const t = ctx.make({ dim: 1 });
        await expectRejected(null, () => t.findSync([1]), UNSUPPORTED, 'Promise');
        await expectRejected(null, () => t.upsertSync([1], [1]), UNSUPPORTED, 'Promise');
        await expectRejected(null, () => t.exportSync(), UNSUPPORTED, 'Promise');
      });
    });
  }
}
