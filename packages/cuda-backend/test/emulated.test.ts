import { createTable } from '@embedstack/core';
import { runConformanceSuite } from '@embedstack/core/testing';
import { type CudaAddonLoad, type CudaBinding, CudaBackend, loadCudaAddon, PlacementField } from '@embedstack/cuda-backend';
import { describe, expect, it } from 'vitest';

// core's conformance suite on an emulated device (placement.device 2 / 3, a test aid of
// native/exec/runtime.h): the addon's tables in host memory, used through the device
// protocol. Every call stages its inputs and outputs as on a GPU, its copies, frees and
// kernels are queued and run only when the host waits (as a stream may run them after
// the call returned), and with 3 each launch runs its items and each group its lanes in
// reverse order. What host mode hides (a missing download, a result read before the
// wait, host memory gone before a queued copy reads it, an order-dependent kernel body)
// fails here; native/tests/test_emulated.cc adds out-of-memory at every allocation.

/** The process-wide addon, with every table created on an emulated device. */
function emulatedLoad(device: 2 | 3): () => CudaAddonLoad {
  const load = loadCudaAddon();
  const binding = load.binding;
  if (!binding) return () => load;
  const emulated: CudaBinding = {
    ...binding,
    createTable: (config, slotWidths, slotInitial, initValues, placement) => {
      const p = Float64Array.from(placement ?? [0, 0, Infinity, 0]);
      p[PlacementField.device] = device;
      return binding.createTable(config, slotWidths, slotInitial, initValues, p);
    },
  };
  return () => ({ ...load, binding: emulated });
}

const reversed = new CudaBackend({ mode: 'host', name: 'cuda-emulated-reversed', load: emulatedLoad(3) });
runConformanceSuite({ name: 'cuda-host (emulated device, reversed order)', backend: () => reversed, propertyRuns: 20 });

describe('cuda backend: the emulated device', () => {
  it('gives the same bits as host mode, in order and reversed, over a seeded workload', () => {
    const run = (backend: CudaBackend) => {
      const t = createTable({ dim: 37, initializer: { kind: 'truncatedNormal', mean: 0, std: 0.5 }, maxCapacity: 700, seed: 5 }, { backend });
      const keys = BigInt64Array.from({ length: 3000 }, (_, i) => BigInt(((i * 7919) % 1500) - 700) * (i % 11 === 0 ? -(2n ** 50n) : 1n));
      const values = Float32Array.from({ length: keys.length * 37 }, (_, i) => ((i * 2654435761) % 1000) / 333);
      t.upsertSync(keys.subarray(0, 1000), values.subarray(0, 1000 * 37));
      const found = t.findOrInsertSync(keys).values;
      t.removeSync(keys.subarray(500, 900));
      const after = t.findSync(keys);
      const out = [Array.from(found), Array.from(after.values), Array.from(after.exists), t.size()];
      t.dispose();
      return JSON.stringify(out);
    };
    const host = run(new CudaBackend({ mode: 'host', name: 'cuda-host-plain' }));
    expect(run(new CudaBackend({ mode: 'host', name: 'cuda-emulated', load: emulatedLoad(2) }))).toBe(host);
    expect(run(reversed)).toBe(host);
  });
});
