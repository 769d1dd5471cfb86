import { describe, expect, it } from 'vitest';
import {
  ErrorCodes,
  fnv1a32,
  initialRow,
  initializers,
  isInitializerSpec,
  keyWords,
  mix32,
  randomWord,
  resolveInitializer,
  standardNormal,
  uniform01,
} from '@embedstack/core';
import { throwsCode } from './util.js';

// Hand computation with BigInt arithmetic (independent of Math.imul).
const M = 0xffffffffn;
function mixBig(x: bigint): bigint {
  x ^= x >> 16n;
  x = (x * 0x7feb352dn) & M;
  x ^= x >> 15n;
  x = (x * 0x846ca68bn) & M;
  x ^= x >> 16n;
  return x;
}

describe('counter-based random numbers', () => {
  it('mix32 matches a hand computation and fixed values', () => {
    expect(mix32(0)).toBe(0);
    expect(mix32(1)).toBe(0x688990c0);
    expect(mix32(0x12345678)).toBe(0xf5e71c96);
    for (const x of [1, 0xdeadbeef, 0xffffffff, 12345]) expect(mix32(x)).toBe(Number(mixBig(BigInt(x))));
  });

  it('randomWord chains mix over seed, stream, key words, column and draw', () => {
    expect(randomWord(0, 0, 0, 0, 0, 0)).toBe(0x4c727af3);
    expect(randomWord(42, 777, 5, 0, 3, 1)).toBe(0x625b3371);
    expect(randomWord(1, 2, 0xffffffff, 0xffffffff, 0, 0)).toBe(0x32aa3edd);
    let h = mixBig(BigInt((7 ^ 0x9e3779b9) >>> 0));
    for (const v of [9n, 100n, 0n, 2n, 0n]) h = mixBig(h ^ v);
    expect(randomWord(7, 9, 100, 0, 2, 0)).toBe(Number(h));
  });

  it('uniform01 = ((word >>> 8) + 0.5) / 2^24, never 0 or 1', () => {
    expect(uniform01(0x4c727af3)).toBe((0x4c727a + 0.5) / 16777216);
    expect(uniform01(0x4c727af3)).toBeCloseTo(0.29862180352211, 14);
    expect(uniform01(0x625b3371)).toBeCloseTo(0.38420411944389343, 14);
    expect(uniform01(0)).toBe(0.5 / 16777216);
    expect(uniform01(0xffffffff)).toBe((16777215 + 0.5) / 16777216);
    expect(uniform01(0xffffffff)).toBeLessThan(1);
  });

  it('keyWords splits 64-bit keys (int32 sign-extended); fnv1a32 matches the FNV test vectors', () => {
    expect(keyWords(0n)).toEqual([0, 0]);
    expect(keyWords(-1n)).toEqual([0xffffffff, 0xffffffff]);
    expect(keyWords(-1)).toEqual([0xffffffff, 0xffffffff]);
    expect(keyWords(-(2n ** 63n))).toEqual([0, 0x80000000]);
    expect(keyWords(2n ** 32n + 5n)).toEqual([5, 1]);
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
  });

  it('standardNormal is Box-Muller (cosine branch)', () => {
    expect(standardNormal(Math.exp(-0.5), 0)).toBeCloseTo(1, 12);
    expect(standardNormal(Math.exp(-2), 0.5)).toBeCloseTo(-2, 12);
    expect(standardNormal(0.3, 0.25)).toBeCloseTo(0, 12);
  });
});

