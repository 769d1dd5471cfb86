import * as fc from 'fast-check';
import { describe, expect, it, type TestContext } from 'vitest';
import { createCache, type EmbeddingCache } from '../../cache.js';
import { Tensor } from '../../tensor.js';
import { EmbeddingError } from '../../errors.js';
import { cacheSetOf as setOf } from '../cacheSet.js';
import type { SuiteContext } from '../harness.js';

// ---- a plain model of the cache contract, written here (independent of the code under test) ----

/** Per set, a map key -> { last use, row }; a full set drops its least recently used key. */
class CacheModel {
  readonly ways: number;
  readonly sets: Map<bigint, { used: number; row: number[] }>[];
  clock = 0;

  constructor(
    capacity: number,
    ways: number,
    readonly dim: number,
  ) {
    this.ways = Math.min(ways, Math.max(capacity, 1));
    this.sets = Array.from({ length: Math.ceil(capacity / this.ways) }, () => new Map());
  }

  #set(k: bigint) {
    return this.sets.length === 0 ? undefined : this.sets[setOf(k, this.sets.length)]!;
  }

  query(keys: bigint[]): { rows: (number[] | null)[]; hits: number } {
    const rows = keys.map((k) => {
      const e = this.#set(k)?.get(k);
      if (!e) return null;
      e.used = ++this.clock;
      return e.row;
    });
    return { rows, hits: rows.filter((r) => r !== null).length };
  }

  insert(keys: bigint[], rows: number[][]): number {
    let evicted = 0;
    keys.forEach((k, i) => {
      const set = this.#set(k);
      if (!set) return;
      if (!set.has(k) && set.size === this.ways) {
        let lru: bigint | undefined;
        for (const [key, e] of set) if (lru === undefined || e.used < set.get(lru)!.used) lru = key;
        set.delete(lru!);
        evicted++;
      }
      set.set(k, { used: ++this.clock, row: rows[i]! });
    });
    return evicted;
  }

  update(keys: bigint[], rows: number[][]): number {
    let n = 0;
    keys.forEach((k, i) => {
      const e = this.#set(k)?.get(k);
      if (e) {
        e.row = rows[i]!;
        n++;
      }
    });
    return n;
  }

  remove(keys: bigint[]): number {
    return keys.filter((k) => this.#set(k)?.delete(k) ?? false).length;
  }

  keys(): bigint[] {
    return this.sets.flatMap((s) => [...s.keys()]).sort(cmp);
  }
}

const cmp = (a: bigint, b: bigint): number => (a < b ? -1 : a > b ? 1 : 0);
const big = (keys: bigint[]): BigInt64Array => BigInt64Array.from(keys);
const flat = (rows: number[][]): Float32Array => Float32Array.from(rows.flat());
const sortedKeys = (c: EmbeddingCache): bigint[] => [...c.keys()].sort(cmp);

/** The first `count` keys (from 0 up) whose set is `set` among `sets`. */
function keysOfSet(set: number, sets: number, count: number): bigint[] {
  const out: bigint[] = [];
  for (let k = 0n; out.length < count; k++) if (setOf(k, sets) === set) out.push(k);
  return out;
}

/** Checks a query's result against the model's rows. */
function expectQuery(c: EmbeddingCache, m: CacheModel, keys: bigint[]): void {
  const got = c.query(big(keys));
  const want = m.query(keys);
  expect(got.hits).toBe(want.hits);
  expect([...got.exists]).toEqual(want.rows.map((r) => (r ? 1 : 0)));
  want.rows.forEach((r, i) => {
    expect([...got.values.subarray(i * m.dim, (i + 1) * m.dim)]).toEqual(r ?? new Array<number>(m.dim).fill(0));
  });
}

function expectCode(fn: () => unknown, code: string): void {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  expect(caught).toBeInstanceOf(EmbeddingError);
  expect((caught as EmbeddingError).code).toBe(code);
}

type Step =
  | { op: 'insert' | 'update'; keys: bigint[]; rows: number[][] }
  | { op: 'query' | 'remove'; keys: bigint[] }
  | { op: 'clear' };

