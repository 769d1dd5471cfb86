/**
 * cuda: the CUDA backend's kernel rates against HierarchicalKV's published figure.
 * A dim-64 table of 1M keys (4M with --full) at index load 1/2 (the index has
 * 2 slots per key), as HKV's benchmark; then per batch of 1M keys:
 *  - the find kernel over keys and outputs kept in the table's memory (what a caller
 *    whose lookups feed GPU work sees; `CudaRawTable.findKernelSeconds`),
 *  - the API's findSync (keys from and rows to JavaScript arrays: PCIe copies on a GPU),
 * and HKV's A100 find rate for dim 64, load 0.50 (its README; not measured here).
 * Runs only with --backend cuda or cuda-host; host-mode figures are the kernels on
 * CPU threads, labelled, and carry no target.
 */
import { resolveTableOptions } from '@embedstack/core';
import { CudaRawTable } from '@embedstack/cuda-backend';
import { type Group, type SuiteResult, valueTarget } from '../report.js';
import { drawIndices, makeKeys, pickKeys } from '../rng.js';
import { formatCount } from '../format.js';
import { FILL_BATCH, valuePattern } from '../tables.js';
import { figure, rotating, runEntries, settle } from './common.js';
import type { Suite } from './types.js';

const DIM = 64;
const BATCH = 1 << 20;
/** HierarchicalKV README, A100 80GB PCIe, dim 64, capacity 64M, load 0.50, 1M keys per op: find, billion KV/s. */
const HKV_A100_FIND = 1.982e9;
const KERNEL_ITERATIONS = 5;

export const cudaSuite: Suite = {
  name: 'cuda',
  description: "CUDA backend: find kernel rate vs HierarchicalKV's published A100 figure (with --backend cuda / cuda-host)",
  steps: () => 2,
  async run(ctx) {
    const result: SuiteResult = { suite: 'cuda', path: 'CudaRawTable.findKernelSeconds and RawTable.sync.find', groups: [], targets: [], notes: [], charts: [] };
    if (!ctx.backend.name.startsWith('cuda')) {
      result.notes.push(`skipped: runs with --backend cuda (or cuda-host), not '${ctx.backend.name}'`);
      return result;
    }
    const n = ctx.args.full ? 4 << 20 : 1 << 20;
    const keys = makeKeys(n, 61);
    const raw = ctx.backend.createTable(resolveTableOptions({ dim: DIM, initCapacity: n, name: 'bench_cuda' }));
    if (!(raw instanceof CudaRawTable)) throw new Error(`backend '${ctx.backend.name}' is not the CUDA backend`);
    const device = raw.onDevice;
    try {
      const values = valuePattern(FILL_BATCH, DIM);
      for (let i = 0; i < n; i += FILL_BATCH) raw.sync.upsert(keys.subarray(i, Math.min(n, i + FILL_BATCH)), values.subarray(0, Math.min(FILL_BATCH, n - i) * DIM), null);
      const pool = pickKeys(keys, drawIndices(2 * BATCH, n, 'uniform', 62));
      const kernel = BATCH / raw.findKernelSeconds(pool.subarray(0, BATCH), KERNEL_ITERATIONS);
      const next = rotating(pool, BATCH);
      const [api] = await runEntries([
        { job: { label: 'findSync', fn: (i) => void raw.sync.find(next(i), null, null), items: BATCH }, name: 'find via the API (findSync, host arrays)', kind: 'ours', unit: 'keys/s' },
      ]);
      const mode = device ? 'GPU' : 'host mode (CPU threads, not a GPU figure)';
      const group: Group = {
        title: `find, dim ${DIM}, ${formatCount(n)} keys at index load 1/2, batch ${formatCount(BATCH)}, uniform: ${mode}`,
        params: { dim: DIM, keys: n, batch: BATCH, device: device ? 1 : 0 },
        figures: [
          figure('find kernel (keys and outputs in table memory)', 'ours', kernel, 'keys/s'),
          api!,
          figure('HierarchicalKV find, A100 (published)', 'peer', HKV_A100_FIND, 'keys/s', { note: 'HKV README: A100 80GB PCIe, dim 64, load 0.50; not measured here' }),
        ],
      };
      result.groups.push(group);
      if (device) {
        result.targets.push(valueTarget(kernel / HKV_A100_FIND, '>=', 0.5, 'ratio', 'find kernel, dim 64, load 1/2 >= 0.5x HKV A100 (within 2x)'));
      } else {
        result.notes.push('host mode: the same kernels run by the host grid launcher on CPU threads; the HKV target applies on a GPU (--backend cuda there)');
      }
      result.notes.push('the find kernel scores reads (lru); the API adds the copies of keys in and rows out (PCIe on a GPU)');
    } finally {
      raw.dispose();
      await settle();
    }
    return result;
  },
};
