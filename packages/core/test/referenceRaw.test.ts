// The reference backend's raw tables (what `table.raw` returns for a table of this backend):
// junk arguments are refused with coded errors and change nothing; random valid call sequences
// agree with a plain Map (core/testing rawFuzz.ts).
import { optimizers, referenceBackend, resolveOptimizer, resolveTableOptions } from '@embedstack/core';
import { describeRawTableFuzz } from '@embedstack/core/testing';
import { describe, expect, it } from 'vitest';

describeRawTableFuzz({ name: 'the reference backend', make: (options) => referenceBackend.createTable(options), timeout: 300_000 });

// Found by the fuzz above (a run's random junk, stop 35): the argument checks accept an
// undefined plan as no plan, and the bag ops then read `plan.placement` of undefined.
describe('the reference raw tables take an undefined plan as no plan', () => {
  for (const kind of ['dynamic', 'static'] as const) {
    it(`${kind}: lookupCombinedBackward and applyCombinedGradients with plan undefined`, () => {
      // rows: key 1 -> [0, 1], key 3 -> [2, 3] (static: rows 1 and 3 of a 4-row table)
      const options = resolveTableOptions(kind === 'dynamic' ? { dim: 2, name: 'u' } : { kind: 'static', dim: 2, name: 'u', vocabularySize: 4 });
      const raw = referenceBackend.createTable(options);
      raw.sync!.upsert(BigInt64Array.from([1n, 3n]), Float32Array.from([0, 1, 2, 3]), null);
      const bag = { rowSplits: Int32Array.from([0, 2, 3]), keys: BigInt64Array.from([1n, 3n, 3n]), weights: null };
      // sum's backward: each entry gets its row's gradient
      const grads = Float32Array.from([1, 2, 3, 4]);
      expect(Array.from(raw.sync!.lookupCombinedBackward(bag, grads, 'sum', 0, undefined as never, new Float32Array(6)))).toEqual([1, 2, 1, 2, 3, 4]);
      // SGD, learning rate 1: key 1 -= [1, 2]; key 3 -= [1, 2] + [3, 4]
      raw.sync!.applyCombinedGradients(bag, grads, 'sum', 0, undefined as never, resolveOptimizer(optimizers.sgd({ learningRate: 1 }), 1));
      const { values } = raw.sync!.find(BigInt64Array.from([1n, 3n]), null, null);
      expect(Array.from(values)).toEqual([-1, -1, -2, -3]);
      raw.dispose();
    });
  }
});