describe('initializers', () => {
  it('specs carry their parameters and defaults', () => {
    expect(initializers.zeros()).toEqual({ kind: 'zeros' });
    expect(initializers.ones()).toEqual({ kind: 'ones' });
    expect(initializers.constant(2)).toEqual({ kind: 'constant', value: 2 });
    expect(initializers.uniform()).toEqual({ kind: 'uniform', min: -0.05, max: 0.05 });
    expect(initializers.normal()).toEqual({ kind: 'normal', mean: 0, std: 1 });
    expect(initializers.truncatedNormal(1, 2)).toEqual({ kind: 'truncatedNormal', mean: 1, std: 2 });
    expect(initializers.row([1, 2]).kind).toBe('row');
    expect(initializers.fromArray([1, 2]).kind).toBe('array');
    expect(isInitializerSpec(initializers.ones())).toBe(true);
    expect(isInitializerSpec({ kind: 'nope' })).toBe(false);
    expect(isInitializerSpec(null)).toBe(false);
  });

  it('validate their parameters', () => {
    throwsCode(() => initializers.constant(NaN), ErrorCodes.INVALID_ARGUMENT, 'value');
    throwsCode(() => initializers.uniform(1, 0), ErrorCodes.INVALID_ARGUMENT, 'max');
    throwsCode(() => initializers.uniform(Infinity, 0), ErrorCodes.INVALID_ARGUMENT, 'min');
    throwsCode(() => initializers.normal(0, -1), ErrorCodes.INVALID_ARGUMENT, 'std');
    throwsCode(() => initializers.normal('0' as never), ErrorCodes.INVALID_TYPE, 'mean');
    throwsCode(() => initializers.truncatedNormal(0, -1), ErrorCodes.INVALID_ARGUMENT, 'std');
    throwsCode(() => initializers.fromFunction(5 as never), ErrorCodes.INVALID_TYPE, 'fn');
  });

  it('resolveInitializer checks sizes against the table and evaluates functions once', () => {
    expect(resolveInitializer(undefined, 3, undefined)).toEqual({ kind: 'zeros' });
    throwsCode(() => resolveInitializer({ kind: 'x' } as never, 3, undefined), ErrorCodes.INVALID_TYPE, 'initializer');
    throwsCode(() => resolveInitializer(initializers.row([1, 2]), 3, undefined), ErrorCodes.INVALID_ARGUMENT, 'initializer.values');
    throwsCode(() => resolveInitializer(initializers.fromArray([1, 2]), 1, undefined), ErrorCodes.INVALID_ARGUMENT, 'initializer');
    throwsCode(() => resolveInitializer(initializers.fromArray([1, 2]), 1, 3), ErrorCodes.INVALID_ARGUMENT, 'initializer.values');
    throwsCode(() => resolveInitializer(initializers.fromFunction(() => [1]), 1, undefined), ErrorCodes.INVALID_ARGUMENT, 'initializer');
    throwsCode(() => resolveInitializer(initializers.fromFunction(() => [1]), 1, 2), ErrorCodes.INVALID_ARGUMENT, 'initializer([2, 1])');
    throwsCode(() => resolveInitializer(initializers.fromFunction(() => [1, NaN]), 1, 2), ErrorCodes.INVALID_ARGUMENT, 'initializer([2, 1])[1]');
    let calls = 0;
    const r = resolveInitializer(initializers.fromFunction(([n, d]) => (calls++, Array.from({ length: n * d }, (_, i) => i))), 2, 2);
    expect(calls).toBe(1);
    expect(r.kind).toBe('array');
    expect(Array.from((r as { values: Float32Array }).values)).toEqual([0, 1, 2, 3]);
  });

  it('initialRow fills per kind; uniform uses (seed, stream, key words, column, draw 0)', () => {
    const out = new Float32Array(6);
    initialRow({ kind: 'constant', value: 3 }, 0, 0, 1n, 2, out, 2);
    expect(Array.from(out)).toEqual([0, 0, 3, 3, 0, 0]);
    initialRow({ kind: 'array', values: Float32Array.from([1, 2, 3, 4]) }, 0, 0, 1n, 2, out, 0, 1);
    expect(Array.from(out.subarray(0, 2))).toEqual([3, 4]);
    initialRow({ kind: 'row', values: Float32Array.from([7, 8]) }, 0, 0, 1n, 2, out, 4);
    expect(Array.from(out.subarray(4))).toEqual([7, 8]);
    const u = new Float32Array(2);
    initialRow({ kind: 'uniform', min: -1, max: 3 }, 42, 777, 5n, 2, u);
    expect(u[1]).toBe(Math.fround(-1 + 4 * uniform01(randomWord(42, 777, 5, 0, 1, 0))));
    expect(u[0]).toBe(Math.fround(-1 + 4 * uniform01(randomWord(42, 777, 5, 0, 0, 0))));
    // the same key as int32 and int64 gets the same row
    const a = new Float32Array(3);
    const b = new Float32Array(3);
    initialRow({ kind: 'normal', mean: 0, std: 1 }, 1, 2, -5, 3, a);
    initialRow({ kind: 'normal', mean: 0, std: 1 }, 1, 2, -5n, 3, b);
    expect(Array.from(a)).toEqual(Array.from(b));
    const n = new Float32Array(1);
    initialRow({ kind: 'normal', mean: 1, std: 2 }, 3, 4, 9n, 1, n);
    const z = standardNormal(uniform01(randomWord(3, 4, 9, 0, 0, 0)), uniform01(randomWord(3, 4, 9, 0, 0, 1)));
    expect(n[0]).toBe(Math.fround(1 + 2 * z));
  });
});
