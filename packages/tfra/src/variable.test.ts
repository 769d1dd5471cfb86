import { beforeAll, describe, expect, it, vi } from 'vitest';
import * as de from './index.js';
import { expectError, rowsOf, sortedKeys, uniqueName, useTestBackend } from '../test/setup.js';

let backend = '';
beforeAll(async () => {
  backend = await useTestBackend();
});

async function contents(v: de.AnyVariable): Promise<Map<bigint, number[]>> {
  const [keys, values] = await v.export();
  const rows = rowsOf(values.data, v.dim);
  return new Map(Array.from(keys as ArrayLike<bigint | number>, (k, i) => [BigInt(k), rows[i]!]));
}

describe('worked examples (TFRA tests)', () => {
  it('1: upsert, remove, lookup with the initializer row, export', async () => {
    const v = new de.Variable({ keyDtype: 'int64', dim: 2, initializer: [-1, -2], name: uniqueName(), devices: ['cpu:0', 'cpu:1'], kvCreator: new de.CuckooHashTableCreator() });
    await v.upsert([0n, 1n, 2n, 3n], new Float32Array([0, 1, 2, 3, 4, 5, 6, 7]));
    expect(await v.size()).toBe(4);
    await v.remove([3n, 4n]);
    expect(await v.size()).toBe(3);
    const { values, exists } = await v.lookup([0n, 1n, 4n], { returnExists: true });
    expect(values.shape).toEqual([3, 2]);
    expect(rowsOf(values.data, 2)).toEqual([[0, 1], [2, 3], [-1, -2]]);
    expect(exists).toEqual([true, true, false]);
    const [keys, vals] = await v.export();
    expect(sortedKeys(keys)).toEqual([0n, 1n, 2n]);
    expect(vals.shape).toEqual([3, 2]);
    expect(keys).toBeInstanceOf(BigInt64Array);
    await v.clear();
    expect(await v.size()).toBe(0);
    v.dispose();
  });

  it('2: values of the wrong shape are refused with "Expected shape" and change nothing', async () => {
    const v = new de.Variable({ dim: 2, name: uniqueName() });
    const keys = [0n, 1n, 2n];
    const data = new Float32Array([0, 1, 2, 3, 4, 5]);
    for (const shape of [[6], [2, 3], [2, 2], [3, 1]]) {
      const bad = shape.reduce((a, b) => a * b, 1) === 6 ? new de.Tensor(data, shape) : new de.Tensor(data.slice(0, shape.reduce((a, b) => a * b, 1)), shape);
      const e = await expectError(v.upsert(keys, bad), 'SHAPE_MISMATCH', 'Expected shape', 'values');
      expect(e.message).toContain(`[${shape.join(', ')}]`);
      expect(await v.size()).toBe(0);
    }
    await v.upsert(keys, new de.Tensor(data, [3, 2]));
    expect(await contents(v)).toEqual(new Map([[0n, [0, 1]], [1n, [2, 3]], [2n, [4, 5]]]));
    // a flat array of the wrong length
    await expectError(v.upsert([7n], new Float32Array(3)), 'SHAPE_MISMATCH', 'Expected shape', 'values');
    expect(await v.size()).toBe(3);
  });

  it('3: accum follows the bp_v2 rule', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName() });
    await v.upsert([0n, 1n, 2n, 3n], [0, 1, 2, 3]);
    await v.upsert([100n], [99]);
    await v.remove([1n]);
    await v.accum([0n, 1n, 100n, 3n], [0, 1, 2, 3], [10, 11, 100, 13], [true, true, false, true]);
    expect(await contents(v)).toEqual(new Map([[0n, [10]], [2n, [2]], [3n, [13]], [100n, [99]]]));
  });

  it('3b: accum inserts new values for absent keys that did not exist, with a Uint8Array of flags', async () => {
    const v = new de.Variable({ dim: 2, name: uniqueName(), devices: ['a', 'b'] });
    await v.upsert([1n], [1, 1]);
    await v.accum([1n, 2n, 3n], [1, 1, 0, 0, 0, 0], [3, 4, 5, 6, 7, 8], new Uint8Array([1, 0, 1]));
    expect(await contents(v)).toEqual(new Map([[1n, [3, 4]], [2n, [5, 6]]]));
  });

  it("the API block's accum after clear: export's keys are none, so exists from the 3-key lookup is refused (as TFRA's partition of exists is); accum on a cleared table follows the bp_v2 rule", async () => {
    const v = new de.Variable({ keyDtype: 'int64', dim: 2, initializer: [-1, -2], name: uniqueName(), devices: ['cpu:0', 'cpu:1'] });
    await v.upsert([0n, 1n, 2n, 3n], new Float32Array([0, 1, 2, 3, 4, 5, 6, 7]));
    const { values, exists } = await v.lookup([0n, 1n, 4n], { returnExists: true });
    await v.remove([3n, 4n]);
    await v.clear();
    const [keys, vals] = await v.export();
    expect(keys.length).toBe(0);
    expect(vals.shape).toEqual([0, 2]);
    // the block's call with export's (empty) keys: 0 old / new rows, 3 flags
    await expectError(v.accum(keys, vals, vals, exists), 'SHAPE_MISMATCH', 'exists');
    await v.accum(keys, vals, vals, []);
    expect(await v.size()).toBe(0);
    // the looked-up keys, after the clear: 0 and 1 existed at the lookup and are absent now (nothing);
    // 4 did not exist and is absent (inserted with its new value)
    await v.accum([0n, 1n, 4n], values, [10, 11, 12, 13, 14, 15], exists);
    expect(await contents(v)).toEqual(new Map([[4n, [14, 15]]]));
  });

  for (const bpV2 of [false, true]) {
    it(`a training step after clear() (bpV2 ${bpV2}): ${bpV2 ? 'accum inserts only the ids new at the lookup' : 'the step writes every looked-up row back as f(v0)'}`, async () => {
      const v = new de.Variable({ dim: 2, name: uniqueName(), devices: ['a', 'b'], bpV2 });
      await v.upsert([1n], [1, 10]);
      const t = (await de.embeddingLookup(v, [1n, 5n], { name: 'bp', returnTrainable: true }))[1];
      await v.clear();
      const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 }));
      await opt.applyGradients([[Float32Array.from([1, 1, 2, 2]), t]]);
      // f(v0) = v0 - g: key 1 [1 - 1, 10 - 1], key 5 (missing: zeros) [0 - 2, 0 - 2]
      const want = new Map([[5n, [-2, -2]]]);
      if (!bpV2) want.set(1n, [0, 9]); // TFRA's default upserts f(v0) for every id
      expect(await contents(v)).toEqual(want);
    });
  }

  it('4: two shards with the default partitioner', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName(), devices: ['cpu:0', 'cpu:1'] });
    await v.upsert([0n, 1n, 2n, 3n, 4n], [0, 1, 2, 3, 4]);
    expect(await v.size(0)).toBe(3);
    expect(await v.size(1)).toBe(2);
    expect(await v.size()).toBe(5);
    const out = await v.lookup([1n, 3n, 2n, 3n, 0n]);
    expect(out.shape).toEqual([5, 1]);
    expect(rowsOf(out.data, 1)).toEqual([[1], [3], [2], [3], [0]]);
  });

  it('4b: negative keys go to the floor-mod shard', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName(), devices: ['a', 'b', 'c'] });
    await v.upsert([-1n, -2n, -3n, -9223372036854775808n], [1, 2, 3, 4]);
    // -1 mod 3 = 2, -2 mod 3 = 1, -3 mod 3 = 0, -2^63 mod 3 = 1
    expect([await v.size(0), await v.size(1), await v.size(2)]).toEqual([1, 2, 1]);
    expect(rowsOf((await v.lookup([-9223372036854775808n, -1n])).data, 1)).toEqual([[4], [1]]);
  });

  it('5: maxNorm clips each row to 2*row/||row||', async () => {
    const v = new de.Variable({ dim: 2, name: uniqueName() });
    await v.upsert([0n, 1n], [2, 4, 3, 1]);
    const e = await de.embeddingLookup(v, [0n, 1n], { name: 'clip', maxNorm: 2 });
    const expected = [[2, 4], [3, 1]].map(([a, b]) => {
      const n = Math.hypot(a!, b!);
      return [Math.fround((2 * a!) / n), Math.fround((2 * b!) / n)];
    });
    const got = rowsOf(e.data, 2);
    for (let i = 0; i < 2; i++) for (let c = 0; c < 2; c++) expect(got[i]![c]).toBeCloseTo(expected[i]![c]!, 5);
    // the stored rows are not clipped
    expect(rowsOf((await v.lookup([0n, 1n])).data, 2)).toEqual([[2, 4], [3, 1]]);
  });
});

