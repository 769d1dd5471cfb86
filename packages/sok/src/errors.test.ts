// Misuse: coded EmbeddingErrors naming the argument, and nothing changed.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkRowIndices, OutOfRangeError, RaggedTensor, SparseTensor, Tensor } from '@embedstack/core';
import * as sok from '@embedstack/sok';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expectError, initDevices, rowsByKey, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});
afterAll(() => sok.shutdown());

describe('init', () => {
  it('refuses use before init', async () => {
    sok.shutdown();
    await expectError(() => new sok.DynamicVariable({ dimension: 3 }), 'FAILED_PRECONDITION', 'sok.init');
    await expectError(() => new sok.Variable({ shape: [4, 2] }), 'FAILED_PRECONDITION', 'sok.init');
    await expectError(sok.lookupSparse([], []), 'FAILED_PRECONDITION', 'sok.init');
    expect(sok.isInitialized()).toBe(false);
  });

  it('refuses a second init with another device count, keeps the first; the same count is a no-op', async () => {
    await initDevices(2);
    await expectError(() => sok.init({ numDevices: 4 }), 'FAILED_PRECONDITION', 'numDevices 2', 'received numDevices 4');
    await sok.init({ numDevices: 2 });
    expect(sok.numDevices()).toBe(2);
  });

  it('validates its options', async () => {
    sok.shutdown();
    await expectError(() => sok.init({ numDevices: 0 }), 'INVALID_ARGUMENT', 'options.numDevices');
    await expectError(() => sok.init({ numDevices: 1.5 }), 'INVALID_ARGUMENT', 'options.numDevices');
    await expectError(() => sok.init({ numDevices: 2, gpus: 2 } as never), 'INVALID_ARGUMENT', 'options.gpus');
    expect(sok.isInitialized()).toBe(false);
  });

  it('rejects the Promise it returns instead of throwing (review32c #11)', async () => {
    sok.shutdown();
    let result: Promise<void> | undefined;
    expect(() => {
      result = sok.init({ numDevices: 0 });
    }).not.toThrow();
    await expect(result).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'options.numDevices' });
    await expect(sok.init({ numDevices: 2, backend: 5 as never })).rejects.toMatchObject({ code: 'INVALID_TYPE', argument: 'options.backend' });
    expect(sok.isInitialized()).toBe(false);
    await sok.init({ numDevices: 2 });
    await expect(sok.init({ numDevices: 3 })).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    expect(sok.numDevices()).toBe(2);
  });

  it('refuses an All2AllDenseEmbedding keyDtype it does not take with INVALID_TYPE', async () => {
    await initDevices(2);
    await expectError(
      () => new sok.All2AllDenseEmbedding({ maxVocabularySizePerGpu: 8, embeddingVecSize: 2, slotNum: 1, nnzPerSlot: 1, keyDtype: 'uint64' as never }),
      'INVALID_TYPE',
      'keyDtype',
    );
  });

  it('variables of an earlier init refuse work', async () => {
    await initDevices(2);
    const v = new sok.DynamicVariable({ dimension: 2 });
    await initDevices(2);
    await expectError(sok.embeddingLookup(v, [1n]), 'FAILED_PRECONDITION', 'param', 'earlier');
  });
});

