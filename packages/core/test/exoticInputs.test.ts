// Typed-array look-alikes, detached buffers, lying subclasses and sparse arrays (review32a
// #4-#6): each is refused with a coded error naming the argument (or, for a subclass that
// lies about its length, read by the engine's own length).
import { createTable, referenceBackend } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import { throwsCode } from './util.js';

const DIM = 2;
const dynamic = () => createTable({ dim: DIM }, { backend: referenceBackend });
const fixed = () => createTable({ kind: 'static', dim: DIM, vocabularySize: 4 }, { backend: referenceBackend });
/** A typed array whose buffer went elsewhere (transferred). */
const detached = <T extends BigInt64Array | Float32Array>(a: T): T => {
  structuredClone(a.buffer, { transfer: [a.buffer as ArrayBuffer] });
  return a;
};
/** A BigInt64Array subclass whose `length` says 1000. */
class Lying extends BigInt64Array {
  override get length(): number {
    return 1000;
  }
}

describe('core: exotic typed arrays and plain arrays', () => {
  it('a Proxy of a typed array or an object inheriting from its prototype is INVALID_TYPE, as keys, values, out and exists', async () => {
    const t = dynamic();
    const fakes = [new Proxy(new BigInt64Array(2), {}), Object.create(BigInt64Array.prototype) as BigInt64Array];
    for (const keys of fakes) {
      throwsCode(() => t.findSync(keys), 'INVALID_TYPE', 'keys');
      await expect(t.find(keys)).rejects.toMatchObject({ code: 'INVALID_TYPE' });
    }
    const values = [new Proxy(new Float32Array(2 * DIM), {}), Object.create(Float32Array.prototype) as Float32Array];
    for (const v of values) {
      throwsCode(() => t.upsertSync([1n, 2n], v), 'INVALID_TYPE', 'values');
      throwsCode(() => t.findSync([1n, 2n], { out: { values: v } }), 'INVALID_TYPE', 'out.values');
      throwsCode(() => t.lookupCombinedSync({ rowSplits: new Int32Array([0, 2]), keys: new BigInt64Array(2), weights: null }, { out: v }), 'INVALID_TYPE', 'out');
    }
    throwsCode(() => t.findSync([1n], { out: { values: new Float32Array(DIM), exists: new Proxy(new Uint8Array(1), {}) } }), 'INVALID_TYPE', 'out.exists');
    throwsCode(() => t.accumSync([1n], new Float32Array(DIM), Object.create(Uint8Array.prototype) as Uint8Array), 'INVALID_TYPE', 'exists');
    expect(t.size()).toBe(0);
  });

  it('keys on a detached buffer are INVALID_ARGUMENT on static and dynamic tables', () => {
    for (const t of [fixed(), dynamic()]) {
      throwsCode(() => t.findSync(detached(new BigInt64Array(2))), 'INVALID_ARGUMENT', 'keys');
      throwsCode(() => t.upsertSync(detached(new BigInt64Array(2)), []), 'INVALID_ARGUMENT', 'keys');
    }
    throwsCode(() => dynamic().upsertSync([1n], detached(new Float32Array(DIM))), 'INVALID_ARGUMENT', 'values');
  });

  it('a subclass whose length lies is read by the engine length (a static table checks every real key)', () => {
    const t = fixed();
    t.upsertSync([0n, 1n, 2n, 3n], new Float32Array(4 * DIM).map((_, i) => i));
    const keys = new Lying(2);
    keys[0] = 3n;
    keys[1] = 1n;
    const r = t.findSync(keys);
    expect(Array.from(r.values)).toEqual([6, 7, 2, 3]);
    const bad = new Lying(1);
    bad[0] = 9n;
    throwsCode(() => t.findSync(bad), 'OUT_OF_RANGE', 'keys');
  });

  it('plain arrays: the length is checked before any conversion, and holes are refused', () => {
    const t = dynamic();
    // Length 2^32 - 1 with nothing in it: refused at once (it used to be turned into a 16 GiB Float32Array first).
    const huge: number[] = [];
    huge.length = 2 ** 32 - 1;
    throwsCode(() => t.upsertSync([9n], huge), 'SHAPE_MISMATCH', 'values');
    throwsCode(() => t.upsertSync([9n], new Array(DIM)), 'INVALID_TYPE', 'values[0]');
    throwsCode(() => t.upsertSync([9n], [1, , ] as number[]), 'INVALID_TYPE', 'values[1]');
    throwsCode(() => t.accumSync([9n], [1, 2], [] as boolean[]), 'SHAPE_MISMATCH', 'exists');
    throwsCode(() => t.accumSync([9n, 10n], [1, 2, 3, 4], [true, ,] as boolean[]), 'INVALID_TYPE', 'exists[1]');
    throwsCode(() => t.findSync([1n, , 3n] as bigint[]), 'INVALID_TYPE', 'keys[1]');
    const hugeKeys: bigint[] = [];
    hugeKeys.length = 2 ** 32 - 1;
    throwsCode(() => t.findSync(hugeKeys), 'INVALID_ARGUMENT', 'keys');
    expect(t.size()).toBe(0);
  });
});