describe('Variable options', () => {
  it('defaults mirror TFRA', () => {
    const v = new de.Variable();
    expect(v.name).toBe('DynamicEmbedding_Variable');
    expect(v.keyDtype).toBe('int64');
    expect(v.valueDtype).toBe('float32');
    expect(v.dim).toBe(1);
    expect(v.devices).toEqual(['cpu:0']);
    expect(v.shardNum).toBe(1);
    expect(v.trainable).toBe(true);
    expect(v.checkpoint).toBe(true);
    expect(v.initSize).toBe(8192); // TFRA: TF_HASHTABLE_INIT_SIZE or 8192
    expect(v.bpV2).toBe(false);
    expect(v.restrictPolicy).toBeNull();
    expect(v.kvCreator).toBeInstanceOf(de.CuckooHashTableCreator);
    expect(v.tables[0]!.backendName).toBe(backend); // the tables live on the backend under test
    v.dispose();
  });

  it('initializer forms: undefined, number, exact row, other length, per-key initializer', async () => {
    const zeros = new de.Variable({ dim: 3, name: uniqueName() });
    expect(Array.from((await zeros.lookup([5n])).data)).toEqual([0, 0, 0]);
    const num = new de.Variable({ dim: 3, initializer: 0.5, name: uniqueName() });
    expect(Array.from((await num.lookup([5n])).data)).toEqual([0.5, 0.5, 0.5]);
    const row = new de.Variable({ dim: 3, initializer: [1, 2, 3], name: uniqueName() });
    expect(Array.from((await row.lookup([5n, 6n])).data)).toEqual([1, 2, 3, 1, 2, 3]);
    const first = new de.Variable({ dim: 3, initializer: [7, 8], name: uniqueName() });
    expect(Array.from((await first.lookup([5n])).data)).toEqual([7, 7, 7]);
    // per-key random: same key -> same row whatever the sharding and batch
    const name = uniqueName();
    const a = new de.Variable({ dim: 4, initializer: de.initializers.normal(0, 1), name, devices: ['x'] });
    const b = new de.Variable({ dim: 4, initializer: de.initializers.normal(0, 1), name, devices: ['x', 'y', 'z'] });
    const ra = rowsOf((await a.lookup([1n, 2n, 3n, 4n])).data, 4);
    const rb = rowsOf((await b.lookup([4n, 3n, 2n, 1n])).data, 4).reverse();
    expect(ra).toEqual(rb);
    expect(ra[0]).not.toEqual(ra[1]);
    expect(new Set(ra.flat()).size).toBe(16);
  });

  it('int32 keys export as Int32Array; string keys are hashed stably', async () => {
    const v = new de.Variable({ keyDtype: 'int32', dim: 1, name: uniqueName(), devices: ['a', 'b'] });
    await v.upsert(new Int32Array([-5, 6]), [1, 2]);
    const [keys] = await v.export();
    expect(keys).toBeInstanceOf(Int32Array);
    expect(sortedKeys(keys)).toEqual([-5n, 6n]);
    await expectError(v.upsert([2 ** 31], [1]), 'OUT_OF_RANGE', 'keys[0]');

    const s = new de.Variable({ keyDtype: 'string', dim: 1, name: uniqueName(), devices: ['a', 'b'] });
    await s.upsert(['apple', 'pear'], [1, 2]);
    expect(Array.from((await s.lookup(['pear', 'plum', 'apple'])).data)).toEqual([2, 0, 1]);
    const [skeys] = await s.export();
    expect(sortedKeys(skeys)).toEqual(sortedKeys([de.hashString64('apple'), de.hashString64('pear')]));
    // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c
    expect(de.hashString64('a')).toBe(BigInt.asIntN(64, 0xaf63dc4c8601ec8cn));
    expect(de.hashString64('')).toBe(BigInt.asIntN(64, 0xcbf29ce484222325n));
    await expectError(() => de.hashString64(5 as unknown as string), 'INVALID_TYPE', 'Expected text to be a string but received 5');
    await expectError(() => de.hashString64(undefined as unknown as string), 'INVALID_TYPE', 'text');
  });

  it('a custom partitioner places keys; a bad one is refused before any write', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName(), devices: ['a', 'b'], partitioner: (keys) => Int32Array.from(keys as ArrayLike<bigint>, (k) => (k < 10n ? 1 : 0)) });
    await v.upsert([1n, 2n, 30n], [1, 2, 3]);
    expect([await v.size(0), await v.size(1)]).toEqual([1, 2]);
    const bad = new de.Variable({ dim: 1, name: uniqueName(), devices: ['a', 'b'], partitioner: () => [0, 5] });
    await expectError(bad.upsert([1n, 2n], [1, 2]), 'INVALID_ARGUMENT', 'partitioner');
    expect(await bad.size()).toBe(0);
    // the default partitioner, called directly
    expect(Array.from(de.defaultPartitionFn(new BigInt64Array([-1n, 5n, 6n]), 3))).toEqual([2, 2, 0]);
    await expectError(() => de.defaultPartitionFn(new BigInt64Array([1n]), 0), 'INVALID_ARGUMENT', 'Expected shardNum to be an integer >= 1 but received 0');
    await expectError(() => de.defaultPartitionFn([1, 2] as unknown as BigInt64Array, 2), 'INVALID_TYPE', 'keys');
  });

  it('initSize is split over the shards', () => {
    const v = new de.Variable({ dim: 2, name: uniqueName(), devices: ['a', 'b'], initSize: 4000 });
    expect(v.initSize).toBe(4000);
    expect(v.tables.map((t) => t.capacity())).toEqual([2000, 2000]);
    v.dispose();
  });

  it('rejects bad options with named errors', () => {
    const cases: [unknown, string, string][] = [
      [{ dim: 0 }, 'INVALID_ARGUMENT', 'dim'],
      [{ dim: 1.5 }, 'INVALID_ARGUMENT', 'dim'],
      [{ keyDtype: 'float32' }, 'INVALID_TYPE', 'keyDtype'],
      [{ valueDtype: 'int32' }, 'INVALID_TYPE', 'valueDtype'],
      [{ devices: [] }, 'INVALID_TYPE', 'devices'],
      [{ restrictPolicy: 'timestamp' }, 'INVALID_TYPE', 'restrictPolicy'],
      [{ restrictPolicy: {} }, 'INVALID_TYPE', 'restrictPolicy'],
      [{ kvCreator: {} }, 'INVALID_TYPE', 'kvCreator'],
      [{ initializer: 'zeros' }, 'INVALID_ARGUMENT', 'initializer'],
      [{ dim: '2' }, 'INVALID_TYPE', 'dim'],
      [{ initSize: '4' }, 'INVALID_TYPE', 'initSize'],
      [{ initializer: [] }, 'INVALID_ARGUMENT', 'initializer'],
      [{ trainable: 1 }, 'INVALID_TYPE', 'trainable'],
      [{ initSize: -1 }, 'INVALID_ARGUMENT', 'initSize'],
      [{ dims: 2 }, 'INVALID_ARGUMENT', 'options.dims'],
    ];
    for (const [opts, code, arg] of cases) {
      let err: (Error & { code?: string }) | undefined;
      try {
        new de.Variable(opts as de.VariableOptions);
      } catch (e) {
        err = e as Error & { code?: string };
      }
      expect(err, JSON.stringify(opts)).toBeInstanceOf(Error);
      expect(err!.code, JSON.stringify(opts)).toBe(code);
      expect(err!.message).toContain(arg);
    }
  });

  it('an instance of a policy (not its class) is a TypeError', () => {
    const v = new de.Variable({ name: uniqueName(), restrictPolicy: de.TimestampRestrictPolicy });
    expect(() => new de.Variable({ restrictPolicy: v.restrictPolicy as unknown as de.RestrictPolicyClass })).toThrowError(/restrictPolicy/);
  });
});

