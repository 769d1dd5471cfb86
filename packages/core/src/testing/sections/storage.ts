import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTable, saveTable } from '../../checkpoint/index.js';
import { initializers } from '../../initializers.js';
import { optimizers } from '../../optimizers.js';
import { RaggedTensor } from '../../sparse.js';
import type { StorageDtype } from '../../storageDtype.js';
import type { TableOptions } from '../../tableOptions.js';
import { expectRejected, opsFor, type SuiteContext } from '../harness.js';

// ---- an independent model of the rounding (by arithmetic, not by bits) ----------

interface Format {
  /** significand bits including the implicit one */
  precision: number;
  /** smallest normal exponent */
  emin: number;
  /** largest finite value */
  max: number;
}
const FORMATS: Record<'float16' | 'bfloat16', Format> = {
  float16: { precision: 11, emin: -14, max: 65504 },
  bfloat16: { precision: 8, emin: -126, max: (2 - 2 ** -7) * 2 ** 127 },
};

/** x (first rounded to float32) to the nearest value of `dtype`, ties to the even significand. */
export function modelRound(dtype: StorageDtype, x: number): number {
  x = Math.fround(x);
  if (dtype === 'float32' || !Number.isFinite(x) || x === 0) return x;
  const f = FORMATS[dtype];
  const a = Math.abs(x);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  const ulp = 2 ** (Math.max(e, f.emin) - f.precision + 1);
  const q = a / ulp; // exact: a power-of-two scaling
  const fl = Math.floor(q);
  const d = q - fl;
  const r = d > 0.5 || (d === 0.5 && fl % 2 === 1) ? fl + 1 : fl;
  const v = r * ulp > f.max ? Infinity : r * ulp;
  return x < 0 ? -v : v;
}

const modelRow = (dtype: StorageDtype, xs: ArrayLike<number>) => Array.from(xs, (x) => modelRound(dtype, x));

/** Values that exercise the rounding: ties both ways, carries, overflow, subnormals, signed zeros, NaN, Infinity. */
function specialValues(dtype: 'float16' | 'bfloat16'): number[] {
  const p = FORMATS[dtype].precision;
  const u = 2 ** (1 - p); // ulp at 1
  const common = [1 + u / 2, 1 + (3 * u) / 2, 1 + u / 2 + 2 ** -20, -(1 + (3 * u) / 2), 2 - u / 4, 0.1, -0.3, 1 / 3, -0, 0, Infinity, -Infinity, NaN, 3.14159];
  return dtype === 'float16'
    ? [...common, 65504, 65519, 65520, 1e5, -7e4, 2 ** -24, 2 ** -25, 3 * 2 ** -26, 2 ** -14 + 2 ** -30, 1e-10, 6e-5]
    : [...common, 3e38, 3.4028235e38, 1e-38, 1.2e-40, 123456.789, -(2 ** -130)];
}

const bits = (xs: ArrayLike<number>) => Array.from(Float32Array.from(xs as ArrayLike<number>), (x) => (Number.isNaN(x) ? 'NaN' : Object.is(x, -0) ? '-0' : String(x)));

/**
 * Reduced-precision storage (`storageDtype`): values stored narrow (rounded to nearest, ties to
 * even), read and computed as float32, slots float32. Expected values come from the model above.
 */
