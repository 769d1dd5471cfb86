import { describe, expect, it } from 'vitest';
import { initializers } from '../../initializers.js';
import { expectClose, INT64_MAX, INT64_MIN, opsFor, type SuiteContext } from '../harness.js';

// An independent transcription of the generator documented in random.ts.
function mix(x: number): number {
  x = (x ^ (x >>> 16)) >>> 0;
  x = Math.imul(x, 0x7feb352d) >>> 0;
  x = (x ^ (x >>> 15)) >>> 0;
  x = Math.imul(x, 0x846ca68b) >>> 0;
  return (x ^ (x >>> 16)) >>> 0;
}
function word(seed: number, stream: number, key: bigint, column: number, draw: number): number {
  const u = BigInt.asUintN(64, key);
  let h = mix((seed ^ 0x9e3779b9) >>> 0);
  for (const v of [stream, Number(u & 0xffffffffn), Number(u >> 32n), column, draw]) h = mix((h ^ v) >>> 0);
  return h;
}
const unit = (w: number) => (Math.floor(w / 256) + 0.5) / 16777216;
function fnv(text: string): number {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(text)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h;
}

const KEYS = [INT64_MIN, -1n, 0n, 1n, 12345n, 1n << 40n, INT64_MAX];

/** Deterministic initial values: same key -> same row whatever the batch, table or backend call. */
export function initializersSection(ctx: SuiteContext): void {
  for (const form of ctx.forms) {
    const ops = opsFor(form);
    describe(`initializers, ${form} form`, () => {
      it('uniform rows are the documented counter-based generator, keyed by (seed, stream, key, column)', async () => {
        const t = ctx.make({ dim: 4, initializer: initializers.uniform(-0.5, 1.5), seed: 42, stream: 777 });
        const r = await ops.findOrInsert(t, KEYS);
        const expected = KEYS.flatMap((k) => [0, 1, 2, 3].map((c) => -0.5 + 2 * unit(word(42, 777, k, c, 0))));
        expectClose(r.values, expected, 'uniform rows', 1e-6, 1e-7);
      });

      it('the default stream is FNV-1a of the table name', async () => {
        const a = ctx.make({ dim: 3, name: 'user_embedding', initializer: initializers.uniform(), seed: 7 });
        const b = ctx.make({ dim: 3, name: 'other', stream: fnv('user_embedding'), initializer: initializers.uniform(), seed: 7 });
        expect(Array.from((await ops.find(a, KEYS)).values)).toEqual(Array.from((await ops.find(b, KEYS)).values));
      });

      it('the same key gets the same row in any batch order, in another table with the same name and seed, by find or findOrInsert', async () => {
        for (const init of [initializers.uniform(-1, 1), initializers.normal(0.5, 2), initializers.truncatedNormal(0, 0.3)]) {
          const opts = { dim: 5, name: 'emb', seed: 9, initializer: init };
          const a = ctx.make(opts);
          const b = ctx.make(opts);
          const ra = await ops.findOrInsert(a, KEYS);
          const rev = KEYS.slice().reverse();
          await ops.findOrInsert(b, rev.slice(0, 3));
          const rb = await ops.findOrInsert(b, rev);
          const fresh = await ops.find(ctx.make(opts), KEYS);
          KEYS.forEach((k, i) => {
            const j = KEYS.length - 1 - i;
            expect(Array.from(rb.values.subarray(j * 5, j * 5 + 5)), `key ${k}`).toEqual(Array.from(ra.values.subarray(i * 5, i * 5 + 5)));
          });
          expect(Array.from(fresh.values)).toEqual(Array.from(ra.values));
          expect(new Set(Array.from(ra.values)).size).toBeGreaterThan(30);
        }
      });

      it('different seeds or names give different rows', async () => {
        const init = initializers.uniform(-1, 1);
        const base = await ops.find(ctx.make({ dim: 4, seed: 1, name: 'a', initializer: init }), KEYS);
        const seed2 = await ops.find(ctx.make({ dim: 4, seed: 2, name: 'a', initializer: init }), KEYS);
        const name2 = await ops.find(ctx.make({ dim: 4, seed: 1, name: 'b', initializer: init }), KEYS);
        const same = (x: Float32Array, y: Float32Array) => x.filter((v, i) => v === y[i]).length;
        expect(same(base.values, seed2.values)).toBeLessThan(3);
        expect(same(base.values, name2.values)).toBeLessThan(3);
      });

      it('uniform stays within [min, max]; normal and truncatedNormal have the right moments; truncatedNormal stays within 2 std', async () => {
        const keys = Array.from({ length: 500 }, (_, i) => BigInt(i) * 1000003n - 250000000n);
        const stats = async (init: ReturnType<typeof initializers.uniform>) => {
          const v = Array.from((await ops.find(ctx.make({ dim: 8, seed: 5, initializer: init }), keys)).values);
          const mean = v.reduce((a, b) => a + b, 0) / v.length;
          const std = Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / v.length);
          return { v, mean, std, min: Math.min(...v), max: Math.max(...v) };
        };
        const u = await stats(initializers.uniform(-0.1, 0.3));
        expect(u.min).toBeGreaterThanOrEqual(-0.1);
        expect(u.max).toBeLessThanOrEqual(0.3);
        expect(Math.abs(u.mean - 0.1)).toBeLessThan(0.01);
        expect(Math.abs(u.std - 0.4 / Math.sqrt(12))).toBeLessThan(0.01);
        const n = await stats(initializers.normal(1, 0.5));
        expect(Math.abs(n.mean - 1)).toBeLessThan(0.03);
        expect(Math.abs(n.std - 0.5)).toBeLessThan(0.03);
        const tn = await stats(initializers.truncatedNormal(-1, 0.25));
        expect(tn.min).toBeGreaterThanOrEqual(-1.5 - 1e-6);
        expect(tn.max).toBeLessThanOrEqual(-0.5 + 1e-6);
        expect(Math.abs(tn.mean + 1)).toBeLessThan(0.02);
        // truncated at 2 std: std = 0.25 * 0.8796
        expect(Math.abs(tn.std - 0.25 * 0.8796)).toBeLessThan(0.02);
      });

      it('zeros, ones, constant and row initializers', async () => {
        const cases: [ReturnType<typeof initializers.ones>, number[]][] = [
          [initializers.zeros(), [0, 0, 0]],
          [initializers.ones(), [1, 1, 1]],
          [initializers.constant(-2.5), [-2.5, -2.5, -2.5]],
          [initializers.row([1, -2, 3.5]), [1, -2, 3.5]],
        ];
        for (const [init, row] of cases) {
          const t = ctx.make({ dim: 3, initializer: init });
          expect(Array.from((await ops.findOrInsert(t, [INT64_MIN, 5n])).values)).toEqual([...row, ...row]);
        }
        const d = ctx.make({ dim: 3 });
        expect(Array.from((await ops.find(d, [1])).values)).toEqual([0, 0, 0]);
      });

      it('a static table with a random initializer uses the row index as the key', async () => {
        const init = initializers.uniform(-1, 1);
        const s = ctx.make({ kind: 'static', dim: 3, vocabularySize: 6, name: 'v', seed: 4, initializer: init });
        const d = ctx.make({ dim: 3, name: 'v', seed: 4, initializer: init });
        expect(Array.from((await ops.find(s, [0, 5, 2])).values)).toEqual(Array.from((await ops.find(d, [0, 5, 2])).values));
      });
    });
  }
}
