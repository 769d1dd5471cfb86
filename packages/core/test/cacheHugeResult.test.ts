import { describe, expect, it } from 'vitest';
import { createCache, EmbeddingError } from '../src/index.js';

// A query without `out` makes its result array; one larger than any Float32Array (2^32 floats on
// Node 20) threw Buffer.allocUnsafeSlow's uncoded RangeError.
const DIM = 1 << 20;
const FLOATS = 2 ** 32 + DIM; // 4097 keys at dim 2^20
const refuses = ((): boolean => {
  try {
    new Float32Array(FLOATS); // a Node that makes it maps it lazily: nothing touched, dropped at once
    return false;
  } catch {
    return true;
  }
})();

describe('cache query results no Float32Array holds', () => {
  it.skipIf(!refuses)(`FAILED_PRECONDITION, the cache unchanged${refuses ? '' : ' (skipped: this Node makes such arrays)'}`, () => {
    const c = createCache({ capacity: 4, dim: DIM }, { backend: 'reference' });
    c.insert([7n], new Float32Array(DIM).fill(0.5));
    const keys = BigInt64Array.from({ length: FLOATS / DIM }, (_, i) => BigInt(i));
    let caught: unknown;
    try {
      c.query(keys);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(EmbeddingError);
    expect((caught as EmbeddingError).code).toBe('FAILED_PRECONDITION');
    expect((caught as Error).message).toMatch(/^Expected a query result one Float32Array can hold but it needs 4296015872 floats/);
    expect([c.size(), Array.from(c.keys())]).toEqual([1, [7n]]);
    c.dispose();
  });
});
