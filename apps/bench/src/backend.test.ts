import { describe, expect, it } from 'vitest';
import { loadBackend } from './backend.js';

describe('bench backend choice', () => {
  it("'cuda' measures the GPU, or without one the CUDA host mode with a note saying so", async () => {
    const { cudaBackend } = await import('@embedstack/cuda-backend');
    const loaded = await loadBackend('cuda');
    if (cudaBackend.isUsable()) {
      expect(loaded.backend.name).toBe('cuda');
      expect(loaded.note).toBeUndefined();
    } else {
      expect(loaded.backend.name).toBe('cuda-host');
      expect(loaded.note).toContain('not a GPU figure');
      expect(loaded.note).toContain(cudaBackend.unavailableReason()!);
    }
  });

  it("'cuda-host' and 'cpu' are measured as named; only the host mode carries a note", async () => {
    const host = await loadBackend('cuda-host');
    expect(host.backend.name).toBe('cuda-host');
    expect(host.note).toContain('CUDA host mode');
    const cpu = await loadBackend('cpu');
    expect(cpu.backend.name).toBe('cpu');
    // the label says which CPU level runs (EMBEDSTACK_CPU sets it)
    const { cpuLevel } = await import('@embedstack/cpu-backend');
    const { level, build } = cpuLevel();
    expect(cpu.label).toMatch(new RegExp(`, ${level} code \\(${build === 'prebuilt' ? 'prebuilt binary' : 'source build'}\\)$`));
    expect(cpu.note).toBeUndefined();
    expect(cpu.threads).toBeGreaterThanOrEqual(1);
  });
});