/** The set-associative LRU cache (cache.ts's contract): layout, eviction within a set, ops, bad input. */
export function cacheSection(ctx: SuiteContext): void {
  const caches: EmbeddingCache[] = [];
  /** A cache on the backend under test, disposed after the test; skips (with the reason printed) when the backend has none. */
  const make = (t: TestContext, capacity: number, dim: number, ways?: number): EmbeddingCache => {
    if (typeof ctx.backend.createCache !== 'function') {
      const why = `backend "${ctx.backend.name}" has no embedding cache (createCache is optional; core's createCache says UNSUPPORTED there)`;
      console.warn(`[conformance ${ctx.name}] cache test skipped: ${why}`);
      t.skip(why);
    }
    const c = createCache({ capacity, dim, ...(ways === undefined ? {} : { ways }) }, { backend: ctx.backend });
    caches.push(c);
    return c;
  };
  const disposeCaches = () => {
    for (const c of caches.splice(0)) c.dispose();
  };

  describe('set-associative cache', () => {
    it('layout: capacity rounded up to whole sets of `ways`, ways capped by the capacity, 0 caches nothing', (t) => {
      try {
        const a = make(t, 100, 2);
        expect([a.sets(), a.ways(), a.capacity(), a.size()]).toEqual([7, 16, 112, 0]);
        const b = make(t, 3, 2, 16);
        expect([b.sets(), b.ways(), b.capacity()]).toEqual([1, 3, 3]);
        const z = make(t, 0, 2);
        expect(z.capacity()).toBe(0);
        expect(z.insert(big([1n, 2n]), new Float32Array(4).fill(1))).toBe(0);
        expect(z.size()).toBe(0);
        const q = z.query(big([1n]));
        expect([q.hits, q.exists[0]]).toEqual([0, 0]);
      } finally {
        disposeCaches();
      }
    });

    it('a full set evicts its own least recently used key (worked by hand); other sets are untouched; update is not a use', (t) => {
      try {
        const c = make(t, 8, 2, 4); // 2 sets of 4
        expect(c.sets()).toBe(2);
        const s0 = keysOfSet(0, 2, 5);
        const s1 = keysOfSet(1, 2, 2);
        const row = (k: bigint): number[] => [Number(k), -Number(k)];
        for (const k of s0.slice(0, 4)) expect(c.insert(big([k]), flat([row(k)]))).toBe(0);
        expect(c.insert(big(s1), flat(s1.map(row)))).toBe(0);
        // touch s0[0]: s0[1] becomes set 0's least recently used key
        const hit = c.query(big([s0[0]!]));
        expect([hit.hits, ...hit.values]).toEqual([1, ...row(s0[0]!)]);
        expect(c.insert(big([s0[4]!]), flat([row(s0[4]!)]))).toBe(1);
        expect(sortedKeys(c)).toEqual([s0[0]!, s0[2]!, s0[3]!, s0[4]!, ...s1].sort(cmp));
        // an update overwrites but does not count as a use: s0[2] is still the oldest
        expect(c.update(big([s0[2]!, 12345n]), flat([[7, 7], [8, 8]]))).toBe(1);
        expect(c.insert(big([s0[1]!]), flat([[1, 1]]))).toBe(1);
        const q = c.query(big([s0[0]!, s0[1]!, s0[2]!, s0[3]!, s0[4]!, s1[0]!, s1[1]!]));
        expect([...q.exists]).toEqual([1, 1, 0, 1, 1, 1, 1]);
        expect([...q.values]).toEqual([...row(s0[0]!), 1, 1, 0, 0, ...row(s0[3]!), ...row(s0[4]!), ...row(s1[0]!), ...row(s1[1]!)]);
        expect(c.size()).toBe(6);
      } finally {
        disposeCaches();
      }
    });

    it('duplicates in one batch apply in order; misses read as zeros; remove, clear and keys', (t) => {
      try {
        const c = make(t, 64, 1);
        expect(c.insert(big([5n, 6n, 5n]), Float32Array.from([1, 2, 3]))).toBe(0);
        const q = c.query(big([5n, 6n, 5n, 7n]), { out: { values: new Float32Array(4).fill(-9), exists: new Uint8Array(4) } });
        expect([...q.values]).toEqual([3, 2, 3, 0]); // a miss reads as zeros, in the caller's array too
        expect([...q.exists, q.hits]).toEqual([1, 1, 1, 0, 3]);
        expect(sortedKeys(c)).toEqual([5n, 6n]);
        expect(c.remove(big([5n, 5n, 8n]))).toBe(1);
        expect([...c.keys()]).toEqual([6n]);
        c.clear();
        expect([c.size(), c.keys().length]).toEqual([0, 0]);
      } finally {
        disposeCaches();
      }
    });

    it('random operation sequences match a plain model of the contract (fast-check)', (t) => {
      make(t, 1, 1); // skips when the backend has no cache
      disposeCaches();
      const key = fc.bigInt({ min: -40n, max: 40n }).map((k) => (k === 40n ? -(2n ** 63n) : k === -40n ? 2n ** 63n - 1n : k));
      const dim = 2;
      const rows = (n: number) => fc.array(fc.array(fc.integer({ min: -100, max: 100 }), { minLength: dim, maxLength: dim }), { minLength: n, maxLength: n });
      const step: fc.Arbitrary<Step> = fc.oneof(
        fc.array(key, { maxLength: 6 }).chain((keys) => fc.record({ op: fc.constantFrom('insert' as const, 'update' as const), keys: fc.constant(keys), rows: rows(keys.length) })),
        fc.record({ op: fc.constantFrom('query' as const, 'remove' as const), keys: fc.array(key, { maxLength: 6 }) }),
        fc.constant<Step>({ op: 'clear' }),
      );
      fc.assert(
        fc.property(fc.integer({ min: 0, max: 24 }), fc.constantFrom(1, 2, 4, 8), fc.array(step, { maxLength: 40 }), (capacity, ways, steps) => {
          const c = createCache({ capacity, dim, ways }, { backend: ctx.backend });
          try {
            const m = new CacheModel(capacity, ways, dim);
            expect([c.sets(), c.ways()]).toEqual([m.sets.length, m.ways]);
            for (const s of steps) {
              if (s.op === 'insert') expect(c.insert(big(s.keys), flat(s.rows))).toBe(m.insert(s.keys, s.rows));
              else if (s.op === 'update') expect(c.update(big(s.keys), flat(s.rows))).toBe(m.update(s.keys, s.rows));
              else if (s.op === 'remove') expect(c.remove(big(s.keys))).toBe(m.remove(s.keys));
              else if (s.op === 'query') expectQuery(c, m, s.keys);
              else {
                c.clear();
                for (const set of m.sets) set.clear();
              }
              expect(c.size()).toBe(m.keys().length);
            }
            expect(sortedKeys(c)).toEqual(m.keys());
          } finally {
            c.dispose();
          }
        }),
        { numRuns: ctx.propertyRuns },
      );
    });

    it('bad input throws a coded EmbeddingError and changes nothing; DISPOSED after dispose', (t) => {
      try {
        const bad = (o: unknown) => () => createCache(o as never, { backend: ctx.backend });
        make(t, 1, 1);
        expectCode(bad({ capacity: -1, dim: 2 }), 'INVALID_ARGUMENT');
        expectCode(bad({ capacity: 1.5, dim: 2 }), 'INVALID_ARGUMENT');
        expectCode(bad({ capacity: 8, dim: 0 }), 'INVALID_ARGUMENT');
        expectCode(bad({ capacity: 8, dim: 2, ways: 3 }), 'INVALID_ARGUMENT');
        expectCode(bad({ capacity: 8, dim: 2, ways: 128 }), 'INVALID_ARGUMENT');
        expectCode(bad({ capacity: 8, dim: 2, wayz: 4 }), 'INVALID_ARGUMENT');
        expectCode(bad(null), 'INVALID_TYPE');
        const c = make(t, 8, 2, 4);
        const m = new CacheModel(8, 4, 2);
        c.insert(big([1n, 2n, 3n]), Float32Array.from([1, 1, 2, 2, 3, 3]));
        m.insert([1n, 2n, 3n], [[1, 1], [2, 2], [3, 3]]);
        const junk: [() => unknown, string][] = [
          [() => c.query(['1'] as never), 'INVALID_TYPE'],
          [() => c.query([1.5]), 'INVALID_TYPE'],
          [() => c.query([1n << 63n]), 'OUT_OF_RANGE'],
          [() => c.query(Float64Array.from([1]) as never), 'INVALID_TYPE'],
          [() => c.query(big([1n]), { out: { values: new Float32Array(3) } }), 'SHAPE_MISMATCH'],
          [() => c.query(big([1n]), { out: { exists: new Uint8Array(2) } }), 'SHAPE_MISMATCH'],
          [() => c.query(big([1n]), { out: { values: new Float64Array(2) as never } }), 'INVALID_TYPE'],
          [() => c.query(big([1n]), { outt: null } as never), 'INVALID_ARGUMENT'],
          [() => c.insert(big([9n, 1n]), new Float32Array(3)), 'SHAPE_MISMATCH'],
          [() => c.insert(big([9n]), [0, 0] as never), 'INVALID_TYPE'],
          [() => c.insert(null as never, new Float32Array(0)), 'INVALID_TYPE'],
          [() => c.update(big([1n]), new Float32Array(4)), 'SHAPE_MISMATCH'],
          [() => c.remove(new Float32Array([1]) as never), 'INVALID_TYPE'],
        ];
        for (const [fn, code] of junk) {
          expectCode(fn, code);
          expect(sortedKeys(c)).toEqual(m.keys());
        }
        expectQuery(c, m, [1n, 2n, 3n, 9n]);
        c.dispose();
        c.dispose();
        expect(c.disposed).toBe(true);
        for (const fn of [() => c.query(big([1n])), () => c.insert(big([1n]), new Float32Array(2)), () => c.keys(), () => c.size(), () => c.clear()]) expectCode(fn, 'DISPOSED');
      } finally {
        disposeCaches();
      }
    });

    it('takes keys in every key form (number[], bigint[], Int32Array, an int Tensor) as BigInt64Array', (t) => {
      try {
        const c = make(t, 8, 2, 4);
        expect(c.insert([1, -2], Float32Array.from([1, 1, 2, 2]))).toBe(0);
        expect(c.insert([3n], Float32Array.from([3, 3]))).toBe(0);
        expect(c.update(Int32Array.from([-2, 7]), Float32Array.from([5, 5, 7, 7]))).toBe(1);
        const q = c.query(new Tensor(BigInt64Array.from([3n, -2n, 7n]), [3]));
        expect(Array.from(q.values)).toEqual([3, 3, 5, 5, 0, 0]);
        expect(Array.from(q.exists)).toEqual([1, 1, 0]);
        expect(c.remove([1, 3])).toBe(2);
        expect(sortedKeys(c)).toEqual([-2n]);
      } finally {
        disposeCaches();
      }
    });
  });
}
