import { describe, expect, it } from 'vitest';
import { type ErrorCode, ErrorCodes, floorMod, keyAt, keyShape, normalizeKeys, RaggedTensor, SparseTensor, Tensor, toBag, toOrderedBag } from '@embedstack/core';
import { list, throwsCode } from './util.js';

const MIN = -(2n ** 63n);
const MAX = 2n ** 63n - 1n;

describe('normalizeKeys', () => {
  it('int64: returns a BigInt64Array itself, converts every other form', () => {
    const own = BigInt64Array.from([1n, MIN, MAX]);
    expect(normalizeKeys(own, 'int64')).toBe(own);
    const want = [1n, -2n, 0n];
    expect(list(normalizeKeys(Int32Array.from([1, -2, 0]), 'int64'))).toEqual(want);
    expect(list(normalizeKeys([1, -2, 0], 'int64'))).toEqual(want);
    expect(list(normalizeKeys([1n, -2n, 0n], 'int64'))).toEqual(want);
    expect(list(normalizeKeys([1, -2n, 0], 'int64'))).toEqual(want);
    expect(list(normalizeKeys(BigUint64Array.from([1n, MAX]), 'int64'))).toEqual([1n, MAX]);
    expect(list(normalizeKeys(new Tensor(BigInt64Array.from([4n, 5n]), [1, 2]), 'int64'))).toEqual([4n, 5n]);
    expect(list(normalizeKeys(new Tensor(Int32Array.from([4])), 'int64'))).toEqual([4n]);
    expect(list(normalizeKeys([Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER], 'int64'))).toEqual([2n ** 53n - 1n, -(2n ** 53n - 1n)]);
    expect(normalizeKeys([], 'int64')).toBeInstanceOf(BigInt64Array);
  });

  it('int64: unsafe numbers and out-of-range bigints are errors, never rounded', () => {
    throwsCode(() => normalizeKeys([1, 2 ** 53], 'int64'), ErrorCodes.INVALID_TYPE, 'keys[1]');
    throwsCode(() => normalizeKeys([-(2 ** 53)], 'int64'), ErrorCodes.INVALID_TYPE, 'keys[0]');
    throwsCode(() => normalizeKeys([1.5], 'int64'), ErrorCodes.INVALID_TYPE, 'keys[0]');
    throwsCode(() => normalizeKeys([NaN], 'int64'), ErrorCodes.INVALID_TYPE, 'keys[0]');
    throwsCode(() => normalizeKeys([MAX + 1n], 'int64'), ErrorCodes.OUT_OF_RANGE, 'keys[0]');
    throwsCode(() => normalizeKeys([0n, MIN - 1n], 'int64'), ErrorCodes.OUT_OF_RANGE, 'keys[1]');
    throwsCode(() => normalizeKeys(BigUint64Array.from([MAX + 1n]), 'int64'), ErrorCodes.OUT_OF_RANGE, 'keys[0]');
    throwsCode(() => normalizeKeys(['1'], 'int64'), ErrorCodes.INVALID_TYPE, 'keys[0]');
    throwsCode(() => normalizeKeys(Float32Array.from([1]), 'int64'), ErrorCodes.INVALID_TYPE, 'keys');
    throwsCode(() => normalizeKeys(new Tensor(Float32Array.from([1])), 'int64'), ErrorCodes.INVALID_TYPE, 'keys');
    throwsCode(() => normalizeKeys(7, 'int64', 'ids'), ErrorCodes.INVALID_TYPE, 'ids');
    throwsCode(() => normalizeKeys([1], 'int16' as never), ErrorCodes.INVALID_ARGUMENT, 'dtype');
  });

  it('int32: returns an Int32Array itself, converts in-range values, rejects overflow', () => {
    const own = Int32Array.from([1, -2]);
    expect(normalizeKeys(own, 'int32')).toBe(own);
    expect(list(normalizeKeys([2147483647, -2147483648], 'int32'))).toEqual([2147483647, -2147483648]);
    expect(list(normalizeKeys([5n, -5n], 'int32'))).toEqual([5, -5]);
    expect(list(normalizeKeys(BigInt64Array.from([7n]), 'int32'))).toEqual([7]);
    expect(list(normalizeKeys(BigUint64Array.from([7n]), 'int32'))).toEqual([7]);
    expect(list(normalizeKeys(new Tensor(BigInt64Array.from([3n])), 'int32'))).toEqual([3]);
    throwsCode(() => normalizeKeys([2147483648], 'int32'), ErrorCodes.OUT_OF_RANGE, 'keys[0]');
    throwsCode(() => normalizeKeys([0, -2147483649], 'int32'), ErrorCodes.OUT_OF_RANGE, 'keys[1]');
    throwsCode(() => normalizeKeys([2n ** 31n], 'int32'), ErrorCodes.OUT_OF_RANGE, 'keys[0]');
    throwsCode(() => normalizeKeys(BigInt64Array.from([MIN]), 'int32'), ErrorCodes.OUT_OF_RANGE, 'keys[0]');
    throwsCode(() => normalizeKeys([0.5], 'int32'), ErrorCodes.INVALID_TYPE, 'keys[0]');
    throwsCode(() => normalizeKeys([1, 2 ** 53], 'int32'), ErrorCodes.INVALID_TYPE, 'keys[1]'); // past 2**53 a number is no key, as for int64 keys
    throwsCode(() => normalizeKeys(new Float64Array(1), 'int32'), ErrorCodes.INVALID_TYPE, 'keys');
  });

  it('keyShape, keyAt and floorMod', () => {
    expect(keyShape(new Tensor(new BigInt64Array(6), [2, 3]))).toEqual([2, 3]);
    expect(keyShape([1, 2, 3])).toEqual([3]);
    expect(keyAt(Int32Array.from([-4]), 0)).toBe(-4n);
    expect(keyAt(BigInt64Array.from([MIN]), 0)).toBe(MIN);
    expect(floorMod(-1n, 4)).toBe(3);
    expect(floorMod(MIN, 3)).toBe(Number(((MIN % 3n) + 3n) % 3n));
    expect(floorMod(MAX, 10)).toBe(7);
    expect(floorMod(-7, 3)).toBe(2);
    expect(floorMod(7, 3)).toBe(1);
  });
});

