/**
 * Counter-based random numbers keyed by (seed, table stream, key, column, draw).
 * Pure 32-bit integer arithmetic so the C++ and CUDA backends reproduce it bit for
 * bit (see `native` in cpu-backend). A key's initial row therefore depends only on
 * (seed, table, key), never on batch order or sharding.
 *
 *   h = mix(seed ^ 0x9e3779b9); h = mix(h ^ stream); h = mix(h ^ keyLo);
 *   h = mix(h ^ keyHi); h = mix(h ^ column); h = mix(h ^ draw)
 *   mix(x): x ^= x >>> 16; x *= 0x7feb352d; x ^= x >>> 15; x *= 0x846ca68b; x ^= x >>> 16
 *   uniform01 = ((h >>> 8) + 0.5) / 2^24          (never 0 or 1)
 */

export function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

/** 32-bit FNV-1a of a string's UTF-8 bytes: the default stream id of a table name. */
export function fnv1a32(text: string): number {
  const bytes = new TextEncoder().encode(text);
  let h = 0x811c9dc5;
  for (const b of bytes) {
    h ^= b;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function randomWord(
  seed: number,
  stream: number,
  keyLo: number,
  keyHi: number,
  column: number,
  draw: number,
): number {
  let h = mix32((seed ^ 0x9e3779b9) >>> 0);
  h = mix32((h ^ stream) >>> 0);
  h = mix32((h ^ keyLo) >>> 0);
  h = mix32((h ^ keyHi) >>> 0);
  h = mix32((h ^ column) >>> 0);
  h = mix32((h ^ draw) >>> 0);
  return h;
}

/** Low and high 32-bit words of a 64-bit key (int32 keys are sign-extended). */
export function keyWords(key: bigint | number): [number, number] {
  const k = BigInt.asUintN(64, typeof key === 'bigint' ? key : BigInt(key));
  return [Number(k & 0xffffffffn), Number(k >> 32n)];
}

export function uniform01(word: number): number {
  return ((word >>> 8) + 0.5) / 16777216;
}

/** Standard normal from two draws (Box-Muller, cosine branch). */
export function standardNormal(u1: number, u2: number): number {
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}

/** Truncation bound of truncatedNormal, in standard deviations (TF's). */
export const TRUNCATION_STDS = 2;
/** Attempts before truncatedNormal clamps. */
export const TRUNCATION_ATTEMPTS = 16;
