import { describe, expect, it } from 'vitest';
import { valuePattern } from './tables.js';

describe('valuePattern', () => {
  it('holds ((j * 7919) mod 1000) / 1000 - 0.4995 as float32 at every index j, for lengths around its period and its copy blocks', () => {
    for (const [rows, dim] of [[1, 1], [1, 999], [1, 1000], [1, 1001], [3, 667], [2048, 3], [4096, 64], [5, 12345]] as const) {
      const v = valuePattern(rows, dim);
      expect(v.length).toBe(rows * dim);
      const expected = new Float32Array(rows * dim);
      for (let j = 0; j < expected.length; j++) expected[j] = ((j * 7919) % 1000) / 1000 - 0.4995;
      expect(Buffer.from(v.buffer).equals(Buffer.from(expected.buffer))).toBe(true);
    }
    expect(valuePattern(0, 64).length).toBe(0);
  });
});