describe('toBag', () => {
  it('ragged ids keep their splits; weights as a RaggedTensor or Float32Array', () => {
    const ids = RaggedTensor.fromNestedArray([[1, 2], [], [3]]);
    const b = toBag(ids, RaggedTensor.fromNestedArray([[0.5, 1], [], [2]], { dtype: 'float32' }), 'int64');
    expect(list(b.rowSplits)).toEqual([0, 2, 2, 3]);
    expect(list(b.keys)).toEqual([1n, 2n, 3n]);
    expect(list(b.weights!)).toEqual([0.5, 1, 2]);
    expect(toBag(ids, null, 'int32').keys).toBeInstanceOf(Int32Array);
    expect(toBag(ids, undefined, 'int64').weights).toBeNull();
    expect(list(toBag(ids, Float32Array.from([1, 2, 3]), 'int64').weights!)).toEqual([1, 2, 3]);
  });

  it('sparse ids are segmented by their first index, stable within a row, any rank >= 2', () => {
    const sp = new SparseTensor([[2, 0], [0, 1], [0, 0], [2, 1]], [10, 11, 12, 13], [4, 2]);
    const w = new SparseTensor([[2, 0], [0, 1], [0, 0], [2, 1]], Float32Array.from([1, 2, 3, 4]), [4, 2]);
    const b = toBag(sp, w, 'int64');
    expect(list(b.rowSplits)).toEqual([0, 2, 2, 4, 4]);
    expect(list(b.keys)).toEqual([11n, 12n, 10n, 13n]);
    expect(list(b.weights!)).toEqual([2, 3, 1, 4]);
    const r3 = toBag(new SparseTensor([[1, 0, 0], [0, 1, 1]], [5, 6], [2, 2, 2]), Float32Array.from([0.5, 0.25]), 'int32');
    expect(list(r3.rowSplits)).toEqual([0, 1, 2]);
    expect(list(r3.keys)).toEqual([6, 5]);
    expect(list(r3.weights!)).toEqual([0.25, 0.5]);
  });

  it('row-ordered sparse ids: the tensor\'s own values, splits found at construction (one per row, empty rows included)', () => {
    const values = BigInt64Array.from([7n, 8n, 9n, 10n, 11n]);
    const sp = new SparseTensor([[1, 0], [1, 1], [1, 2], [3, 0], [4, 0]], values, [6, 3]);
    const w = Float32Array.from([1, 2, 3, 4, 5]);
    const { bag, order } = toOrderedBag(sp, w, 'int64');
    expect(order).toBeNull();
    expect(list(bag.rowSplits)).toEqual([0, 0, 3, 3, 4, 5, 5]);
    expect(bag.keys).toBe(values); // handed on as it is, no copy
    expect(bag.weights).toBe(w);
    // each call gets its own splits: a caller writing them changes no later bag
    bag.rowSplits.fill(99);
    expect(list(toBag(sp, null, 'int64').rowSplits)).toEqual([0, 0, 3, 3, 4, 5, 5]);
    // rank 3, rows repeated in order
    expect(list(toBag(new SparseTensor([[0, 0, 1], [0, 1, 0], [2, 0, 0]], [1, 2, 3], [3, 2, 2]), null, 'int32').rowSplits)).toEqual([0, 2, 2, 3]);
    // far more rows than entries (splits not kept by the constructor): the same splits by counting
    const wide = new SparseTensor([[3, 0], [300, 0]], [1, 2], [301, 1]);
    const splits = toBag(wide, null, 'int64').rowSplits;
    expect(splits.length).toBe(302);
    expect([splits[0], splits[3], splits[4], splits[300], splits[301]]).toEqual([0, 0, 1, 1, 2]);
    // no entries
    expect(list(toBag(new SparseTensor([], [], [3, 2]), null, 'int64').rowSplits)).toEqual([0, 0, 0, 0]);
  });

  it('a sparse tensor whose values buffer was transferred away is INVALID_ARGUMENT naming ids.values (not an empty bag)', () => {
    const values = BigInt64Array.from([5n, 6n]);
    const sp = new SparseTensor([[0, 0], [1, 0]], values, [2, 1]);
    structuredClone(values.buffer, { transfer: [values.buffer] });
    expect(sp.nnz).toBe(0);
    throwsCode(() => toBag(sp, null, 'int64'), ErrorCodes.INVALID_ARGUMENT, 'ids.values');
  });

  it('a Bag passes through after validation', () => {
    const b = toBag({ rowSplits: Int32Array.from([0, 1]), keys: BigInt64Array.from([4n]), weights: null }, Float32Array.from([2]), 'int64');
    expect(list(b.weights!)).toEqual([2]);
    throwsCode(() => toBag({ rowSplits: Int32Array.from([0, 2]), keys: BigInt64Array.from([4n]), weights: null }, null, 'int64'), ErrorCodes.INVALID_ARGUMENT, 'ids.rowSplits');
    throwsCode(() => toBag({ rowSplits: Int32Array.from([0, 1, 0, 1]), keys: BigInt64Array.from([4n]), weights: null }, null, 'int64'), ErrorCodes.INVALID_ARGUMENT, 'ids.rowSplits');
    throwsCode(() => toBag({ rowSplits: Int32Array.from([0, 1]), keys: BigInt64Array.from([4n]), weights: new Float32Array(2) }, null, 'int64'), ErrorCodes.INVALID_ARGUMENT, 'weights');
  });

  it('names the weights by weightsArgument (the ids by argument), a Bag\'s own as argument.weights; a Bag with weights in both places or non-Float32Array weights is refused (ignored before stop 37)', () => {
    const ids = RaggedTensor.fromNestedArray([[1, 2], [3]]);
    const named = (fn: () => unknown, code: ErrorCode, argument: string, ...fragments: string[]): void => {
      const e = throwsCode(fn, code, argument);
      expect(e.argument).toBe(argument);
      for (const f of fragments) expect(e.message).toContain(f);
    };
    named(() => toBag(ids, Float32Array.of(1), 'int64', 'x.ids', 'x.w'), ErrorCodes.SHAPE_MISMATCH, 'x.w', 'of length 3 (one per id of x.ids) but received 1');
    named(() => toOrderedBag(ids, RaggedTensor.fromNestedArray([[1], [2, 3]], { dtype: 'float32' }), 'int64', 'x.ids', 'x.w'), ErrorCodes.SHAPE_MISMATCH, 'x.w', 'same row splits as x.ids', 'rowSplits[1] = 1');
    const sp = new SparseTensor([[0, 0], [0, 1], [1, 0]], [1, 2, 3], [2, 2]);
    named(() => toBag(sp, new SparseTensor([[0, 0], [1, 0], [1, 1]], Float32Array.of(1, 2, 3), [2, 2]), 'int64', 'x.ids', 'x.w'), ErrorCodes.SHAPE_MISMATCH, 'x.w', 'entry 1 at [1, 0]', 'at [0, 1]');
    named(() => toBag(sp, new SparseTensor([[0, 0]], Float32Array.of(1), [2, 2]), 'int64', 'x.ids', 'x.w'), ErrorCodes.SHAPE_MISMATCH, 'x.w', '1 entries where the ids have 3');
    named(() => toBag(sp, ids as never, 'int64', 'x.ids', 'x.w'), ErrorCodes.INVALID_TYPE, 'x.w', 'a SparseTensor like x.ids');
    // defaults: the names core used before
    named(() => toBag(ids, Float32Array.of(1), 'int64'), ErrorCodes.SHAPE_MISMATCH, 'weights', 'Expected weights of length 3 (one per id of ids) but received 1');
    const bag = (weights: Float32Array | null) => ({ rowSplits: Int32Array.of(0, 2), keys: BigInt64Array.of(1n, 2n), weights });
    named(() => toBag(bag(Float32Array.of(1)), null, 'int64', 'x.ids', 'x.w'), ErrorCodes.INVALID_ARGUMENT, 'x.ids.weights', 'length 2');
    named(() => toBag(bag(null), Float32Array.of(1), 'int64', 'x.ids', 'x.w'), ErrorCodes.INVALID_ARGUMENT, 'x.w', 'length 2');
    named(() => toBag(bag(Float32Array.of(1, 2)), Float32Array.of(1, 2), 'int64', 'x.ids', 'x.w'), ErrorCodes.INVALID_ARGUMENT, 'x.w', 'x.ids.weights or x.w', 'both');
    named(() => toBag(bag(null), RaggedTensor.fromNestedArray([[1, 2]], { dtype: 'float32' }), 'int64', 'x.ids', 'x.w'), ErrorCodes.INVALID_TYPE, 'x.w');
    expect(list(toBag(bag(Float32Array.of(2, 3)), undefined, 'int64').weights!)).toEqual([2, 3]);
    expect(list(toBag(bag(null), Float32Array.of(4, 5), 'int64').weights!)).toEqual([4, 5]);
  });

  it('rejects mismatched weights, non-float weights, rank-1 sparse ids and other inputs', () => {
    const ids = RaggedTensor.fromNestedArray([[1, 2]]);
    throwsCode(() => toBag(ids, RaggedTensor.fromNestedArray([[1], [1]], { dtype: 'float32' }), 'int64'), ErrorCodes.SHAPE_MISMATCH, 'weights');
    throwsCode(() => toBag(ids, RaggedTensor.fromNestedArray([[1, 2]]), 'int64'), ErrorCodes.INVALID_TYPE, 'weights');
    throwsCode(() => toBag(ids, Float32Array.from([1]), 'int64'), ErrorCodes.SHAPE_MISMATCH, 'weights');
    throwsCode(() => toBag(ids, new SparseTensor([[0, 0]], [1.5], [1, 1]) as never, 'int64'), ErrorCodes.INVALID_TYPE, 'weights');
    const sp = new SparseTensor([[0, 0]], [1], [1, 1]);
    throwsCode(() => toBag(sp, new SparseTensor([[0, 1]], [1.5], [1, 2]), 'int64'), ErrorCodes.SHAPE_MISMATCH, 'weights');
    throwsCode(() => toBag(sp, Float32Array.from([1, 2]), 'int64'), ErrorCodes.SHAPE_MISMATCH, 'weights');
    throwsCode(() => toBag(sp, ids as never, 'int64'), ErrorCodes.INVALID_TYPE, 'weights');
    throwsCode(() => toBag(new SparseTensor([0], [1], [2]), null, 'int64'), ErrorCodes.INVALID_ARGUMENT, 'ids.denseShape');
    throwsCode(() => toBag([[1]] as never, null, 'int64'), ErrorCodes.INVALID_TYPE, 'ids');
    throwsCode(() => toBag(RaggedTensor.fromNestedArray([[2 ** 31]]), null, 'int32'), ErrorCodes.OUT_OF_RANGE, 'ids.values[0]');
  });
});
