// The dynamic table keeps its key/score records narrow (12 bytes: 32-bit scores) until a call
// may store a score of 2^32 or more, then widens them (16 bytes) before the call changes
// anything. Seen from JS only in memoryUsage(): every key, value and score stays exact, and
// a call the table rejects leaves it as it was, narrow included.
import { createTable } from '@embedstack/core';
import { cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

const DIM = 4;
const CAP = 64;

function state(t: ReturnType<typeof createTable>): unknown {
  const b = t.exportSync();
  const order = Array.from(b.keys, (k, i) => [k, i] as const).sort((x, y) => (x[0] < y[0] ? -1 : 1));
  return order.map(([k, i]) => [k, Array.from(b.values.subarray(i * DIM, (i + 1) * DIM)), b.scores[i]]);
}

describe('narrow key/score records (cpu dynamic table)', () => {
  it('a customized score >= 2^32 widens the records (memoryUsage + 4 B per row of capacity); a rejected call changes nothing', () => {
    const t = createTable({ dim: DIM, initCapacity: CAP, scorePolicy: 'customized' }, { backend: cpuBackend });
    try {
      const keys = BigInt64Array.from([3n, -5n]);
      const values = Float32Array.from({ length: 2 * DIM }, (_, i) => i + 0.5);
      t.upsertSync(keys, values, { scores: BigUint64Array.from([2n ** 32n - 1n, 7n]) });
      const narrow = t.memoryUsage();
      const before = state(t);
      expect(before).toEqual([
        [-5n, [4.5, 5.5, 6.5, 7.5], 7n],
        [3n, [0.5, 1.5, 2.5, 3.5], 2n ** 32n - 1n],
      ]);
      // rejected: values of the wrong size, scores of the wrong length
      expect(() => t.upsertSync(keys, values.subarray(0, DIM), { scores: BigUint64Array.from([2n ** 40n, 1n]) })).toThrow();
      expect(() => t.upsertSync(keys, values, { scores: BigUint64Array.from([2n ** 40n]) })).toThrow();
      expect(t.memoryUsage()).toBe(narrow);
      expect(state(t)).toEqual(before);
      // accepted: wide from here on, nothing else changes
      t.upsertSync(BigInt64Array.from([9n]), Float32Array.from([1, 2, 3, 4]), { scores: BigUint64Array.from([2n ** 40n + 3n]) });
      expect(t.memoryUsage()).toBe(narrow + CAP * 4);
      expect(state(t)).toEqual([...(before as unknown[]), [9n, [1, 2, 3, 4], 2n ** 40n + 3n]]);
      t.upsertSync(BigInt64Array.from([3n]), Float32Array.from([8, 8, 8, 8]));
      expect(state(t)).toEqual([
        [-5n, [4.5, 5.5, 6.5, 7.5], 7n],
        [3n, [8, 8, 8, 8], 2n ** 32n - 1n],
        [9n, [1, 2, 3, 4], 2n ** 40n + 3n],
      ]);
    } finally {
      t.dispose();
    }
  });

  it('an epoch past 0 widens an epochLru table at its next read; scores are epoch << 32 | clock', () => {
    const t = createTable({ dim: DIM, initCapacity: CAP, scorePolicy: 'epochLru' }, { backend: cpuBackend });
    try {
      t.upsertSync(BigInt64Array.from([1n, 2n]), new Float32Array(2 * DIM).fill(0.25)); // clock 1
      const narrow = t.memoryUsage();
      t.setEpoch(3);
      expect(t.findSync(BigInt64Array.from([2n])).exists[0]).toBe(1); // clock 2
      expect(t.memoryUsage()).toBe(narrow + CAP * 4);
      const b = t.exportSync();
      const scores = new Map(Array.from(b.keys, (k, i) => [k, b.scores[i]]));
      expect(scores.get(1n)).toBe(1n);
      expect(scores.get(2n)).toBe((3n << 32n) | 2n);
    } finally {
      t.dispose();
    }
  });
});