export function storageSection(ctx: SuiteContext): void {
  const narrow: ('float16' | 'bfloat16')[] = ['bfloat16', 'float16'];
  describe('storage dtypes', () => {
    it('an unknown storageDtype is INVALID_ARGUMENT (INVALID_TYPE when not a string) naming storageDtype; a dtype the backend does not store is UNSUPPORTED', async () => {
      for (const bad of ['float64', 'half', 16, 'BFLOAT16']) {
        const code = typeof bad === 'string' ? 'INVALID_ARGUMENT' : 'INVALID_TYPE';
        await expectRejected(null, () => ctx.make({ dim: 2, storageDtype: bad as StorageDtype }), code, 'storageDtype');
      }
      const offered = ctx.backend.capabilities().storageDtypes ?? ['float32'];
      expect(offered).toContain('float32');
      for (const d of narrow.filter((x) => !offered.includes(x))) {
        await expectRejected(null, () => ctx.make({ dim: 2, storageDtype: d }), 'UNSUPPORTED', 'storageDtype');
      }
    });

    for (const dtype of narrow) {
      const offered = () => (ctx.backend.capabilities().storageDtypes ?? ['float32']).includes(dtype);
      for (const form of ctx.forms) {
        const ops = opsFor(form);
        describe(`${dtype}, ${form} form`, () => {
          const maybe = (name: string, fn: () => Promise<void>) =>
            it(name, async (t) => {
              if (!offered()) {
                t.skip(`backend ${ctx.name} does not store ${dtype} (capabilities().storageDtypes)`);
                return;
              }
              await fn();
            });

          for (const kind of ['dynamic', 'static'] as const) {
            maybe(`${kind}: upsert rounds every value to nearest-even (ties, carries, overflow, subnormals, ±0, NaN, ±Inf); find widens exactly`, async () => {
              const vals = specialValues(dtype);
              const dim = vals.length;
              const opts: TableOptions = kind === 'static' ? { kind, dim, vocabularySize: 4, storageDtype: dtype } : { dim, storageDtype: dtype };
              const t = ctx.make(opts);
              expect(t.storageDtype).toBe(dtype);
              const rev = vals.slice().reverse().map((x) => -x);
              await ops.upsert(t, [1, 3], [...vals, ...rev]);
              const r = await ops.find(t, [3, 1]);
              expect(bits(r.values)).toEqual(bits([...modelRow(dtype, rev), ...modelRow(dtype, vals)]));
              const e = await ops.export(t);
              const at = Array.from(e.keys as ArrayLike<number | bigint>, Number).indexOf(1);
              expect(bits(e.values.subarray(at * dim, (at + 1) * dim))).toEqual(bits(modelRow(dtype, vals)));
            });
          }

          maybe('accum stores the rounded float32 sum; assign and importRows round', async () => {
            const t = ctx.make({ dim: 3, storageDtype: dtype });
            await ops.upsert(t, [5n, 6n], [1, 2, 3, 0.1, 0.2, 0.3]);
            const d = [0.001, 1e-4, -0.7];
            await ops.accum(t, [5n, 7n], [...d, 0.33, 0.44, 0.55], [true, false]);
            await ops.assign(t, [6n, 8n], [7.77, 8.88, 9.99, 1, 1, 1]);
            await ops.importRows(t, [9n], [1 / 7, 2 / 7, 3 / 7]);
            const r = await ops.find(t, [5n, 6n, 7n, 8n, 9n]);
            const base = modelRow(dtype, [1, 2, 3]);
            const expected = [
              ...base.map((b, c) => modelRound(dtype, Math.fround(b + Math.fround(d[c]!)))),
              ...modelRow(dtype, [7.77, 8.88, 9.99]),
              ...modelRow(dtype, [0.33, 0.44, 0.55]),
              0, 0, 0,
              ...modelRow(dtype, [1 / 7, 2 / 7, 3 / 7]),
            ];
            expect(bits(r.values)).toEqual(bits(expected));
            expect(Array.from(r.exists)).toEqual([1, 1, 1, 0, 1]);
          });

          maybe('initial values are rounded, whether read by find (absent) or inserted by findOrInsert', async () => {
            const init = initializers.uniform(-1, 1);
            const wide = ctx.make({ dim: 6, initializer: init, seed: 5, name: 'emb' });
            const t = ctx.make({ dim: 6, initializer: init, seed: 5, name: 'emb', storageDtype: dtype });
            const keys = [3n, -9n, 1n << 50n];
            const w = await ops.find(wide, keys);
            const expected = bits(modelRow(dtype, w.values));
            expect(bits((await ops.find(t, keys)).values)).toEqual(expected);
            expect(bits((await ops.findOrInsert(t, keys)).values)).toEqual(expected);
            expect(bits((await ops.find(t, keys)).values)).toEqual(expected);
            const s = ctx.make({ kind: 'static', vocabularySize: 3, dim: 2, initializer: initializers.constant(0.1), storageDtype: dtype });
            expect(bits((await ops.find(s, [0, 2])).values)).toEqual(bits(modelRow(dtype, [0.1, 0.1, 0.1, 0.1])));
          });

          maybe('optimizer steps round the updated value; the slots stay float32 (Adagrad)', async () => {
            const opt = optimizers.adagrad({ learningRate: 0.1, initialAccumulatorValue: 0.1 });
            for (const kind of ['dynamic', 'static'] as const) {
              const opts: TableOptions =
                kind === 'static' ? { kind, dim: 2, vocabularySize: 4, optimizer: opt, storageDtype: dtype } : { dim: 2, optimizer: opt, storageDtype: dtype };
              const t = ctx.make(opts);
              await ops.upsert(t, [2], [0.5, -1.25]);
              const g = [0.3, -0.7];
              await ops.applyGradients(t, [2], g, opt, 1);
              const e = await ops.export(t);
              const at = Array.from(e.keys as ArrayLike<number | bigint>, Number).indexOf(2);
              // Adagrad: acc = acc0 + g^2 (float32), w -= lr * g / sqrt(acc), each formula in double, stored once
              const acc = g.map((x) => Math.fround(Math.fround(0.1) + Math.fround(x) * Math.fround(x)));
              const w0 = modelRow(dtype, [0.5, -1.25]);
              const w = w0.map((x, c) => modelRound(dtype, Math.fround(x - (0.1 * Math.fround(g[c]!)) / Math.sqrt(acc[c]!))));
              expect(bits(e.values.subarray(at * 2, at * 2 + 2)), `${kind} value`).toEqual(bits(w));
              expect(bits(e.slots[0]!.subarray(at * 2, at * 2 + 2)), `${kind} accumulator`).toEqual(bits(acc));
            }
          });

          maybe('lookupCombined pools the stored (rounded) values; memoryUsage counts 2-byte values', async () => {
            const t = ctx.make({ kind: 'static', vocabularySize: 3, dim: 64, storageDtype: dtype });
            const wide = ctx.make({ kind: 'static', vocabularySize: 3, dim: 64 });
            const v = Array.from({ length: 192 }, (_, i) => Math.sin(i) * 10);
            await ops.upsert(t, [0, 1, 2], v);
            await ops.upsert(wide, [0, 1, 2], v);
            const out = await ops.lookupCombined(t, RaggedTensor.fromNestedArray([[0, 2], [1]]), {
              combiner: 'mean',
              weights: RaggedTensor.fromNestedArray([[0.5, 2], [1]], { dtype: 'float32' }),
            });
            const s = modelRow(dtype, v);
            const row = (r: number, c: number) => s[r * 64 + c]!;
            const expected = Array.from({ length: 128 }, (_, i) => {
              const c = i % 64;
              return i < 64 ? Math.fround((0.5 * row(0, c) + 2 * row(2, c)) / 2.5) : Math.fround(row(1, c));
            });
            expect(Array.from(out)).toEqual(expected);
            expect(t.memoryUsage()).toBeLessThan(wide.memoryUsage() * 0.75);
          });
        });
      }
    }

    describe('checkpoints across storage dtypes', () => {
      let root = '';
      beforeAll(async () => {
        root = await mkdtemp(join(tmpdir(), `embedstack-storage-${ctx.name}-`));
      });
      afterAll(async () => {
        if (root) await rm(root, { recursive: true, force: true });
      });
      for (const dtype of narrow) {
        it(`a float32 checkpoint loads into a ${dtype} table (rounded to nearest-even) and back (exactly)`, async (t) => {
          if (!(ctx.backend.capabilities().storageDtypes ?? ['float32']).includes(dtype)) {
            t.skip(`backend ${ctx.name} does not store ${dtype}`);
            return;
          }
          const opt = optimizers.adam({ learningRate: 0.01 });
          const keys = Array.from({ length: 50 }, (_, i) => BigInt(i * 7919 - 100));
          const v = Array.from({ length: 200 }, (_, i) => Math.cos(i * 1.3) * 3);
          const f32 = ctx.make({ dim: 4, optimizer: opt });
          await f32.upsert(keys, v);
          await f32.applyGradients(keys.slice(0, 5), Float32Array.from({ length: 20 }, (_, i) => i / 10), opt, 1);
          const a = await f32.export();
          await saveTable(f32, join(root, `f32-${dtype}`));
          const narrowTable = ctx.make({ dim: 4, optimizer: opt, storageDtype: dtype });
          await loadTable(narrowTable, join(root, `f32-${dtype}`));
          const b = await narrowTable.export();
          const byKey = (e: typeof a) => new Map(Array.from(e.keys as ArrayLike<number | bigint>, (k, i): [string, number] => [String(k), i]));
          const ia = byKey(a);
          for (const [k, i] of byKey(b)) {
            const j = ia.get(k)!;
            expect(bits(b.values.subarray(i * 4, i * 4 + 4)), `key ${k}`).toEqual(bits(modelRow(dtype, a.values.subarray(j * 4, j * 4 + 4))));
            expect(bits(b.slots[1]!.subarray(i * 4, i * 4 + 4)), `key ${k} slot`).toEqual(bits(a.slots[1]!.subarray(j * 4, j * 4 + 4)));
          }
          await saveTable(narrowTable, join(root, `${dtype}-f32`));
          const back = ctx.make({ dim: 4, optimizer: opt });
          await loadTable(back, join(root, `${dtype}-f32`));
          const c = await back.export();
          const ib = byKey(b);
          for (const [k, i] of byKey(c)) {
            const j = ib.get(k)!;
            expect(bits(c.values.subarray(i * 4, i * 4 + 4)), `key ${k}`).toEqual(bits(b.values.subarray(j * 4, j * 4 + 4)));
          }
        });
      }
    });
  });
}
