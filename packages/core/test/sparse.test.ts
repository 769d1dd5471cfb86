import { describe, expect, it } from 'vitest';
import { ErrorCodes, RaggedTensor, SparseTensor, sparseFromDense, Tensor } from '@embedstack/core';
import { list, throwsCode } from './util.js';

describe('SparseTensor', () => {
  it('takes indices as number[][], a flat Int32Array or a BigInt64Array', () => {
    const a = new SparseTensor([[0, 1], [2, 0]], [5, 6], [3, 2]);
    const b = new SparseTensor(Int32Array.from([0, 1, 2, 0]), BigInt64Array.from([5n, 6n]), [3, 2]);
    const c = new SparseTensor(BigInt64Array.from([0n, 1n, 2n, 0n]), [5n, 6n], [3, 2]);
    for (const s of [a, b, c]) {
      expect(list(s.indices)).toEqual([0, 1, 2, 0]);
      expect(list(s.values)).toEqual([5n, 6n]);
      expect(s.dtype).toBe('int64');
      expect(s.nnz).toBe(2);
      expect(s.rank).toBe(2);
      expect(s.denseShape).toEqual([3, 2]);
      expect(s.row(1)).toBe(2);
    }
    expect(list(new SparseTensor([0, 0, 0, 1], [1, 2], [1, 2]).indices)).toEqual([0, 0, 0, 1]);
  });

  it('plain values: integers become int64 ids, anything else float32 weights', () => {
    expect(new SparseTensor([[0, 0]], [1.5], [1, 1]).dtype).toBe('float32');
    expect(new SparseTensor([[0, 0]], Float32Array.from([2]), [1, 1]).dtype).toBe('float32');
    expect(new SparseTensor([[0, 0]], Int32Array.from([2]), [1, 1]).dtype).toBe('int32');
    expect(new SparseTensor([], [], [0, 4]).nnz).toBe(0);
  });

  it('validates shape, rank, counts and index bounds', () => {
    throwsCode(() => new SparseTensor([], [], []), ErrorCodes.INVALID_ARGUMENT, 'denseShape');
    throwsCode(() => new SparseTensor([], [], [-1]), ErrorCodes.INVALID_ARGUMENT, 'denseShape');
    throwsCode(() => new SparseTensor([[0]], [1], [2, 2]), ErrorCodes.SHAPE_MISMATCH, 'indices[0]');
    throwsCode(() => new SparseTensor(Int32Array.from([0, 0, 1]), [1, 2], [2, 2]), ErrorCodes.SHAPE_MISMATCH, 'indices');
    throwsCode(() => new SparseTensor([[0, 2]], [1], [2, 2]), ErrorCodes.INVALID_ARGUMENT, 'indices[0][1]');
    throwsCode(() => new SparseTensor([[-1, 0]], [1], [2, 2]), ErrorCodes.INVALID_ARGUMENT, 'indices[0][0]');
    // a row out of range after rows in range, in order or not; an entry with no rows to be in
    throwsCode(() => new SparseTensor([[0, 0], [1, 1], [2, 0]], [1, 2, 3], [2, 2]), ErrorCodes.INVALID_ARGUMENT, 'indices[2][0]');
    throwsCode(() => new SparseTensor([[1, 0], [0, 1], [-3, 0]], [1, 2, 3], [2, 2]), ErrorCodes.INVALID_ARGUMENT, 'indices[2][0]');
    throwsCode(() => new SparseTensor([[0, 0]], [1], [0, 2]), ErrorCodes.INVALID_ARGUMENT, 'indices[0][0]');
    throwsCode(() => new SparseTensor([[0, 0, 0], [0, 0, 5]], [1, 2], [1, 1, 5]), ErrorCodes.INVALID_ARGUMENT, 'indices[1][2]');
    throwsCode(() => new SparseTensor('x' as never, [1], [2]), ErrorCodes.INVALID_TYPE, 'indices');
    throwsCode(() => new SparseTensor([[0, 0]], 'x' as never, [2, 2]), ErrorCodes.INVALID_TYPE, 'values');
    throwsCode(() => new SparseTensor([[0, 0]], [2 ** 53], [2, 2]), ErrorCodes.INVALID_TYPE, 'values[0]');
  });

  it('fromNestedArray: rows become the first index, width the longest row', () => {
    const s = SparseTensor.fromNestedArray([[1, 2], [], [3]]);
    expect(s.denseShape).toEqual([3, 2]);
    expect(list(s.indices)).toEqual([0, 0, 0, 1, 2, 0]);
    expect(list(s.values)).toEqual([1n, 2n, 3n]);
    const w = SparseTensor.fromNestedArray([[0.5], [1]], { dtype: 'float32' });
    expect(w.values).toBeInstanceOf(Float32Array);
    expect(list(w.values)).toEqual([0.5, 1]);
    throwsCode(() => SparseTensor.fromNestedArray('x' as never), ErrorCodes.INVALID_TYPE, 'rows');
    throwsCode(() => SparseTensor.fromNestedArray([[1], 2] as never), ErrorCodes.INVALID_TYPE, 'rows[1]');
    throwsCode(() => SparseTensor.fromNestedArray([[1.5]]), ErrorCodes.INVALID_TYPE, 'rows[0]');
  });

  it('fromDense keeps every element, or drops zeros when asked', () => {
    const d = new Tensor(Float32Array.from([0, 2, 3, 0]), [2, 2]);
    const all = SparseTensor.fromDense(d);
    expect(all.nnz).toBe(4);
    expect(list(all.indices)).toEqual([0, 0, 0, 1, 1, 0, 1, 1]);
    const nz = sparseFromDense(d, { dropZeros: true });
    expect(list(nz.indices)).toEqual([0, 1, 1, 0]);
    expect(list(nz.values)).toEqual([2, 3]);
    expect(nz.values).toBeInstanceOf(Float32Array);
    const ids = SparseTensor.fromDense(new Tensor(BigInt64Array.from([0n, 7n, 0n]), [1, 3]), { dropZeros: true });
    expect(list(ids.values)).toEqual([7n]);
    expect(list(ids.indices)).toEqual([0, 1]);
    const r3 = SparseTensor.fromDense(new Tensor(Int32Array.from([1, 2]), [1, 1, 2]));
    expect(list(r3.indices)).toEqual([0, 0, 0, 0, 0, 1]);
    throwsCode(() => SparseTensor.fromDense([1] as never), ErrorCodes.INVALID_TYPE, 'dense');
  });

  it('fromDense options: null is no options; a non-object, an unknown key or a non-boolean dropZeros is a coded error', () => {
    const d = new Tensor(Int32Array.from([0, 4]), [2]);
    expect(list(sparseFromDense(d, null as never).values)).toEqual([0, 4]);
    expect(list(sparseFromDense(d, { dropZeros: false }).values)).toEqual([0, 4]);
    throwsCode(() => sparseFromDense(d, 5 as never), ErrorCodes.INVALID_TYPE, 'options');
    throwsCode(() => sparseFromDense(d, { drop: true } as never), ErrorCodes.INVALID_ARGUMENT, 'options.drop');
    const e = throwsCode(() => sparseFromDense(d, { dropZeros: 'yes' } as never), ErrorCodes.INVALID_TYPE, 'options.dropZeros');
    expect(e.message).toContain('a boolean');
  });
});

