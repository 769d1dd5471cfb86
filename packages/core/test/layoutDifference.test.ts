import { describe, expect, it } from 'vitest';
import { ErrorCodes, layoutDifference, RaggedTensor, SparseTensor } from '@embedstack/core';
import { throwsCode } from './util.js';

const ragged = (rows: number[][]) => RaggedTensor.fromNestedArray(rows, { dtype: 'float32' });
const sparse = (indices: number[][], shape: number[]) => new SparseTensor(indices, new Float32Array(indices.length), shape);

describe('layoutDifference: where weights first differ from their ids, for "but received ..."', () => {
  it('ragged: null when the row splits match; else the row count or the first differing split', () => {
    const ids = ragged([[1], [2, 3], [], [4]]); // splits [0, 1, 3, 3, 4]
    expect(layoutDifference(ids, ragged([[9], [9, 9], [], [9]]))).toBeNull();
    expect(layoutDifference(ids, ragged([[9], [9, 9], [9]]))).toBe('3 rows where the ids have 4');
    expect(layoutDifference(ids, ragged([[9], [9], [9], [9]]))).toBe("rowSplits[2] = 2 where the ids' is 3");
  });

  it('sparse: null for the same dense shape and indices; else the shape, the entry count, or the first differing entry', () => {
    const ids = sparse([[0, 0], [1, 0], [1, 1]], [2, 3]);
    expect(layoutDifference(ids, sparse([[0, 0], [1, 0], [1, 1]], [2, 3]))).toBeNull();
    expect(layoutDifference(ids, sparse([[0, 0], [1, 0], [1, 1]], [2, 4]))).toBe("denseShape [2, 4] where the ids' is [2, 3]");
    expect(layoutDifference(ids, sparse([[0, 0], [1, 0]], [2, 3]))).toBe('2 entries where the ids have 3');
    expect(layoutDifference(ids, sparse([[0, 0], [1, 0], [1, 2]], [2, 3]))).toBe("entry 2 at [1, 2] where the ids' is at [1, 1]");
    expect(layoutDifference(ids, sparse([[0, 1], [1, 0], [1, 1]], [2, 3]))).toBe("entry 0 at [0, 1] where the ids' is at [0, 0]");
  });

  it('another kind is named; anything but a SparseTensor or RaggedTensor is INVALID_TYPE', () => {
    expect(layoutDifference(sparse([[0, 0]], [1, 1]), ragged([[1]]))).toBe('a RaggedTensor where the ids are a SparseTensor');
    throwsCode(() => layoutDifference([1] as never, ragged([[1]])), ErrorCodes.INVALID_TYPE, 'ids');
    throwsCode(() => layoutDifference(ragged([[1]]), new Float32Array(1) as never), ErrorCodes.INVALID_TYPE, 'weights');
  });
});
