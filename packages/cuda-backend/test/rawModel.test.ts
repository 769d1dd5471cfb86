// The CUDA backend's raw tables (host mode: the same kernels on CPU threads, no GPU needed) under
// core/testing's raw-table fuzz: junk is refused with coded errors and changes nothing, and random
// valid call sequences agree with a plain Map.
import { describeRawTableFuzz } from '@embedstack/core/testing';
import { cudaHostBackend } from '@embedstack/cuda-backend';
import { describe, it } from 'vitest';

if (cudaHostBackend.isUsable()) {
  describeRawTableFuzz({ name: 'the CUDA backend (host mode)', make: (options) => cudaHostBackend.createTable(options), runs: Number(process.env.JUNK_RUNS ?? 20), timeout: 300_000 });
} else {
  describe('the CUDA backend (host mode) raw-table fuzz', () => {
    it.skip(`skipped: ${cudaHostBackend.unavailableReason()}`, () => undefined);
  });
}
