import { runConformanceSuite } from '@embedstack/core/testing';
import { cudaBackend } from '@embedstack/cuda-backend';
import { describe, it } from 'vitest';

// The whole conformance suite on a real GPU (device mode): tables in device memory,
// kernels launched on the device. Skipped, with the detection's reason printed,
// where no device runs this build's kernels (every CI machine of this project).
const reason = cudaBackend.unavailableReason();
if (reason === undefined) {
  runConformanceSuite({ name: 'cuda (device)', backend: () => cudaBackend, propertyRuns: 60 });
} else {
  console.log(`[cuda-backend device tests] skipped: ${reason}`);
  describe('conformance: cuda (device)', () => {
    it.skip(`needs a CUDA device: ${reason}`, () => {});
  });
}
