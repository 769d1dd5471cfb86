import * as tf from '@tensorflow/tfjs-core';
import { RaggedTensor, SparseTensor, Tensor } from '@embedstack/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { fromTf, fromTfRagged, fromTfSparse, int64KeysOf, toTf, toTfRagged, toTfSparse } from '../src/index.js';
import { expectCoded, useCpu } from './helpers.js';

beforeAll(useCpu);

describe('toTf / fromTf', () => {
  it('float32 and int32 cross without copies on the cpu backend, both ways', () => {
    const data = new Float32Array([1, 2, 3, 4, 5, 6]);
    const t = toTf(new Tensor(data, [2, 3]));
    expect(t.shape).toEqual([2, 3]);
    expect(t.dtype).toBe('float32');
    expect(t.dataSync()).toBe(data); // the same array
    const back = fromTf(t);
    expect(back.data).toBe(data);
    expect(back.shape).toEqual([2, 3]);
    const ids = new Int32Array([7, -1, 2147483647]);
    const ti = toTf(new Tensor(ids));
    expect(ti.dtype).toBe('int32');
    expect(fromTf(ti).data).toBe(ids);
    tf.dispose([t, ti]);
    // the core Tensor stays valid after the tfjs tensor is gone
    expect(Array.from(back.data as Float32Array)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('a tfjs result becomes a core Tensor over the backend array; bool becomes int32', () => {
    const a = tf.add(tf.tensor1d([1, 2]), tf.tensor1d([10, 20]));
    const c = fromTf(a);
    expect(c.data).toBe(a.dataSync());
    expect(Array.from(c.data as Float32Array)).toEqual([11, 22]);
    const b = tf.tensor1d([1, 0, 1], 'bool');
    const cb = fromTf(b);
    expect(cb.dtype).toBe('int32');
    expect(Array.from(cb.data as Int32Array)).toEqual([1, 0, 1]);
  });

  it("int64 keys stay beside the graph as positions (default), and come back through fromTf, slices included", () => {
    const keys = BigInt64Array.of(9007199254740993n, -5n, 2n ** 62n, 7n);
    const t = toTf(new Tensor(keys, [2, 2]));
    expect(t.dtype).toBe('int32');
    expect(t.shape).toEqual([2, 2]);
    expect(Array.from(t.dataSync())).toEqual([0, 1, 2, 3]);
    expect(int64KeysOf(t)).toBe(keys);
    const back = fromTf(t);
    expect(back.dtype).toBe('int64');
    expect(back.data).toBe(keys);
    expect(back.shape).toEqual([2, 2]);
    const row = tf.slice(t, [1, 0], [1, 2]); // tfjs ops keep positions meaningful
    expect(int64KeysOf(row)).toBeUndefined();
    expect(Array.from(fromTf(row, { keys }).data as BigInt64Array)).toEqual([2n ** 62n, 7n]);
    tf.dispose([t, row]);
  });

  it("int64: 'int32' narrows exactly, or throws OUT_OF_RANGE naming the tensor", () => {
    const t = toTf(new Tensor(BigInt64Array.of(-3n, 2147483647n)), { int64: 'int32' });
    expect(Array.from(t.dataSync())).toEqual([-3, 2147483647]);
    t.dispose();
    expectCoded(() => toTf(new Tensor(BigInt64Array.of(1n, 2147483648n)), { int64: 'int32' }), 'OUT_OF_RANGE', 'tensor');
  });

  it('bad input throws coded errors naming the argument, and leaks no tensor', () => {
    const before = tf.memory().numTensors;
    expectCoded(() => toTf([1, 2] as never), 'INVALID_TYPE', 'tensor');
    expectCoded(() => toTf(new Tensor(new Float32Array(1)), { int64: 'float' as never }), 'INVALID_ARGUMENT', 'options.int64');
    expectCoded(() => toTf(new Tensor(new Float32Array(1)), { copy: true } as never), 'INVALID_ARGUMENT', 'options.copy');
    expectCoded(() => fromTf(new Float32Array(2) as never), 'INVALID_TYPE', 't');
    const gone = tf.scalar(1);
    gone.dispose();
    expectCoded(() => fromTf(gone), 'INVALID_TYPE', 't');
    const s = tf.tensor1d(['a'], 'string');
    expectCoded(() => fromTf(s), 'INVALID_TYPE', 't');
    s.dispose();
    const pos = tf.tensor1d([0, 3], 'int32');
    expectCoded(() => fromTf(pos, { keys: [1n] as never }), 'INVALID_TYPE', 'options.keys');
    expectCoded(() => fromTf(pos, { keys: BigInt64Array.of(1n, 2n) }), 'OUT_OF_RANGE', 't');
    pos.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('sparse and ragged parts', () => {
  it('SparseTensor <-> { indices, values, denseShape } without copies; tfjs reads the layout as tf.sparse does', () => {
    const sp = new SparseTensor([[0, 1], [2, 0], [2, 2]], new Float32Array([5, 6, 7]), [3, 3]);
    const parts = toTfSparse(sp);
    expect(parts.indices.shape).toEqual([3, 2]);
    expect(parts.indices.dataSync()).toBe(sp.indices);
    expect(parts.values.dataSync()).toBe(sp.values);
    expect(parts.denseShape).toEqual([3, 3]);
    // tfjs's own sparse op on the parts: fill rows without entries
    const filled = tf.sparse.sparseFillEmptyRows(parts.indices, parts.values, parts.denseShape, 0);
    expect(Array.from(filled.emptyRowIndicator!.dataSync())).toEqual([0, 1, 0]);
    tf.dispose(Object.values(filled));
    const back = fromTfSparse(parts);
    expect(back.indices).toBe(sp.indices);
    expect(back.values).toBe(sp.values);
    expect(back.denseShape).toEqual([3, 3]);
    tf.dispose([parts.indices, parts.values]);
  });

  it('RaggedTensor <-> { values, rowSplits } without copies; tf.raggedTensorToTensor pads it as expected', () => {
    const r = RaggedTensor.fromNestedArray([[4, 5], [], [6]], { dtype: 'int32' });
    const parts = toTfRagged(r);
    expect(parts.values.dataSync()).toBe(r.values);
    expect(parts.rowSplits.dataSync()).toBe(r.rowSplits);
    const dense = tf.raggedTensorToTensor(tf.tensor1d([3, 2], 'int32'), parts.values, tf.scalar(-1, 'int32'), [parts.rowSplits], ['ROW_SPLITS']);
    expect(Array.from(dense.dataSync())).toEqual([4, 5, -1, -1, 6, -1]);
    const back = fromTfRagged(parts);
    expect(back.values).toBe(r.values);
    expect(Array.from(back.rowSplits)).toEqual([0, 2, 2, 3]);
    // int64 ragged ids: positions in tfjs, keys beside
    const r64 = RaggedTensor.fromNestedArray([[2n ** 40n], [1n, 2n]]);
    const p64 = toTfRagged(r64);
    expect(Array.from(p64.values.dataSync())).toEqual([0, 1, 2]);
    expect(fromTfRagged(p64).values).toBe(r64.values);
    tf.dispose([parts.values, parts.rowSplits, dense, p64.values, p64.rowSplits]);
  });

  it('bad parts throw coded errors naming the part', () => {
    const i1 = tf.tensor1d([0], 'int32');
    const v = tf.tensor1d([1]);
    const i2 = tf.tensor2d([[0]], [1, 1], 'int32');
    expectCoded(() => toTfSparse({} as never), 'INVALID_TYPE', 'sparse');
    expectCoded(() => toTfRagged(null as never), 'INVALID_TYPE', 'ragged');
    expectCoded(() => fromTfSparse(null as never), 'INVALID_TYPE', 'parts');
    expectCoded(() => fromTfSparse({ indices: i1 as never, values: v, denseShape: [1] }), 'SHAPE_MISMATCH', 'parts.indices');
    expectCoded(() => fromTfSparse({ indices: i2, values: 3 as never, denseShape: [1] }), 'INVALID_TYPE', 'parts.values');
    expectCoded(() => fromTfSparse({ indices: i2, values: v, denseShape: 'x' as never }), 'INVALID_TYPE', 'parts.denseShape');
    // indices [1, 1] against a rank-2 dense shape; 2 index rows for 1 value
    expectCoded(() => fromTfSparse({ indices: i2, values: v, denseShape: [2, 2] }), 'SHAPE_MISMATCH', 'parts.indices');
    const i22 = tf.tensor2d([[0, 1], [1, 1]], [2, 2], 'int32');
    expectCoded(() => fromTfSparse({ indices: i22, values: v, denseShape: [2, 2] }), 'SHAPE_MISMATCH', 'parts.values');
    i22.dispose();
    expectCoded(() => fromTfRagged({ values: v, rowSplits: v }), 'INVALID_TYPE', 'parts.rowSplits');
    expectCoded(() => fromTfRagged({ values: v, rowSplits: tf.tensor1d([0, 2], 'int32') }), 'INVALID_ARGUMENT', 'rowSplits');
    tf.dispose([i1, v, i2]);
  });
});
