// The fused training step with clipping (applyCombinedGradients with maxNorm) reads the rows
// before it trains. On the CUDA tables the read and the step are one table call that scores
// the read only once the step can no longer fail (native/tests/test_emulated.cc fails an
// allocation at every stage); here: the same scores, values and slots as the CPU backend
// (which reads, then trains) under every read-scoring policy, and the same for a measurement
// of the find kernel, which must leave the table as it was.
import { createTable, type EmbeddingBackend, type EmbeddingTable, type ExportBatch, optimizers, RaggedTensor, type ScorePolicy } from '@embedstack/core';
import { cpuBackend } from '@embedstack/cpu-backend';
import { type CudaAddonLoad, CudaBackend, type CudaBinding, CudaRawTable, cudaHostBackend, loadCudaAddon, PlacementField } from '@embedstack/cuda-backend';
import { describe, expect, it } from 'vitest';

const DIM = 6;
const POLICIES: ScorePolicy[] = ['lru', 'lfu', 'epochLru', 'epochLfu', 'timestamp', 'frequency'];

/** Every table created on an emulated device in reverse order (placement.device 3). */
function emulated(): CudaBackend {
  const load = loadCudaAddon();
  const binding = load.binding;
  const wrapped: CudaAddonLoad = binding
    ? {
        ...load,
        binding: {
          ...binding,
          createTable: (config, slotWidths, slotInitial, initValues, placement) => {
            const p = Float64Array.from(placement!);
            p[PlacementField.device] = 3;
            return binding.createTable(config, slotWidths, slotInitial, initValues, p);
          },
        } satisfies CudaBinding,
      }
    : load;
  return new CudaBackend({ mode: 'host', name: 'cuda-emulated-training', load: () => wrapped });
}

/** Rows sorted by key, as plain arrays (scores as strings, floats by their bits). */
function rows(e: ExportBatch): string {
  const order = Array.from(e.keys as BigInt64Array, (k, i) => [k, i] as const).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const bits = (f: Float32Array, w: number, i: number) => Array.from(new Uint32Array(f.buffer, f.byteOffset + i * w * 4, w));
  return JSON.stringify(order.map(([k, i]) => [String(k), String(e.scores[i]), bits(e.values, DIM, i), e.slots.map((s) => bits(s, s.length / e.keys.length, i))]));
}

/** A seeded workload of bags trained with clipping on a capped table (evictions), with reads between. */
function workload(backend: EmbeddingBackend, scorePolicy: ScorePolicy): { table: EmbeddingTable; steps: () => void } {
  const table = createTable(
    { dim: DIM, maxCapacity: 90, scorePolicy, optimizer: optimizers.adagrad({ learningRate: 0.3 }), initializer: { kind: 'uniform', min: -1, max: 1 }, seed: 11 },
    { backend },
  );
  const steps = () => {
    table.setEpoch(2);
    let x = 7;
    const next = () => (x = (x * 1103515245 + 12345) % 2147483648);
    for (let round = 0; round < 6; round++) {
      const ids = Array.from({ length: 9 }, () => Array.from({ length: next() % 6 }, () => BigInt((next() % 160) - 40)));
      const grads = Float32Array.from({ length: 9 * DIM }, () => ((next() % 2001) - 1000) / 400);
      table.applyCombinedGradientsSync(RaggedTensor.fromNestedArray(ids), grads, optimizers.adagrad({ learningRate: 0.3 }), round + 1, {
        combiner: (['sum', 'mean', 'sqrtn'] as const)[round % 3],
        maxNorm: round % 2 ? 0.9 : 2.5,
      });
      table.findSync(ids.flat().slice(0, 7)); // reads score under the read policies
      if (round === 3) table.setEpoch(3);
    }
  };
  return { table, steps };
}

describe('cuda backend: a training step with clipping', () => {
  for (const policy of POLICIES) {
    it(`${policy}: ends with the CPU backend's keys, scores, values and slots (read, then step)`, () => {
      const results = [cpuBackend, cudaHostBackend, emulated()].map((backend) => {
        const { table, steps } = workload(backend, policy);
        steps();
        const out = rows(table.exportSync());
        table.dispose();
        return out;
      });
      if (policy === 'timestamp') return; // wall-clock scores: compared by the other policies
      expect(results[1]).toBe(results[0]);
      expect(results[2]).toBe(results[0]);
    });
  }

  it('a step refused for its gradients (shape, optimizer) changes nothing, the clock included', () => {
    for (const policy of ['lru', 'lfu', 'epochLfu'] as const) {
      const { table: refused, steps } = workload(cudaHostBackend, policy);
      const { table: twin, steps: twinSteps } = workload(cudaHostBackend, policy);
      steps();
      twinSteps();
      const before = rows(refused.exportSync());
      const bag = RaggedTensor.fromNestedArray([[1n, 2n, 3n], [3n, 50n]]);
      const calls = [
        () => refused.applyCombinedGradientsSync(bag, new Float32Array(DIM), optimizers.adagrad(), 7, { maxNorm: 1 }),
        () => refused.applyCombinedGradientsSync(bag, new Float32Array(2 * DIM), optimizers.adagrad({ learningRate: -1 }), 7, { maxNorm: 1 }),
        () => refused.applyCombinedGradientsSync(bag, new Float32Array(2 * DIM), optimizers.adagrad(), 0, { maxNorm: 1 }),
        () => refused.applyGradientsSync([1n, 2n], new Float32Array(DIM), optimizers.adagrad(), 7),
      ];
      for (const call of calls) expect(call).toThrow(expect.objectContaining({ code: expect.stringMatching(/^(SHAPE_MISMATCH|INVALID_ARGUMENT)$/) }));
      expect(rows(refused.exportSync())).toBe(before);
      for (const t of [refused, twin]) t.applyCombinedGradientsSync(bag, new Float32Array(2 * DIM).fill(0.5), optimizers.adagrad(), 7, { maxNorm: 1 });
      expect(rows(refused.exportSync())).toBe(rows(twin.exportSync()));
      refused.dispose();
      twin.dispose();
    }
  });
});

describe('cuda backend: findKernelSeconds', () => {
  it('leaves scores and the clock as they were (lfu, lru)', () => {
    for (const policy of ['lfu', 'lru'] as const) {
      const { table: measured, steps } = workload(cudaHostBackend, policy);
      const { table: twin, steps: twinSteps } = workload(cudaHostBackend, policy);
      steps();
      twinSteps();
      const before = rows(measured.exportSync());
      const keys = BigInt64Array.from({ length: 300 }, (_, i) => BigInt((i % 150) - 40));
      expect((measured.raw as CudaRawTable).findKernelSeconds(keys, 3)).toBeGreaterThan(0);
      expect(rows(measured.exportSync())).toBe(before);
      for (const t of [measured, twin]) t.findSync(keys.subarray(0, 20));
      expect(rows(measured.exportSync())).toBe(rows(twin.exportSync()));
      measured.dispose();
      twin.dispose();
    }
  });
});
