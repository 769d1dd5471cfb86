import { describe, expect, it } from 'vitest';
import { EmbeddingError } from './errors.js';
import { resolveTableOptions } from './tableOptions.js';
import { roundBfloat16, roundFloat16, roundToStorage } from './storageDtype.js';
import { modelRound } from './testing/sections/storage.js';

/** Float32 values from random bit patterns (every exponent, subnormals, NaN payloads). */
function randomFloats(n: number, seed: number): Float32Array {
  const u = new Uint32Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    u[i] = (x ^ (x >>> 13) ^ Math.imul(i, 0x9e3779b9)) >>> 0;
  }
  return new Float32Array(u.buffer);
}

const same = (a: number, b: number) => Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));

describe('storage dtypes: rounding', () => {
  for (const [dtype, round] of [
    ['bfloat16', roundBfloat16],
    ['float16', roundFloat16],
  ] as const) {
    it(`${dtype}: matches an arithmetic model of round-to-nearest-even on 200k random float32 bit patterns`, () => {
      const xs = randomFloats(200_000, dtype.length);
      const bad: string[] = [];
      for (const x of xs) if (!same(round(x), modelRound(dtype, x)) && bad.length < 5) bad.push(`${x}: ${round(x)} vs ${modelRound(dtype, x)}`);
      expect(bad).toEqual([]);
      const arr = Float32Array.from(xs.subarray(0, 1000));
      roundToStorage(dtype, arr, 10, 990);
      arr.forEach((v, i) => expect(same(v, i < 10 || i >= 990 ? xs[i]! : modelRound(dtype, xs[i]!)), `[${i}]`).toBe(true));
    });
  }

  it('hand-picked values: ties to even, overflow, subnormals', () => {
    expect(roundBfloat16(1 + 2 ** -8)).toBe(1);
    expect(roundBfloat16(1 + 3 * 2 ** -8)).toBe(1 + 2 ** -6);
    expect(roundBfloat16(3.4028235e38)).toBe(Infinity);
    expect(roundFloat16(65519)).toBe(65504);
    expect(roundFloat16(-65520)).toBe(-Infinity);
    expect(roundFloat16(2 ** -25)).toBe(0);
    expect(roundFloat16(3 * 2 ** -26)).toBe(2 ** -24);
    expect(roundFloat16(0.1)).toBe(0.0999755859375);
    expect(Object.is(roundFloat16(-1e-10), -0)).toBe(true);
  });

  it('bad arguments are coded errors; resolveTableOptions defaults to float32 and rejects unknown dtypes', () => {
    for (const call of [() => roundFloat16('1' as unknown as number), () => roundToStorage('half' as 'float16', new Float32Array(1)), () => roundToStorage('float16', [1] as unknown as Float32Array), () => roundToStorage('float16', new Float32Array(2), 1, 3)]) {
      expect(call).toThrow(EmbeddingError);
    }
    expect(resolveTableOptions({ dim: 1 }).storageDtype).toBe('float32');
    expect(resolveTableOptions({ dim: 1, storageDtype: 'bfloat16' }).storageDtype).toBe('bfloat16');
    try {
      resolveTableOptions({ dim: 1, storageDtype: 'int8' as 'float16' });
      expect.unreachable();
    } catch (e) {
      expect((e as EmbeddingError).code).toBe('INVALID_ARGUMENT');
      expect((e as EmbeddingError).message).toContain('storageDtype');
    }
  });
});
