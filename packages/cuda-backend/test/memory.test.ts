import { createTable, optimizers } from '@embedstack/core';
import { CudaBackend } from '@embedstack/cuda-backend';
import { describe, expect, it } from 'vitest';

// HBM + pinned host memory (HierarchicalKV's hybrid mode), in host mode: the same
// split of rows is made and reported, the values stay right across it.
describe('cuda backend: memory placement', () => {
  const dim = 8;
  const rowBytes = (dim + dim) * 4; // values + adagrad accumulators

  it('rows past the HBM budget spill to pinned host memory; memoryUsage is the sum', async () => {
    const backend = new CudaBackend({ mode: 'host', name: 'cuda-host-budget', hbmBudgetBytes: 16 * rowBytes });
    const t = createTable({ dim, optimizer: optimizers.adagrad({ learningRate: 0.5 }), initCapacity: 8 }, { backend });
    const keys = Array.from({ length: 100 }, (_, i) => BigInt(i * 31 - 700));
    const values = Float32Array.from({ length: 100 * dim }, (_, i) => i * 0.25);
    await t.upsert(keys, values);
    const m = backend.memoryReport();
    expect(t.capacity()).toBe(128); // 8 doubled
    expect(m.pinnedHost).toBe((128 - 16) * rowBytes);
    expect(m.device + m.pinnedHost).toBe(t.memoryUsage());
    expect(Array.from((await t.find(keys)).values)).toEqual(Array.from(values));
    // a training step over rows on both sides
    const grads = new Float32Array(100 * dim).fill(1);
    await t.applyGradients(keys, grads, optimizers.adagrad({ learningRate: 0.5 }), 1);
    const after = (await t.find(keys)).values;
    // adagrad, accumulator 0.1 + 1: w - 0.5 / sqrt(1.1)
    for (let i = 0; i < values.length; i++) expect(after[i]).toBeCloseTo(values[i]! - 0.5 / Math.sqrt(1.1), 5);
    expect(m.tables).toBe(1);
    t.dispose();
    expect(backend.memoryReport().tables).toBe(0);
  });

  it('without a budget every row is in (emulated) HBM', async () => {
    const backend = new CudaBackend({ mode: 'host', name: 'cuda-host-all' });
    const t = createTable({ dim, initCapacity: 4 }, { backend });
    await t.upsert([1n, 2n, 3n, 4n, 5n], new Float32Array(5 * dim));
    expect(backend.memoryReport()).toEqual({ device: t.memoryUsage(), pinnedHost: 0, tables: 1 });
    t.dispose();
  });
});

describe('cuda backend: raw table extras', () => {
  it('findKernelSeconds times the find kernel over staged keys; static tables refuse it; disposed tables are coded errors', async () => {
    const { resolveTableOptions, ErrorCodes } = await import('@embedstack/core');
    const { cudaHostBackend, CudaRawTable } = await import('@embedstack/cuda-backend');
    const raw = cudaHostBackend.createTable(resolveTableOptions({ dim: 4 }));
    expect(raw).toBeInstanceOf(CudaRawTable);
    const t = raw as InstanceType<typeof CudaRawTable>;
    const keys = BigInt64Array.from({ length: 1000 }, (_, i) => BigInt(i));
    t.sync.upsert(keys, new Float32Array(4000).fill(2), null);
    const s = t.findKernelSeconds(keys, 3);
    expect(s).toBeGreaterThan(0);
    expect(s).toBeLessThan(5);
    expect(t.onDevice).toBe(false);
    expect(Array.from(t.sync.find(keys.subarray(0, 2), null, null).values)).toEqual([2, 2, 2, 2, 2, 2, 2, 2]); // unchanged
    const st = cudaHostBackend.createTable(resolveTableOptions({ kind: 'static', dim: 2, vocabularySize: 4 })) as InstanceType<typeof CudaRawTable>;
    expect(() => st.findKernelSeconds(BigInt64Array.of(0n), 1)).toThrow(expect.objectContaining({ code: ErrorCodes.UNSUPPORTED }));
    st.dispose();
    t.dispose();
    expect(() => t.memoryBreakdown()).toThrow(expect.objectContaining({ code: ErrorCodes.DISPOSED }));
  });
});
