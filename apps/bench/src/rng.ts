/**
 * Deterministic random numbers and key draws for the benchmarks. Pure and
 * seeded, so every run (and every peer within a run) sees the same keys.
 */

/** mulberry32: a small, fast 32-bit generator. Returns uint32. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** Uniform double in [0, 1) with 53 random bits. */
export function uniformSource(seed: number): () => number {
  const next = mulberry32(seed);
  return () => (next() * 2 ** 21 + (next() >>> 11)) / 2 ** 53;
}

/** murmur3's fmix32: a bijection on uint32. */
export function fmix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Writes keys number start..start+out.length-1 of the key sequence `seed` into
 * `out`. Keys are distinct pseudo-random int64 values (distinct because the low
 * word is a bijection of the key number). Built through 32-bit words: no BigInt
 * arithmetic.
 */
export function fillKeys(out: BigInt64Array, start: number, seed = 1): BigInt64Array {
  const w = new Uint32Array(out.buffer, out.byteOffset, out.length * 2);
  const s = fmix32(Math.imul(seed, 0x9e3779b9));
  for (let j = 0; j < out.length; j++) {
    const i = start + j;
    w[2 * j] = fmix32(i ^ s);
    w[2 * j + 1] = fmix32((i + 0x632be5ab) ^ s) ^ 0x5bd1e995;
  }
  return out;
}

/** The first n keys of the key sequence `seed` (see {@link fillKeys}). */
export function makeKeys(n: number, seed = 1): BigInt64Array {
  if (!Number.isSafeInteger(n) || n < 0 || n > 2 ** 32) throw new RangeError(`Expected n in [0, 2^32] but received ${n}`);
  return fillKeys(new BigInt64Array(n), 0, seed);
}

/** keys[idx[i]] for every i, copied word by word (no BigInt objects). */
export function pickKeys(keys: BigInt64Array, idx: Uint32Array): BigInt64Array {
  const out = new BigInt64Array(idx.length);
  const src = new Uint32Array(keys.buffer, keys.byteOffset, keys.length * 2);
  const dst = new Uint32Array(out.buffer);
  for (let i = 0; i < idx.length; i++) {
    const j = idx[i]! * 2;
    dst[2 * i] = src[j]!;
    dst[2 * i + 1] = src[j + 1]!;
  }
  return out;
}

/**
 * Zipf(s) over ranks 1..n by rejection-inversion (Hörmann & Derflinger 1996, as
 * in Apache Commons RNG): O(1) per draw for any n, P(k) ∝ k^-s.
 */
export class ZipfSampler {
  readonly n: number;
  readonly s: number;
  readonly #u: () => number;
  readonly #hX1: number;
  readonly #hN: number;
  readonly #t: number;

  constructor(n: number, s: number, seed = 1) {
    if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`Expected n to be an integer >= 1 but received ${n}`);
    if (!(s > 0) || !Number.isFinite(s)) throw new RangeError(`Expected s > 0 but received ${s}`);
    this.n = n;
    this.s = s;
    this.#u = uniformSource(seed);
    this.#hX1 = this.#hIntegral(1.5) - 1;
    this.#hN = this.#hIntegral(n + 0.5);
    this.#t = 2 - this.#hIntegralInverse(this.#hIntegral(2.5) - this.#h(2));
  }

  /** A rank in [1, n]. */
  next(): number {
    for (;;) {
      const u = this.#hN + this.#u() * (this.#hX1 - this.#hN);
      const x = this.#hIntegralInverse(u);
      let k = Math.floor(x + 0.5);
      if (k < 1) k = 1;
      else if (k > this.n) k = this.n;
      if (k - x <= this.#t || u >= this.#hIntegral(k + 0.5) - this.#h(k)) return k;
    }
  }

  #h(x: number): number {
    return Math.exp(-this.s * Math.log(x));
  }
  #hIntegral(x: number): number {
    const lx = Math.log(x);
    return helper2((1 - this.s) * lx) * lx;
  }
  #hIntegralInverse(x: number): number {
    let t = x * (1 - this.s);
    if (t < -1) t = -1;
    return Math.exp(helper1(t) * x);
  }
}

/** log1p(x)/x, accurate near 0. */
function helper1(x: number): number {
  return Math.abs(x) > 1e-8 ? Math.log1p(x) / x : 1 - x * (0.5 - x * (1 / 3 - 0.25 * x));
}
/** expm1(x)/x, accurate near 0. */
function helper2(x: number): number {
  return Math.abs(x) > 1e-8 ? Math.expm1(x) / x : 1 + x * 0.5 * (1 + x * (1 / 3) * (1 + 0.25 * x));
}

/**
 * Scatters ranks over [0, n): rank r (1-based) -> ((r-1) * m) mod n, with m a prime
 * larger than any n used here, hence coprime to n: a bijection, so the hot keys
 * are spread over the table instead of being its first rows.
 */
export function scatterRank(rank: number, n: number): number {
  const m = 2654435761 % n;
  return ((rank - 1) * m) % n;
}

export type Distribution = 'uniform' | { zipf: number };

export function distributionName(d: Distribution): string {
  return d === 'uniform' ? 'uniform' : `zipf(${d.zipf})`;
}

/** `count` row indices in [0, n) drawn from `dist`. */
export function drawIndices(count: number, n: number, dist: Distribution, seed = 7): Uint32Array {
  const out = new Uint32Array(count);
  if (dist === 'uniform') {
    const u = uniformSource(seed);
    for (let i = 0; i < count; i++) out[i] = Math.floor(u() * n);
  } else {
    const z = new ZipfSampler(n, dist.zipf, seed);
    for (let i = 0; i < count; i++) out[i] = scatterRank(z.next(), n);
  }
  return out;
}
