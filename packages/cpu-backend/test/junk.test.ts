// Junk input at the public functions of the CPU backend. Its ABI encoders take options core
// resolved and validated (the backend contract); they are skipped. The raw table and cache are
// constructed with junk here, their methods get junk in rawJunk.test.ts, and the addon itself
// gets thousands of malformed calls in crash.test.ts (the cache functions: cache.test.ts).
import { describeJunkSuite, junkTarget } from '@embedstack/core/testing';
import * as cpu from '@embedstack/cpu-backend';

describeJunkSuite({
  name: '@embedstack/cpu-backend',
  exports: cpu,
  runs: Number(process.env.JUNK_RUNS ?? 40),
  skip: ['encodeTable', 'encodeOptimizer', 'encodePlan'],
  targets: [
    junkTarget({
      name: 'CpuBackend',
      make: () => new cpu.CpuBackend(),
      state: (b) => ({ usable: b.isUsable(), name: b.name }),
      skip: ['createTable', 'createCache'],
    }),
  ],
});
