import { RaggedTensor, SparseTensor, Tensor } from '@embedstack/core';
import * as sok from '@embedstack/sok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initDevices, rowsOf, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});
afterAll(() => sok.shutdown());

/** (index, gradient row) pairs of one IndexedSlices, sorted: the devices' order is not the point. */
function pairs(s: sok.IndexedSlices): [string, number[]][] {
  const rows = rowsOf(s.values.data, 1);
  return Array.from(s.indices as ArrayLike<bigint | number>, (k, i): [string, number[]] => [String(k), rows[i]!]).sort((a, b) => a[0].localeCompare(b[0]) || a[1][0]! - b[1][0]!);
}

describe.each([1, 2])('the tape keeps the lookup as it was at the call (%i devices)', (n) => {
  it('the caller reuses its ids, weights and row splits before tape.gradient: the gradients are those of the ids looked up', async () => {
    await initDevices(n);
    const v = new sok.DynamicVariable({ dimension: 1, initializer: '0' });
    const w = new sok.DynamicVariable({ dimension: 1, initializer: '0' });
    const tape = new sok.GradientTape();
    // ragged: rows [1, 2] and [1] weighted 2, 3 and 5; sparse: rows [4] and [5, 6]
    const ids = BigInt64Array.from([1n, 2n, 1n]);
    const splits = Int32Array.from([0, 2, 3]);
    const weights = Float32Array.from([2, 3, 5]);
    const spValues = BigInt64Array.from([4n, 5n, 6n]);
    const sp = new SparseTensor([[0, 0], [1, 0], [1, 1]], spValues, [2, 2]);
    await sok.lookupSparse([v, w], [RaggedTensor.fromRowSplits(ids, splits), sp], {
      combiners: ['sum', 'sum'],
      spWeights: [RaggedTensor.fromRowSplits(weights, splits), null],
      tape,
    });
    // the next batch written into the same arrays
    ids.fill(9n);
    weights.fill(100);
    splits.set([0, 0, 3]);
    spValues.fill(8n);
    const grads = tape.gradient([new Tensor(Float32Array.from([1, 10]), [2, 1]), new Tensor(Float32Array.from([1, 10]), [2, 1])]);
    // sum: an id's gradient is its weight times its row's (ragged), its row's (sparse)
    expect(pairs(grads[0]![0])).toEqual([['1', [2]], ['1', [50]], ['2', [3]]]);
    expect(pairs(grads[1]![0])).toEqual([['4', [1]], ['5', [10]], ['6', [10]]]);
  });
});
