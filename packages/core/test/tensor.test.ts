import { describe, expect, it } from 'vitest';
import {
  assertShape,
  dtypeOf,
  ErrorCodes,
  formatShape,
  isDataArray,
  isKeyDtype,
  shapeSize,
  shapesEqual,
  Tensor,
  toTypedArray,
  validateShape,
} from '@embedstack/core';
import { list, throwsCode } from './util.js';

describe('Tensor', () => {
  it('infers dtype from the array and defaults the shape to [length]', () => {
    const f = new Tensor(Float32Array.from([1, 2, 3]));
    expect(f.dtype).toBe('float32');
    expect(f.shape).toEqual([3]);
    expect(f.rank).toBe(1);
    expect(f.size).toBe(3);
    expect(new Tensor(new Int32Array(2)).dtype).toBe('int32');
    expect(new Tensor(new BigInt64Array(2)).dtype).toBe('int64');
    expect(Object.isFrozen(f.shape)).toBe(true);
  });

  it('keeps the caller data (no copy) and reshapes as a view', () => {
    const data = new Float32Array(6);
    const t = new Tensor(data, [2, 3]);
    expect(t.data).toBe(data);
    const r = t.reshape([3, 2]);
    expect(r.shape).toEqual([3, 2]);
    expect(r.data).toBe(data);
    throwsCode(() => t.reshape([4, 2]), ErrorCodes.SHAPE_MISMATCH, 'shape');
  });

  it('scalars have shape [] and one element', () => {
    const s = new Tensor(Float32Array.from([7]), []);
    expect(s.rank).toBe(0);
    expect(s.toNestedArray()).toBe(7);
  });

  it('rejects non-typed data, bad shapes and shapes that do not hold the data', () => {
    throwsCode(() => new Tensor([1, 2] as never), ErrorCodes.INVALID_TYPE, 'data');
    throwsCode(() => new Tensor(new Float64Array(2) as never), ErrorCodes.INVALID_TYPE, 'data');
    throwsCode(() => new Tensor(new Float32Array(4), [2, -2]), ErrorCodes.INVALID_ARGUMENT, 'shape');
    throwsCode(() => new Tensor(new Float32Array(4), [2, 1.5]), ErrorCodes.INVALID_ARGUMENT, 'shape');
    throwsCode(() => new Tensor(new Float32Array(4), 'x' as never), ErrorCodes.INVALID_TYPE, 'shape');
    throwsCode(() => new Tensor(new Float32Array(4), [2, '2'] as never), ErrorCodes.INVALID_TYPE, 'shape');
    const e = throwsCode(() => new Tensor(new Float32Array(5), [2, 2]), ErrorCodes.SHAPE_MISMATCH, 'shape');
    expect(e.message).toBe('Expected shape [2, 2] to hold 4 elements but received data of 5');
  });

  it('toNestedArray and fromNestedArray round-trip, per dtype', () => {
    const t = Tensor.fromNestedArray([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(t.dtype).toBe('float32');
    expect(t.shape).toEqual([2, 3]);
    expect(list(t.data)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(t.toNestedArray()).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    const ids = Tensor.fromNestedArray([[[1n], [2n]]], { dtype: 'int64' });
    expect(ids.shape).toEqual([1, 2, 1]);
    expect(ids.toNestedArray()).toEqual([[[1n], [2n]]]);
    const i32 = Tensor.fromNestedArray([5, -6], { dtype: 'int32' });
    expect(i32.data).toBeInstanceOf(Int32Array);
    expect(list(i32.data)).toEqual([5, -6]);
    expect(Tensor.fromNestedArray([]).shape).toEqual([0]);
  });

  it('fromNestedArray rejects ragged rows, mixed depths and wrong element types', () => {
    throwsCode(() => Tensor.fromNestedArray([[1, 2], [3]]), ErrorCodes.INVALID_ARGUMENT, 'rows');
    throwsCode(() => Tensor.fromNestedArray([[1, 2], 3] as never), ErrorCodes.INVALID_ARGUMENT, 'rows');
    throwsCode(() => Tensor.fromNestedArray([1, [2]] as never), ErrorCodes.INVALID_ARGUMENT, 'rows');
    throwsCode(() => Tensor.fromNestedArray([1n]), ErrorCodes.INVALID_TYPE, 'rows[0]');
    throwsCode(() => Tensor.fromNestedArray([1.5], { dtype: 'int32' }), ErrorCodes.INVALID_TYPE, 'rows[0]');
    throwsCode(() => Tensor.fromNestedArray([1], { dtype: 'float64' as never }), ErrorCodes.INVALID_ARGUMENT, 'dtype');
  });
});

describe('toTypedArray', () => {
  it('converts and validates every element', () => {
    expect(list(toTypedArray([1.5, -2], 'float32', 'v'))).toEqual([1.5, -2]);
    expect(list(toTypedArray([1, 2n], 'int32', 'v'))).toEqual([1, 2]);
    expect(list(toTypedArray([1, -(2n ** 63n), 2n ** 63n - 1n], 'int64', 'v'))).toEqual([1n, -(2n ** 63n), 2n ** 63n - 1n]);
    throwsCode(() => toTypedArray([2 ** 31], 'int32', 'v'), ErrorCodes.OUT_OF_RANGE, 'v[0]');
    throwsCode(() => toTypedArray([1, 2n ** 63n], 'int64', 'v'), ErrorCodes.OUT_OF_RANGE, 'v[1]');
    throwsCode(() => toTypedArray([2 ** 53], 'int64', 'v'), ErrorCodes.INVALID_TYPE, 'v[0]');
    throwsCode(() => toTypedArray([1n], 'float32', 'v'), ErrorCodes.INVALID_TYPE, 'v[0]');
  });
});

describe('dtypes and shapes', () => {
  it('dtype helpers', () => {
    expect(dtypeOf(new Float32Array(0))).toBe('float32');
    expect(dtypeOf(new Int32Array(0))).toBe('int32');
    expect(dtypeOf(new BigInt64Array(0))).toBe('int64');
    expect(isDataArray(new Float32Array(0))).toBe(true);
    expect(isDataArray(new Uint8Array(0))).toBe(false);
    expect(isDataArray([1])).toBe(false);
    expect(isKeyDtype('int32')).toBe(true);
    expect(isKeyDtype('float32')).toBe(false);
  });

  it('shape helpers', () => {
    expect(shapeSize([])).toBe(1);
    expect(shapeSize([2, 3, 4])).toBe(24);
    expect(shapeSize([2, 0])).toBe(0);
    expect(shapesEqual([1, 2], [1, 2])).toBe(true);
    expect(shapesEqual([1, 2], [1, 2, 1])).toBe(false);
    expect(formatShape([3, 1])).toBe('[3, 1]');
    expect(validateShape([0, 3], 's')).toEqual([0, 3]);
    throwsCode(() => validateShape([NaN], 's'), ErrorCodes.INVALID_ARGUMENT, 's');
    expect(() => assertShape([2, 3], [2, 3], 'x')).not.toThrow();
    const e = throwsCode(() => assertShape([2, 3], [3, 2], 'x'), ErrorCodes.SHAPE_MISMATCH, 'x');
    expect(e.message).toBe('Expected shape [3, 2] for x but received shape [2, 3]');
  });
});
