// The CUDA backend's constructor options refuse a misspelt name (INVALID_ARGUMENT naming `options.<name>`)
// and take all their names at once (host mode: the same kernels on CPU threads, no GPU needed).
import { createTable } from '@embedstack/core';
import { describeOptionNames } from '@embedstack/core/testing';
import { CudaBackend, loadCudaAddon } from '@embedstack/cuda-backend';
import { expect } from 'vitest';

const usable = new CudaBackend({ mode: 'host' }).isUsable();

describeOptionNames('cuda-backend: option names', [
  {
    label: 'new CudaBackend(options)',
    argument: 'options',
    names: ['mode', 'name', 'device', 'hbmBudgetBytes', 'poolReleaseThresholdBytes', 'load'],
    full: () => ({ mode: 'host', name: 'cuda-opts', device: 0, hbmBudgetBytes: 1 << 20, poolReleaseThresholdBytes: 1 << 20, load: () => loadCudaAddon() }),
    call: (o) => new CudaBackend(o as never),
    check: (b) => {
      const backend = b as CudaBackend;
      expect([backend.name, backend.mode, backend.priority]).toEqual(['cuda-opts', 'host', 1]);
      if (!usable) return; // the addon is not built here: the options were still read
      const t = createTable({ dim: 2 }, { backend });
      t.upsertSync([5n], Float32Array.from([1.5, -2]));
      expect(Array.from(t.findSync([5n]).values)).toEqual([1.5, -2]);
    },
  },
]);
