import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { createTable, optimizers, RaggedTensor, type StorageDtype } from '@embedstack/core';
import { cpuBackend, loadAddon } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

/**
 * The addon's results do not depend on the floating-point mode of the calling thread. Another
 * library in the process may set flush-to-zero / denormals-are-zero (x86-64 MXCSR bits 15 and 6;
 * AArch64 FPCR.FZ, bit 24) on the JS thread: sync calls run there, and the pool threads take the
 * mode of the thread that created them. The addon runs its kernels in the default mode
 * (native/src/fp_mode.h) and gives the caller its mode back. The mode is set through the addon's
 * test-only hook testFpMode(mode) (returns the mode before).
 */

const binding = loadAddon().binding as unknown as { testFpMode?: (mode?: number) => number } | null;
const arch = process.arch;
/** The default mode and the mode with flush-to-zero and denormals-are-zero set. */
const MODES: Partial<Record<string, { standard: number; flush: number }>> = {
  x64: { standard: 0x1f80, flush: 0x1f80 | 0x8000 | 0x0040 },
  arm64: { standard: 0, flush: 1 << 24 },
};
const modes = MODES[arch];
const usable = binding !== null && typeof binding.testFpMode === 'function' && modes !== undefined;

const p = (e: number) => 2 ** e;
/** Rows of float32 subnormals (below 2^-126), exact in every sum and half below; bfloat16 ones for a bfloat16 table. */
const ROWS: Record<'float32' | 'bfloat16', number[]> = {
  float32: [p(-140), 3 * p(-140), p(-130), -p(-135), 5 * p(-145), p(-148), p(-127), -3 * p(-141)],
  bfloat16: [p(-130), 3 * p(-131), p(-127), -p(-132), 5 * p(-129), p(-131), 7 * p(-128), -p(-128)],
};
const DIM = 4;

type Outputs = { sum: Float32Array; mean: Float32Array; trained: Float32Array };

/**
 * Sum and mean of two rows and the SGD step w - 0.5 * w (= w / 2), under the current mode. The
 * inputs are made before and the outputs read after (JS itself reads and writes float32 through
 * the mode: a subnormal written under FTZ or read under DAZ is zero).
 */
function run(dtype: 'float32' | 'bfloat16', rows: Float32Array, grads: Float32Array): Outputs {
  const t = createTable({ dim: DIM, storageDtype: dtype as StorageDtype }, { backend: cpuBackend });
  try {
    const keys = BigInt64Array.from([1n, 2n]);
    t.upsertSync(keys, rows);
    const bag = RaggedTensor.fromNestedArray([[1n, 2n]]);
    const sum = t.lookupCombinedSync(bag, { combiner: 'sum' });
    const mean = t.lookupCombinedSync(bag, { combiner: 'mean' });
    t.applyGradientsSync(keys, grads, optimizers.sgd({ learningRate: 0.5 }), 1);
    return { sum, mean, trained: t.findSync(keys).values };
  } finally {
    t.dispose();
  }
}

const plain = (o: Outputs) => ({ sum: Array.from(o.sum), mean: Array.from(o.mean), trained: Array.from(o.trained) });

/** What the calls must give (computed in double, exact here, then as float32), and every value nonzero. */
function expected(dtype: 'float32' | 'bfloat16'): { sum: number[]; mean: number[]; trained: number[] } {
  const r = ROWS[dtype];
  const sum = r.slice(0, DIM).map((x, j) => Math.fround(x + r[DIM + j]!));
  return { sum, mean: sum.map((s) => Math.fround(s / 2)), trained: r.map((w) => Math.fround(w / 2)) };
}

describe.runIf(usable)(`cpu backend: results independent of the caller's floating-point mode (${arch})`, () => {
  const hook = binding!.testFpMode!;

  for (const dtype of ['float32', 'bfloat16'] as const) {
    it(`${dtype}: lookupCombined and an SGD step on subnormals give the same bits with FTZ / DAZ set on the calling thread`, () => {
      const want = expected(dtype);
      for (const v of [...want.sum, ...want.mean, ...want.trained]) expect(v).not.toBe(0);
      const standard = run(dtype, Float32Array.from(ROWS[dtype]), Float32Array.from(ROWS[dtype]));
      const rows = Float32Array.from(ROWS[dtype]);
      const grads = Float32Array.from(ROWS[dtype]);
      const before = hook(modes!.flush);
      let flushed: Outputs;
      let modeAfter: number;
      try {
        flushed = run(dtype, rows, grads);
      } finally {
        modeAfter = hook(before); // the mode the calls left: the caller's own
      }
      expect(plain(standard)).toEqual(want);
      expect(plain(flushed)).toEqual(want);
      expect(arch === 'x64' ? modeAfter & 0xffc0 : modeAfter).toBe(modes!.flush);
    });
  }

  it('the pool threads compute in the default mode when the thread that created them had FTZ / DAZ set', () => {
    // A fresh process: the mode is set before the first call creates the native pool. Large
    // calls split over the pool's threads (sync and Promise forms).
    const require = createRequire(import.meta.url);
    const paths = { core: require.resolve('@embedstack/core'), cpu: require.resolve('@embedstack/cpu-backend') };
    const script = `
      const core = require(${JSON.stringify(paths.core)});
      const cpu = require(${JSON.stringify(paths.cpu)});
      const hook = cpu.loadAddon().binding.testFpMode;
      const n = 1 << 16, dim = 8, tiny = 2 ** -140;
      const keys = new BigInt64Array(n).map((_, i) => BigInt(i));
      const rows = new Float32Array(n * dim).map((_, i) => tiny * ((i % 7) + 1));
      const splits = new Int32Array(n / 2 + 1).map((_, i) => 2 * i);
      const want = new Float32Array(n / 2 * dim);
      for (let r = 0; r < n / 2; r++) for (let j = 0; j < dim; j++) want[r * dim + j] = rows[2 * r * dim + j] + rows[(2 * r + 1) * dim + j];
      const flush = ${modes?.flush ?? 0}; // FTZ / DAZ
      const standard = hook(flush);
      (async () => {
        const t = core.createTable({ dim }, { backend: cpu.cpuBackend });
        t.upsertSync(keys, rows);
        const bag = core.RaggedTensor.fromRowSplits(keys, splits);
        const sync = t.lookupCombinedSync(bag, { combiner: 'sum' });
        const promised = await t.lookupCombined(bag, { combiner: 'sum' });
        const left = hook(standard);
        let wrong = 0;
        for (let i = 0; i < want.length; i++) if (sync[i] !== want[i] || promised[i] !== want[i]) wrong++;
        console.log('wrong ' + wrong + ' nonzero ' + (want[0] !== 0) + ' mode ' + (left === flush || (left & 0xffc0) === flush));
      })().catch((e) => console.log('error ' + (e && e.code) + ' ' + (e && e.message)));
    `;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 120_000 });
    expect(r.signal, r.stderr).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('wrong 0 nonzero true mode true');
  }, 150_000);
});
