// Junk input at the public functions of the CUDA backend. Its raw table takes options
// core resolved and validated (the backend contract); it is skipped, and the addon
// itself gets thousands of malformed calls in crash.test.ts.
import { describeJunkSuite, junkTarget } from '@embedstack/core/testing';
import * as cuda from '@embedstack/cuda-backend';

describeJunkSuite({
  name: '@embedstack/cuda-backend',
  exports: cuda,
  runs: Number(process.env.JUNK_RUNS ?? 40),
  skip: ['CudaRawTable'],
  targets: [
    junkTarget({
      name: 'CudaBackend',
      make: () => new cuda.CudaBackend({ mode: 'host' }),
      state: (b) => ({ usable: b.isUsable(), name: b.name, report: b.memoryReport() }),
      skip: ['createTable'],
    }),
  ],
});