describe('RaggedTensor', () => {
  it('fromRowSplits with typed or plain values and every splits form', () => {
    for (const splits of [[0, 2, 2, 3], Int32Array.from([0, 2, 2, 3]), BigInt64Array.from([0n, 2n, 2n, 3n])]) {
      const r = RaggedTensor.fromRowSplits([4, 5, 6], splits as number[]);
      expect(r.nrows).toBe(3);
      expect(r.rowLength(0)).toBe(2);
      expect(r.rowLength(1)).toBe(0);
      expect(list(r.rowSplits)).toEqual([0, 2, 2, 3]);
      expect(r.dtype).toBe('int64');
    }
    expect(RaggedTensor.fromRowSplits([0.5], [0, 1]).dtype).toBe('float32');
    expect(RaggedTensor.fromRowSplits(Int32Array.from([1]), [0, 1]).dtype).toBe('int32');
    expect(RaggedTensor.fromRowSplits(new BigInt64Array(0), [0]).nrows).toBe(0);
  });

  it('fromRowSplits validates the splits', () => {
    throwsCode(() => RaggedTensor.fromRowSplits([1, 2], [1, 2]), ErrorCodes.INVALID_ARGUMENT, 'rowSplits');
    throwsCode(() => RaggedTensor.fromRowSplits([1, 2], [0, 1]), ErrorCodes.INVALID_ARGUMENT, 'rowSplits');
    throwsCode(() => RaggedTensor.fromRowSplits([1, 2], []), ErrorCodes.INVALID_ARGUMENT, 'rowSplits');
    throwsCode(() => RaggedTensor.fromRowSplits([1, 2], [0, 2, 1, 2]), ErrorCodes.INVALID_ARGUMENT, 'rowSplits');
    throwsCode(() => RaggedTensor.fromRowSplits([1, 2], 'x' as never), ErrorCodes.INVALID_TYPE, 'rowSplits');
    throwsCode(() => RaggedTensor.fromRowSplits({} as never, [0]), ErrorCodes.INVALID_TYPE, 'values');
  });

  it('fromNestedArray and fromDense', () => {
    const r = RaggedTensor.fromNestedArray([[0], [0, 1], []]);
    expect(list(r.values)).toEqual([0n, 0n, 1n]);
    expect(list(r.rowSplits)).toEqual([0, 1, 3, 3]);
    const w = RaggedTensor.fromNestedArray([[0.25, 1]], { dtype: 'float32' });
    expect(list(w.values)).toEqual([0.25, 1]);
    const i = RaggedTensor.fromNestedArray([[3]], { dtype: 'int32' });
    expect(i.values).toBeInstanceOf(Int32Array);
    throwsCode(() => RaggedTensor.fromNestedArray(5 as never), ErrorCodes.INVALID_TYPE, 'rows');
    throwsCode(() => RaggedTensor.fromNestedArray([[1], 'x'] as never), ErrorCodes.INVALID_TYPE, 'rows[1]');
    const d = RaggedTensor.fromDense(new Tensor(Int32Array.from([1, 2, 3, 4, 5, 6]), [3, 2]));
    expect(list(d.rowSplits)).toEqual([0, 2, 4, 6]);
    expect(d.dtype).toBe('int32');
    throwsCode(() => RaggedTensor.fromDense(new Tensor(new Int32Array(2))), ErrorCodes.INVALID_TYPE, 'dense');
  });
});
