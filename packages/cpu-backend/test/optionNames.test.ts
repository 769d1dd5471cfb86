// The CPU backend's options objects refuse a misspelt name (INVALID_ARGUMENT naming it) and take all their names at once.
// Its other public entry points take positional arguments or resolved (core-checked) options.
import { createTable } from '@embedstack/core';
import { describeOptionNames } from '@embedstack/core/testing';
import { CpuBackend, loadAddon } from '@embedstack/cpu-backend';
import { expect } from 'vitest';

describeOptionNames('cpu-backend: option names', [
  {
    label: 'new CpuBackend(options)',
    argument: 'options',
    names: ['load'],
    full: () => ({ load: () => loadAddon() }),
    call: (o) => new CpuBackend(o as never),
    check: (b) => {
      const t = createTable({ dim: 2 }, { backend: b as CpuBackend });
      t.upsertSync([5n], Float32Array.from([1.5, -2]));
      expect([t.backendName, Array.from(t.findSync([5n]).values)]).toEqual(['cpu', [1.5, -2]]);
    },
  },
]);