describe('Variable methods', () => {
  it('lookup keeps the shape of an id Tensor and never inserts', async () => {
    const v = new de.Variable({ dim: 2, name: uniqueName(), initializer: 3 });
    await v.upsert([1n], [1, 1]);
    const ids = new de.Tensor(new BigInt64Array([1n, 2n, 2n, 1n, 9n, 1n]), [2, 3]);
    const out = await v.lookup(ids);
    expect(out.shape).toEqual([2, 3, 2]);
    expect(rowsOf(out.data, 2)).toEqual([[1, 1], [3, 3], [3, 3], [1, 1], [3, 3], [1, 1]]);
    expect(await v.size()).toBe(1);
  });

  it('size(index) out of range, bad keys and bad exists are refused; nothing changes', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName(), devices: ['a', 'b'] });
    await v.upsert([1n, 2n], [1, 2]);
    await expectError(v.size(2), 'OUT_OF_RANGE', 'index');
    await expectError(v.size(-1), 'OUT_OF_RANGE', 'index', 'received -1');
    await expectError(v.size('0' as unknown as number), 'INVALID_TYPE', 'index', 'received "0"');
    await expectError(v.size(0.5), 'INVALID_TYPE', 'index', 'received 0.5');
    await expectError(v.upsert([1.5, 2], [1, 2]), 'INVALID_TYPE', 'keys[0]');
    await expectError(v.upsert(['x'] as unknown as bigint[], [1]), 'INVALID_TYPE', 'keys[0]');
    await expectError(v.accum([1n, 2n], [0, 0], [5, 5], [true]), 'SHAPE_MISMATCH', 'exists');
    await expectError(v.accum([1n, 2n], [0, 0], [5], [true, true]), 'SHAPE_MISMATCH', 'newValues');
    await expectError(v.accum([1n, 2n], [0, 0], [5, 5], [1, 1] as unknown as boolean[]), 'INVALID_TYPE', 'exists');
    await expectError(v.lookup([1n], { returnExists: 'yes' } as unknown as { returnExists: true }), 'INVALID_TYPE', 'returnExists');
    expect(await contents(v)).toEqual(new Map([[1n, [1]], [2n, [2]]]));
  });

  it('remove ignores missing keys and reports how many it removed', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName(), devices: ['a', 'b', 'c'] });
    await v.upsert([1n, 2n, 3n], [1, 2, 3]);
    expect(await v.remove([2n, 3n, 4n, 5n])).toBe(2);
    expect(await contents(v)).toEqual(new Map([[1n, [1]]]));
  });

  it('restrict without a policy warns and returns null', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName() });
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    expect(v.restrict(5)).toBeNull();
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]![0])).toContain('restrict');
    warn.mockRestore();
  });

  it('restrict checks its arguments first, with or without a policy: the same rejection, and no warning', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      const bare = new de.Variable({ dim: 1, name: uniqueName() });
      const withPolicy = new de.Variable({ dim: 1, name: uniqueName(), restrictPolicy: de.FrequencyRestrictPolicy });
      const bad: [number, de.RestrictOptions | undefined, object][] = [
        [-5, undefined, { code: 'INVALID_ARGUMENT', argument: 'numReserved', message: 'Expected numReserved to be an integer >= 0 but received -5' }],
        [1.5, undefined, { code: 'INVALID_TYPE', argument: 'numReserved', message: 'Expected numReserved to be an integer but received 1.5' }],
        [1, { trigger: -1 }, { code: 'INVALID_ARGUMENT', argument: 'trigger', message: 'Expected trigger to be an integer >= 0 but received -1' }],
        [1, { trig: 0 } as never, { code: 'INVALID_ARGUMENT', argument: 'options.trig' }],
      ];
      for (const [n, o, expected] of bad) {
        for (const v of [bare, withPolicy]) {
          const r = v.restrict(n, o);
          expect(r).toBeInstanceOf(Promise);
          await expect(r).rejects.toMatchObject(expected);
        }
      }
      expect(warn).not.toHaveBeenCalled();
      // a valid call without a policy still warns and returns null, as TFRA does
      expect(bare.restrict(5, { trigger: 0 })).toBeNull();
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      warn.mockRestore();
    }
  });

  it('restrict refuses unknown options and bad counts before touching anything', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName(), restrictPolicy: de.FrequencyRestrictPolicy });
    await v.upsert([1n, 2n, 3n], [1, 2, 3]);
    await expectError(v.restrict(1, { trig: 0 } as unknown as de.RestrictOptions)!, 'INVALID_ARGUMENT', 'options.trig');
    await expectError(v.restrict(1, 5 as unknown as de.RestrictOptions)!, 'INVALID_TYPE', 'options');
    await expectError(v.restrict(-1)!, 'INVALID_ARGUMENT', 'numReserved');
    await expectError(v.restrict(1, { trigger: 'a' as unknown as number })!, 'INVALID_TYPE', 'trigger');
    await expectError(v.restrict(1, { trigger: -1 })!, 'INVALID_ARGUMENT', 'Expected trigger to be an integer >= 0 but received -1');
    // keys of a float array: the message says which (it said "float32 ids" of a Float64Array)
    await expectError(v.upsert(new Float64Array([7]) as never, [1]), 'INVALID_TYPE', 'received "float64 ids"');
    await expectError(v.lookup(new Float32Array([7]) as never), 'INVALID_TYPE', 'received "float32 ids"');
    expect(await v.size()).toBe(3);
    expect(await v.restrict(1, { trigger: 0 })).toBe(2);
    expect(await v.size()).toBe(1);
  });

  it('getVariable enforces unique names unless reuse is set; new Variable does not', () => {
    const name = uniqueName('gv');
    const a = de.getVariable(name, { dim: 2 });
    expect(a.dim).toBe(2);
    let err: (Error & { code?: string }) | undefined;
    try {
      de.getVariable(name, { dim: 2 });
    } catch (e) {
      err = e as Error & { code?: string };
    }
    expect(err?.code).toBe('ALREADY_EXISTS');
    expect(err?.message).toContain(`Variable ${name} already exists`);
    expect(de.getVariable(name, { reuse: true })).toBe(a);
    const b = new de.Variable({ name, dim: 2 });
    expect(b).not.toBe(a);
    a.dispose();
    expect(de.getVariable(name, { dim: 3 }).dim).toBe(3);
  });

  it("getVariable with reuse refuses another dim or dtype, as TF's get_variable refuses to share another shape (fix33b #5)", () => {
    const name = uniqueName('gv');
    const a = de.getVariable(name, { dim: 2 });
    const e = (f: () => unknown) => {
      try {
        f();
      } catch (x) {
        return x as Error & { code?: string; argument?: string };
      }
      return null;
    };
    const dim = e(() => de.getVariable(name, { dim: 5, reuse: true }));
    expect(dim?.code).toBe('INVALID_ARGUMENT');
    expect(dim?.message).toBe(`Trying to share variable ${name}, but specified dim 5 and found dim 2`);
    expect(dim?.argument).toBe('options.dim');
    const key = e(() => de.getVariable(name, { keyDtype: 'int32', reuse: true }));
    expect(key?.code).toBe('INVALID_ARGUMENT');
    expect(key?.message).toContain('specified keyDtype int32 and found keyDtype int64');
    // The same options, or none, share it.
    expect(de.getVariable(name, { dim: 2, keyDtype: 'int64', valueDtype: 'float32', reuse: true })).toBe(a);
    expect(de.getVariable(name, { reuse: true })).toBe(a);
    expect(a.dim).toBe(2);
  });

  it('getTrainableByName returns the view registered by embeddingLookup, else null', async () => {
    const v = new de.Variable({ dim: 2, name: uniqueName() });
    expect(v.getTrainableByName('user_emb')).toBeNull();
    await de.embeddingLookup(v, [1n, 2n], { name: 'user_emb' });
    const t: de.ShadowVariable | null = v.getTrainableByName('user_emb'); // typed, no cast (tsc checks this)
    expect(t).toBeInstanceOf(de.ShadowVariable);
    expect(t!.name).toBe('user_emb');
    expect(t!.params).toBe(v);
    expect(Array.from(t!.ids as BigInt64Array)).toEqual([1n, 2n]);
  });

  it('getSlotVariables refuses non-optimizers and is empty before training', () => {
    const v = new de.Variable({ dim: 2, name: uniqueName() });
    expect(() => v.getSlotVariables({} as never)).toThrowError(/optimizer/);
    expect(v.getSlotVariables(de.DynamicEmbeddingOptimizer(new de.optimizers.Adam()))).toEqual([]);
  });
});

