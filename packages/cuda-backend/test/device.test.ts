import { createTable, optimizers, resolveTableOptions } from '@embedstack/core';
import { runConformanceSuite } from '@embedstack/core/testing';
import { CudaBackend, cudaBackend, CudaRawTable } from '@embedstack/cuda-backend';
import { describe, expect, it } from 'vitest';

// The whole conformance suite on a real GPU (device mode): tables in device memory,
// kernels launched on the device; then what only a device has (pinned spill over the
// bus, concurrent calls from the native pool's threads on the table's stream, the kernel rate).
// Skipped, with the detection's reason printed, where no device runs this build's
// kernels (every CI machine of this project).
const reason = cudaBackend.unavailableReason();
if (reason === undefined) {
  runConformanceSuite({ name: 'cuda (device)', backend: () => cudaBackend, propertyRuns: 60 });

  describe('cuda (device): placement and concurrency', () => {
    it('spills rows past the HBM budget to pinned host memory and reads and trains them right', async () => {
      const backend = new CudaBackend({ name: 'cuda-budget', hbmBudgetBytes: 1000 * 16 * 4 });
      const t = createTable({ dim: 8, optimizer: optimizers.adagrad({ learningRate: 0.5 }) }, { backend });
      const keys = Array.from({ length: 5000 }, (_, i) => BigInt(i * 7919 - 100000));
      const values = Float32Array.from({ length: 5000 * 8 }, (_, i) => (i % 97) * 0.5);
      await t.upsert(keys, values);
      expect(backend.memoryReport().pinnedHost).toBeGreaterThan(0);
      expect(Array.from((await t.find(keys)).values)).toEqual(Array.from(values));
      await t.applyGradients(keys, new Float32Array(5000 * 8).fill(1), optimizers.adagrad({ learningRate: 0.5 }), 1);
      const after = (await t.find(keys)).values;
      for (let i = 0; i < values.length; i++) expect(after[i]).toBeCloseTo(values[i]! - 0.5 / Math.sqrt(1.1), 5);
      t.dispose();
    });

    it('concurrent async calls (native pool threads) on one table agree with sequential ones', async () => {
      const t = createTable({ dim: 16 }, { backend: cudaBackend });
      const keys = BigInt64Array.from({ length: 1 << 16 }, (_, i) => BigInt(i) * 2654435761n);
      await t.upsert(keys, Float32Array.from({ length: keys.length * 16 }, (_, i) => i));
      const reads = await Promise.all(Array.from({ length: 8 }, () => t.find(keys)));
      for (const r of reads) expect(r.exists.every((e) => e === 1)).toBe(true);
      expect(reads.every((r) => r.values[12345] === 12345)).toBe(true);
      t.dispose();
    });

    it('the find kernel rate is measurable on the device', () => {
      const raw = cudaBackend.createTable(resolveTableOptions({ dim: 64, initCapacity: 1 << 20 })) as CudaRawTable;
      expect(raw.onDevice).toBe(true);
      const keys = BigInt64Array.from({ length: 1 << 20 }, (_, i) => BigInt(i));
      raw.sync.upsert(keys, new Float32Array(keys.length * 64), null);
      console.log(`[cuda-backend device tests] find kernel: ${((keys.length / raw.findKernelSeconds(keys, 10)) / 1e9).toFixed(3)} G keys/s`);
      raw.dispose();
    });
  });
} else {
  console.log(`[cuda-backend device tests] skipped: ${reason}`);
  describe('conformance: cuda (device)', () => {
    it.skip(`needs a CUDA device: ${reason}`, () => {});
  });
}
