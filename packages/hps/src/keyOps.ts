/**
 * Key bookkeeping of the lookup path on int64 keys read as two uint32 words, so that no
 * BigInt is created per key (a BigInt per key costs more than the native lookup itself
 * and blocks the event loop on large batches).
 */

const words = (k: BigInt64Array): Uint32Array => new Uint32Array(k.buffer, k.byteOffset, k.length * 2);

/** keys[pos[j]] for every j: `[pos.length]`. */
export function gatherKeys(keys: BigInt64Array, pos: ArrayLike<number>): BigInt64Array {
  const out = new BigInt64Array(pos.length);
  const w = words(keys);
  const o = words(out);
  for (let j = 0; j < pos.length; j++) {
    const i = pos[j]!;
    o[2 * j] = w[2 * i]!;
    o[2 * j + 1] = w[2 * i + 1]!;
  }
  return out;
}

/** Copies row `from` of `src` to row `to` of `dst` (`dim` floats each). */
export function copyRow(dst: Float32Array, to: number, src: Float32Array, from: number, dim: number): void {
  const a = to * dim;
  const b = from * dim;
  for (let c = 0; c < dim; c++) dst[a + c] = src[b + c]!;
}

/**
 * Unique keys of a batch (first-appearance order) and, per entry, the index of its
 * key among them: an open-addressing table of the keys' two words in typed arrays.
 */
export function dedupe(keys: BigInt64Array): { unique: BigInt64Array; inverse: Int32Array } {
  const n = keys.length;
  const inverse = new Int32Array(n);
  if (n === 0) return { unique: new BigInt64Array(0), inverse };
  let cap = 16;
  while (cap < n * 2) cap <<= 1;
  const mask = cap - 1;
  const slots = new Int32Array(cap).fill(-1);
  const w = words(keys);
  const uw = new Uint32Array(n * 2);
  let u = 0;
  for (let i = 0; i < n; i++) {
    const lo = w[2 * i]!;
    const hi = w[2 * i + 1]!;
    let s = (Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) >>> 0) & mask;
    for (;;) {
      const at = slots[s]!;
      if (at < 0) {
        slots[s] = u;
        uw[2 * u] = lo;
        uw[2 * u + 1] = hi;
        inverse[i] = u++;
        break;
      }
      if (uw[2 * at] === lo && uw[2 * at + 1] === hi) {
        inverse[i] = at;
        break;
      }
      s = (s + 1) & mask;
    }
  }
  return { unique: new BigInt64Array(uw.buffer, 0, u).slice(), inverse };
}

/** Number of distinct keys of a batch. */
export function countUnique(keys: BigInt64Array): number {
  return dedupe(keys).unique.length;
}

const waiting: (() => void)[] = [];
let pumping = false;

function pump(): void {
  const next = waiting.shift();
  if (!next) {
    pumping = false;
    return;
  }
  next();
  // scheduled from inside the check phase: runs on the NEXT turn of the event loop
  setImmediate(pump);
}

/**
 * Resolves on a turn of the event loop of its own: callers waiting at once are released
 * one per loop turn, so the synchronous parts of many large lookups issued together
 * (key checks, output allocation, inline native calls) never run back to back.
 */
export function ownTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (!pumping) {
      pumping = true;
      setImmediate(pump);
    }
  });
}