describe('synchronous forms (in-memory tables)', () => {
  it('worked examples 1 and 3 run synchronously with the same results', () => {
    const v = new de.Variable({ dim: 2, initializer: [-1, -2], name: uniqueName(), devices: ['a', 'b'] });
    v.upsertSync([0n, 1n, 2n, 3n], new Float32Array([0, 1, 2, 3, 4, 5, 6, 7]));
    expect(v.sizeSync()).toBe(4);
    expect([v.sizeSync(0), v.sizeSync(1)]).toEqual([2, 2]);
    expect(v.removeSync([3n, 4n])).toBe(1);
    const { values, exists } = v.lookupSync([0n, 1n, 4n], { returnExists: true });
    expect(rowsOf(values.data, 2)).toEqual([[0, 1], [2, 3], [-1, -2]]);
    expect(exists).toEqual([true, true, false]);
    expect(sortedKeys(v.exportSync()[0])).toEqual([0n, 1n, 2n]);
    v.clearSync();
    expect(v.sizeSync()).toBe(0);

    const a = new de.Variable({ dim: 1, name: uniqueName() });
    a.upsertSync([0n, 1n, 2n, 3n, 100n], [0, 1, 2, 3, 99]);
    a.removeSync([1n]);
    a.accumSync([0n, 1n, 100n, 3n], [0, 1, 2, 3], [10, 11, 100, 13], [true, true, false, true]);
    const [keys, vals] = a.exportSync();
    expect(new Map(Array.from(keys as BigInt64Array, (k, i) => [k, vals.data[i]]))).toEqual(new Map([[0n, 10], [2n, 2], [3n, 13], [100n, 99]]));
    expect(() => a.upsertSync([1n], [1, 2])).toThrowError(/Expected shape/);
    expect(() => a.sizeSync(1)).toThrowError(/index/);
  });

  it('slot views have no synchronous forms', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName() });
    const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.Adagrad());
    const [, tw] = await de.embeddingLookup(v, [1n], { name: 't', returnTrainable: true });
    await opt.applyGradients([[[1], tw]]);
    const [acc] = v.getSlotVariables(opt);
    await expectError(() => acc!.lookupSync([1n]), 'UNSUPPORTED', 'Promise form');
  });
});