describe('a disposed variable', () => {
  beforeEach(() => initDevices(2));

  it('refuses every use with DISPOSED (core DisposedError), as the other packages do', async () => {
    const d = new sok.DynamicVariable({ dimension: 2, name: 'd' });
    const s = new sok.Variable({ shape: [4, 2], name: 's' });
    await sok.assign(d, [1n], Float32Array.of(3, 4));
    // a tape that recorded a lookup before the dispose
    const tape = new sok.GradientTape();
    await sok.embeddingLookup(d, [1n], { tape });
    d.dispose();
    s.dispose();
    const dir = mkdtempSync(join(tmpdir(), 'sok-disposed-'));
    try {
      const uses: [string, () => unknown][] = [
        ['embeddingLookup', () => sok.embeddingLookup(d, [1n])],
        ['embeddingLookup (static)', () => sok.embeddingLookup(s, [1n])],
        ['lookupSparse', () => sok.lookupSparse([d], [RaggedTensor.fromNestedArray([[1]])])],
        ['assign', () => sok.assign(d, [1n], Float32Array.of(1, 1))],
        ['exportVariable', () => sok.exportVariable(d)],
        ['size', () => d.size()],
        ['sparseReadAndEvict', () => sok.sparseReadAndEvict(d, [1n])],
        ['incrementalModelDump', () => sok.incrementalModelDump([d], 0)],
        ['dump', () => sok.dump(dir, [d])],
        ['load', () => sok.load(dir, [d])],
        ['applyGradients', () => new sok.OptimizerWrapper('SGD').applyGradients([[new sok.IndexedSlices(Float32Array.of(1, 1), [1]), d]])],
        ['tape.gradient', () => tape.gradient([new Tensor(Float32Array.of(1, 1), [1, 2])])],
      ];
      for (const [what, use] of uses) {
        const e = await expectError(use, 'DISPOSED', 'was disposed').catch((err: Error) => new Error(`${what}: ${err.message}`));
        expect([what, e.name, e.message]).toEqual([what, 'DisposedError', what.endsWith('(static)') ? 'Variable "s" was disposed' : 'Variable "d" was disposed']);
      }
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is DISPOSED after sok.shutdown() too (not FAILED_PRECONDITION for the shut-down init)', async () => {
    const d = new sok.DynamicVariable({ dimension: 2, name: 'd' });
    d.dispose();
    sok.shutdown();
    await expectError(() => d.size(), 'DISPOSED', 'Variable "d" was disposed');
  });
});

describe('variables', () => {
  beforeEach(() => initDevices(2));

  it('refuses bad options naming them', async () => {
    await expectError(() => new sok.DynamicVariable({ dimension: 0 }), 'INVALID_ARGUMENT', 'dimension');
    await expectError(() => new sok.DynamicVariable({ dimension: 2, initializer: 'glorot' }), 'INVALID_ARGUMENT', 'initializer', '"glorot"');
    await expectError(() => new sok.DynamicVariable({ dimension: 2, initializer: '13x' }), 'INVALID_ARGUMENT', 'initializer');
    await expectError(() => new sok.DynamicVariable({ dimension: 2, varType: 'ssd' as never }), 'INVALID_ARGUMENT', 'varType');
    await expectError(() => new sok.DynamicVariable({ dimension: 2, varType: 'hybrid' }), 'INVALID_TYPE', 'maxCapacity'); // missing: not a number
    await expectError(() => new sok.DynamicVariable({ dimension: 2, maxCapacity: 10 }), 'INVALID_ARGUMENT', 'maxCapacity', "'hbm'");
    await expectError(() => new sok.DynamicVariable({ dimension: 2, keyType: 'int16' as never }), 'INVALID_TYPE', 'keyType');
    await expectError(() => new sok.DynamicVariable({ dimension: 2, dtype: 'float16' as never }), 'INVALID_TYPE', 'dtype');
    await expectError(() => new sok.DynamicVariable({ dimension: 2, mode: 'localized:2' }), 'INVALID_ARGUMENT', 'mode');
    await expectError(() => new sok.Variable({ shape: [0, 2] }), 'INVALID_ARGUMENT', 'shape[0]');
    await expectError(() => new sok.Variable({ shape: [4] as never }), 'INVALID_TYPE', 'shape');
  });

  it('a rejected constructor, or a named one, uses up no default name (it names the dump files and seeds the initial values)', async () => {
    // the defaults are per process: count on from whatever earlier files took
    const next = (name: string): string => {
      const m = /^(\w+?)(?:_(\d+))?$/.exec(name)!;
      return `${m[1]}_${Number(m[2] ?? 0) + 1}`;
    };
    const cases: [() => sok.SokVariable, () => unknown][] = [
      [() => new sok.DynamicVariable({ dimension: 3 }), () => new sok.DynamicVariable({ dimension: 3, initCapacity: -1 })],
      [
        () => new sok.All2AllDenseEmbedding({ maxVocabularySizePerGpu: 8, embeddingVecSize: 2, slotNum: 1, nnzPerSlot: 1 }).variable,
        () => new sok.All2AllDenseEmbedding({ maxVocabularySizePerGpu: 8, embeddingVecSize: 2, slotNum: 1, nnzPerSlot: 1, embeddingInitializer: 'glorot' as never }),
      ],
    ];
    for (const [make, reject] of cases) {
      const first = make().name;
      await expectError(reject, 'INVALID_ARGUMENT');
      expect(make().name).toBe(next(first));
    }
    const d = new sok.DynamicVariable({ dimension: 3 }).name;
    new sok.DynamicVariable({ dimension: 3, name: 'given' });
    expect(new sok.DynamicVariable({ dimension: 3 }).name).toBe(next(d));
    // the tables failing last, after every check (a backend that cannot make them): no name used up either
    const v = new sok.Variable({ shape: [4, 2] }).name;
    const dv = new sok.DynamicVariable({ dimension: 3 }).name;
    sok.shutdown();
    const noRoom = { name: 'no-room', createTable: () => { throw new OutOfRangeError('no room for a table'); } };
    await sok.init({ numDevices: 2, backend: noRoom as never });
    await expectError(() => new sok.Variable({ shape: [4, 2] }), 'OUT_OF_RANGE', 'no room');
    await expectError(() => new sok.DynamicVariable({ dimension: 3 }), 'OUT_OF_RANGE', 'no room');
    await initDevices(2);
    expect(new sok.Variable({ shape: [4, 2] }).name).toBe(next(v));
    expect(new sok.DynamicVariable({ dimension: 3 }).name).toBe(next(dv));
  });

  it('takes every initializer string, a float string as a constant', async () => {
    for (const [init, expected] of [['13', 13], ['-0.5', -0.5], ['1e-3', Math.fround(1e-3)], ['zeros', 0], ['ones', 1]] as const) {
      const v = new sok.DynamicVariable({ dimension: 2, initializer: init });
      expect(Array.from((await sok.embeddingLookup(v, [42n])).data)).toEqual([expected, expected]);
    }
    for (const init of ['random', 'normal', 'uniform']) {
      const v = new sok.DynamicVariable({ dimension: 64, initializer: init });
      const row = Array.from((await sok.embeddingLookup(v, [42n])).data);
      expect(new Set(row).size).toBeGreaterThan(32);
      expect(Math.max(...row.map(Math.abs))).toBeLessThan(init === 'uniform' ? 0.05 : 1);
    }
  });
});

describe('lookups and training', () => {
  beforeEach(() => initDevices(2));

  it('a row index out of range is OUT_OF_RANGE and nothing changes (no insert on the other table, nothing recorded)', async () => {
    const d = new sok.DynamicVariable({ dimension: 2 });
    const w = new sok.Variable({ shape: [10, 2] });
    const tape = new sok.GradientTape();
    await expectError(sok.lookupSparse([d, w], [RaggedTensor.fromNestedArray([[1, 2]]), RaggedTensor.fromNestedArray([[3, 10]])], { tape }), 'OUT_OF_RANGE', 'spIds[1].values[1]', '[0, 10)');
    await expectError(sok.embeddingLookup(w, [-1]), 'OUT_OF_RANGE', 'ids[0]');
    await expectError(sok.embeddingLookup(w, [2n ** 40n]), 'OUT_OF_RANGE', 'ids[0]');
    expect(await d.size()).toBe(0);
    expect(tape.size).toBe(0);
  });

  it('spWeights that are not float32 are INVALID_TYPE naming options.spWeights[i]; nothing inserted', async () => {
    const d = new sok.DynamicVariable({ dimension: 2 });
    const ids = RaggedTensor.fromNestedArray([[1n, 2n], [3n]]);
    // whole numbers make a plain fromNestedArray of int64 values
    const e = await expectError(sok.lookupSparse([d], [ids], { spWeights: [RaggedTensor.fromNestedArray([[1, 3], [2]])] }), 'INVALID_TYPE', 'options.spWeights[0]', 'RaggedTensor of int64 values', 'float32');
    expect((e as Error & { argument?: string }).argument).toBe('options.spWeights[0]');
    await expectError(sok.lookupSparse([d], [ids], { spWeights: [[1, 3, 2] as never] }), 'INVALID_TYPE', 'options.spWeights[0]');
    expect(await d.size()).toBe(0);
    const [out] = await sok.lookupSparse([d], [ids], { spWeights: [RaggedTensor.fromNestedArray([[1, 3], [2]], { dtype: 'float32' })], combiners: 'sum', training: false });
    expect(out!.shape).toEqual([2, 2]);
  });

  it('weights unlike their ids name options.spWeights[i] (rev36s R2: named `weights` before stop 37), saying what was expected and received; nothing inserted', async () => {
    const d = new sok.DynamicVariable({ dimension: 2 });
    const ok = RaggedTensor.fromNestedArray([[1n]]);
    const ragged = RaggedTensor.fromNestedArray([[1n, 2n], [3n]]);
    const sparse = SparseTensor.fromNestedArray([[1, 2], [3]]);
    const f32 = (rows: number[][]) => RaggedTensor.fromNestedArray(rows, { dtype: 'float32' });
    const named = async (ids: unknown, weights: unknown, code: string, ...fragments: string[]): Promise<void> => {
      const e = await expectError(sok.lookupSparse([d, d], [ok, ids as RaggedTensor], { spWeights: [null, weights as Float32Array] }), code, 'options.spWeights[1]', ...fragments);
      expect((e as Error & { argument?: string }).argument).toBe('options.spWeights[1]');
    };
    // ragged ids [[1, 2], [3]]: 3 weights, the same row splits
    await named(ragged, Float32Array.of(1, 2), 'SHAPE_MISMATCH', 'of length 3', 'spIds[1]', 'received 2');
    await named(ragged, f32([[1], [2, 3]]), 'SHAPE_MISMATCH', 'same row splits as spIds[1]', 'rowSplits[1] = 1', 'is 2');
    await named(ragged, f32([[1, 2], [3], []]), 'SHAPE_MISMATCH', 'same row splits as spIds[1]', '3 rows', 'have 2');
    await named(ragged, SparseTensor.fromNestedArray([[1, 2], [3]], { dtype: 'float32' }), 'INVALID_TYPE', 'a RaggedTensor like spIds[1]', 'received');
    // sparse ids: entries (0,0) (0,1) (1,0)
    await named(sparse, Float32Array.of(1), 'SHAPE_MISMATCH', 'of length 3', 'received 1');
    await named(sparse, SparseTensor.fromNestedArray([[1], [2, 3]], { dtype: 'float32' }), 'SHAPE_MISMATCH', 'same indices as spIds[1]', 'entry 1 at [1, 0]', 'is at [0, 1]');
    await named(sparse, SparseTensor.fromNestedArray([[1, 2, 3]], { dtype: 'float32' }), 'SHAPE_MISMATCH', 'same indices as spIds[1]', 'denseShape [1, 3]', '[2, 2]');
    await named(sparse, f32([[1, 2], [3]]), 'INVALID_TYPE', 'a SparseTensor like spIds[1]');
    // a Bag as ids: its own weights are spIds[1].weights; weights in both places are refused (one was ignored before stop 37)
    const bag = (weights: Float32Array | null) => ({ rowSplits: Int32Array.of(0, 2), keys: BigInt64Array.of(1n, 2n), weights });
    await named(bag(null), Float32Array.of(1), 'INVALID_ARGUMENT', 'a Float32Array of length 2', 'received Float32Array(1)');
    await named(bag(null), f32([[1, 2]]), 'INVALID_TYPE', 'a Float32Array of length 2');
    await named(bag(Float32Array.of(1, 2)), Float32Array.of(1, 2), 'INVALID_ARGUMENT', 'spIds[1].weights', 'both');
    const own = await expectError(sok.lookupSparse([d, d], [ok, bag(Float32Array.of(1))]), 'INVALID_ARGUMENT', 'spIds[1].weights', 'length 2');
    expect((own as Error & { argument?: string }).argument).toBe('spIds[1].weights');
    expect(await d.size()).toBe(0);
    // the bag's weights or the option's, either one, weigh the same
    const byBag = await sok.lookupSparse([d], [bag(Float32Array.of(2, 3))], { combiners: 'sum', training: false });
    const byOption = await sok.lookupSparse([d], [bag(null)], { spWeights: [Float32Array.of(2, 3)], combiners: 'sum', training: false });
    expect(Array.from(byBag[0]!.data)).toEqual(Array.from(byOption[0]!.data));
  });

  it('a used tape given to a lookup is named options.tape (rev36s R2); IndexedSlices refuse a bad denseShape', async () => {
    const d = new sok.DynamicVariable({ dimension: 2 });
    const tape = new sok.GradientTape();
    await sok.embeddingLookup(d, [1n], { tape });
    tape.gradient([new Float32Array(2)]);
    for (const p of [sok.lookupSparse([d], [RaggedTensor.fromNestedArray([[2n]])], { tape }), sok.embeddingLookup(d, [2n], { tape })]) {
      const e = await expectError(p, 'FAILED_PRECONDITION', 'options.tape', 'already used');
      expect((e as Error & { argument?: string }).argument).toBe('options.tape');
    }
    expect(await d.size()).toBe(1);
    await expectError(() => tape.gradient([]), 'FAILED_PRECONDITION', 'This GradientTape was already used');
    await expectError(() => new sok.IndexedSlices(new Float32Array(2), [1n], 'x' as never), 'INVALID_TYPE', 'denseShape');
    await expectError(() => new sok.IndexedSlices(new Float32Array(2), [1n], [4, -2]), 'INVALID_ARGUMENT', 'denseShape[1]');
    await expectError(() => new sok.IndexedSlices(new Float32Array(2), [1n], [4, 2.5]), 'INVALID_ARGUMENT', 'denseShape[1]');
    await expectError(() => new sok.IndexedSlices(new Float32Array(2), [1n], [4, 3]), 'SHAPE_MISMATCH', 'denseShape', '[rows, 2]', '[4, 3]');
    const shape = [4, 2];
    const g = new sok.IndexedSlices(new Float32Array(2), [1n], shape);
    shape[1] = 7;
    expect(g.denseShape).toEqual([4, 2]);
    expect(new sok.IndexedSlices(new Float32Array(0), [], [4, 3]).dim).toBe(3);
  });

  it.each([1, 2])('Variables only, int32 ids, %i device(s): the OUT_OF_RANGE of core\'s checkRowIndices, before later bad arguments', async (devices) => {
    await initDevices(devices);
    const v = new sok.Variable({ shape: [10, 2] });
    const w = new sok.Variable({ shape: [7, 2] });
    // what core's checkRowIndices throws for these ids
    const upFront = (ids: Int32Array, rows: number, argument: string, name: string): Error => {
      try {
        checkRowIndices(ids, rows, argument, name);
      } catch (e) {
        return e as Error;
      }
      throw new Error('expected the check to throw');
    };
    const ragged = (rows: number[][]) => RaggedTensor.fromNestedArray(rows, { dtype: 'int32' });
    const same = async (p: Promise<unknown>, want: Error): Promise<void> => {
      const e = await expectError(p, 'OUT_OF_RANGE');
      expect(e).toBeInstanceOf(OutOfRangeError);
      expect(e.message).toBe(want.message);
      expect((e as Error & { argument?: string }).argument).toBe((want as Error & { argument?: string }).argument);
    };
    const tape = new sok.GradientTape();
    await same(sok.lookupSparse([v, w], [ragged([[1, 2]]), ragged([[3], [4, 7]])], { tape }), upFront(Int32Array.of(3, 4, 7), 7, 'spIds[1].values', w.name));
    await same(sok.lookupSparse([v, w], [ragged([[-1, 2]]), ragged([[3]])]), upFront(Int32Array.of(-1, 2), 10, 'spIds[0].values', v.name));
    // a bad id before a later bad argument: the id's error, as when checked up front
    await same(sok.lookupSparse([v, w], [ragged([[1, 10]]), 'not ids' as never]), upFront(Int32Array.of(1, 10), 10, 'spIds[0].values', v.name));
    await same(sok.embeddingLookup(w, Int32Array.of(0, 6, 2 ** 31 - 1), { tape }), upFront(Int32Array.of(0, 6, 2 ** 31 - 1), 7, 'ids', w.name));
    expect(tape.size).toBe(0);
    // ids in range: the rows (row r of v holds r + 0.5 and 2r - 1, of w 100 + r and r / 4)
    const rowsOf = (n: number, f: (r: number) => number[]) => Float32Array.from(Array.from({ length: n }, (_, r) => f(r)).flat());
    await sok.assign(v, Int32Array.from({ length: 10 }, (_, r) => r), rowsOf(10, (r) => [r + 0.5, 2 * r - 1]));
    await sok.assign(w, Int32Array.from({ length: 7 }, (_, r) => r), rowsOf(7, (r) => [100 + r, r / 4]));
    const [a, b] = await sok.lookupSparse([v, w], [ragged([[1, 9], [0]]), ragged([[6], [2, 3, 0]])], { combiners: 'sum' });
    expect(Array.from(a!.data)).toEqual([11, 18, 0.5, -1]);
    expect(Array.from(b!.data)).toEqual([106, 1.5, 305, 1.25]);
    expect(Array.from((await sok.embeddingLookup(w, Int32Array.of(5, 0))).data)).toEqual([105, 1.25, 100, 0]);
  });

  it.each([
    [2, 1, 1],
    [2, 1, -1],
    [4, 3, 3],
    [4, 3, 7],
  ])('%i devices, a Variable of %i rows (devices without rows), id %i: OUT_OF_RANGE, nothing recorded', async (devices, rows, id) => {
    // review31a: a device with no rows has no table, so only sok's own check sees these ids
    await initDevices(devices);
    const v = new sok.Variable({ shape: [rows, 2] });
    const ids = Int32Array.of(0, id);
    const e = await expectError(sok.embeddingLookup(v, ids), 'OUT_OF_RANGE', 'ids[1]');
    expect(e).toBeInstanceOf(OutOfRangeError);
    const tape = new sok.GradientTape();
    await expectError(sok.lookupSparse([v], [RaggedTensor.fromNestedArray([[0, id]], { dtype: 'int32' })], { tape }), 'OUT_OF_RANGE', 'spIds[0].values[1]');
    expect(tape.size).toBe(0);
  });

  it('a bad int32 id reaches no collective of a custom communicator', async () => {
    class Counting extends sok.InProcessCommunicator {
      calls = 0;
      override allgather<T extends sok.DeviceBuffer>(send: readonly T[]): Promise<T> {
        this.calls++;
        return super.allgather(send);
      }
      override reduceScatter(recv: readonly Float32Array[], produce: (device: number, send: Float64Array) => Promise<void>): Promise<void> {
        this.calls++;
        return super.reduceScatter(recv, produce);
      }
    }
    sok.shutdown();
    const comm = new Counting(2);
    await sok.init({ numDevices: 2, communicator: comm });
    const v = new sok.Variable({ shape: [10, 2] });
    await expectError(sok.embeddingLookup(v, Int32Array.of(1, 10)), 'OUT_OF_RANGE', 'ids[1]');
    expect(comm.calls).toBe(0);
  });

  it('int32 keys out of range are OUT_OF_RANGE', async () => {
    const v = new sok.DynamicVariable({ dimension: 2, keyType: 'int32' });
    await expectError(sok.embeddingLookup(v, [1n, 2n ** 31n]), 'OUT_OF_RANGE', 'ids[1]', "'int32'");
    await expectError(sok.embeddingLookup(v, [-(2 ** 31) - 1]), 'OUT_OF_RANGE', 'ids[0]');
    await expectError(sok.assign(v, BigInt64Array.from([2n ** 40n]), new Float32Array(2)), 'OUT_OF_RANGE', 'indices[0]');
    const ok = await sok.embeddingLookup(v, [2 ** 31 - 1, -(2 ** 31)], { tape: new sok.GradientTape() });
    expect(ok.shape).toEqual([2, 2]);
    const [keys] = await sok.exportVariable(v);
    expect(keys).toBeInstanceOf(Int32Array);
    expect(Array.from(keys as Int32Array).sort()).toEqual([-(2 ** 31), 2 ** 31 - 1].sort());
  });

  it('gradients whose shapes do not match the recorded lookups are refused; the tape stays usable once', async () => {
    const v = new sok.DynamicVariable({ dimension: 3, initializer: 'ones' });
    const tape = new sok.GradientTape();
    await sok.lookupSparse([v], [SparseTensor.fromNestedArray([[1, 2], [3]])], { tape, combiners: ['sum'] });
    await expectError(() => tape.gradient([new Tensor(new Float32Array(9), [3, 3])]), 'SHAPE_MISMATCH', 'outputGrads[0]', '[2, 3]', '[3, 3]');
    await expectError(() => tape.gradient([]), 'SHAPE_MISMATCH', 'outputGrads', '1 gradients');
    await expectError(() => tape.gradient([new Tensor(new Int32Array(6), [2, 3]) as never]), 'INVALID_TYPE', 'outputGrads[0]');
    const grads = tape.gradient([new Tensor(new Float32Array(6).fill(1), [2, 3])]);
    expect(grads).toHaveLength(1);
    await expectError(() => tape.gradient([new Tensor(new Float32Array(6), [2, 3])]), 'FAILED_PRECONDITION', 'already used');
    await expectError(sok.embeddingLookup(v, [1n], { tape }), 'FAILED_PRECONDITION', 'already used');
  });

  it('unknown combiners and optimizer names are refused', async () => {
    const v = new sok.DynamicVariable({ dimension: 2 });
    await expectError(sok.lookupSparse([v], [RaggedTensor.fromNestedArray([[1]])], { combiners: ['sqrtn' as never] }), 'INVALID_ARGUMENT', 'options.combiners[0]');
    await expectError(sok.lookupSparse([v], []), 'INVALID_TYPE', 'spIds');
    await expectError(() => new sok.OptimizerWrapper('rmsprop'), 'INVALID_ARGUMENT', 'optimizer', '"rmsprop"');
    await expectError(() => new sok.OptimizerWrapper({ kind: 'sgd' } as never), 'INVALID_TYPE', 'optimizer');
    await expectError(() => new sok.optimizers.Adam({ beta1: 1 }), 'INVALID_ARGUMENT', 'beta1');
    await expectError(() => new sok.optimizers.SGD({ lr: 1 } as never), 'INVALID_ARGUMENT', 'options.lr');
    expect(new sok.OptimizerWrapper('adam').optimizer.name).toBe('Adam');
    expect(new sok.OptimizerWrapper('FTRL').optimizer.name).toBe('Ftrl');
  });

  it('a hole in params is INVALID_TYPE naming it, before the other checks and before any device works (rev36s R1: an uncoded TypeError before stop 36)', async () => {
    const v = new sok.DynamicVariable({ dimension: 2 });
    const ids = (): RaggedTensor => RaggedTensor.fromNestedArray([[1, 2]]);
    const holed = [v, , v] as unknown as sok.SokVariable[];
    await expectError(sok.lookupSparse(holed, [ids(), ids(), ids()]), 'INVALID_TYPE', 'params[1]');
    // the hole is named even when a later option is bad too (params are checked first)
    await expectError(sok.lookupSparse(holed, [ids(), ids(), ids()], { combiners: 'max' as never }), 'INVALID_TYPE', 'params[1]');
    expect(await v.size()).toBe(0);
  });

  it('a bad gradient pair is refused before any device works: rows, slots and iterations unchanged', async () => {
    const v = new sok.DynamicVariable({ dimension: 2, initializer: '1' });
    const w = new sok.Variable({ shape: [4, 2], initializer: 'zeros' });
    const tape = new sok.GradientTape();
    await sok.embeddingLookup(v, [1n, 2n], { tape });
    const good = tape.gradient([new Tensor(new Float32Array(4).fill(1), [2, 2])]);
    const opt = new sok.OptimizerWrapper(new sok.optimizers.Adam());
    const before = await rowsByKey(v);
    const e = await expectError(opt.applyGradients([...good, [new sok.IndexedSlices(new Float32Array(3), [1]), w]]), 'SHAPE_MISMATCH', 'gradsAndVars[1][0].values', '[n, 2]', '[1, 3]');
    expect((e as Error & { argument?: string }).argument).toBe('gradsAndVars[1][0].values');
    await expectError(opt.applyGradients([...good, [new sok.IndexedSlices(new Float32Array(2), [4]), w]]), 'OUT_OF_RANGE', 'gradsAndVars[1][0].indices[0]');
    await expectError(opt.applyGradients([good[0]!, [good[0]![0], 'v' as never]]), 'INVALID_TYPE', 'gradsAndVars[1][1]');
    expect(opt.iterations).toBe(0);
    expect(v.slotLayout.names).toEqual([]);
    expect(await rowsByKey(v)).toEqual(before);
    await opt.applyGradients(good);
    expect(opt.iterations).toBe(1);
    expect(v.slotLayout.names).toEqual(['momenta', 'velocities']);
    // Another optimizer with other slots is refused on this variable.
    await expectError(new sok.OptimizerWrapper('Adagrad').applyGradients(good), 'FAILED_PRECONDITION', 'Adam', 'Adagrad');
  });
});
