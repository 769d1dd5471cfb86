import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTable } from '@embedstack/core';
import { runConformanceSuite } from '@embedstack/core/testing';
import { CUDA_ADDON_FILE, CudaBackend, cudaCandidatePaths, loadCudaAddon } from '@embedstack/cuda-backend';
import { describe, expect, it } from 'vitest';
import {
  HAND_VALUES,
  QEMU_ARM64,
  buildSkipReason,
  expectPortableElf,
  handScript,
  runScript,
  runSkipReason,
  seededScript,
} from '../../cpu-backend/test/fixtures/arm64.js';

// The host mode's prebuilt binaries (cpu-backend's scripts/prebuild.mjs --package,
// `pnpm test` builds them): linux-x64 loaded in this process, linux-arm64 (cross-compiled)
// run by an arm64 Node.js under qemu-user. The loader is cpu-backend's (src/loader.ts).

const pkg = fileURLToPath(new URL('..', import.meta.url));
// node-gyp-build's libc tag: glibc, or musl (Alpine; the CI workflow's musl jobs run this file)
const glibc = (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime;
const FILE = `@embedstack+cuda-backend.napi.${glibc ? 'glibc' : 'musl'}.node`;
const x64 = join(pkg, 'prebuilds', 'linux-x64', FILE);
const arm64 = join(pkg, 'prebuilds', 'linux-arm64', FILE);
const BUILD = 'pnpm --filter @embedstack/cuda-backend build:prebuilds --all';
const x64Skip =
  process.platform !== 'linux' || process.arch !== 'x64'
    ? 'the linux-x64 prebuilt binary runs on x86-64 Linux'
    : !existsSync(x64)
      ? `${x64} is not built: run \`${BUILD}\``
      : null;

describe('cuda-backend: where the addon is looked for', () => {
  it('the source build first (only it can hold device code), then this platform\'s prebuilt binary, then build/', () => {
    const paths = cudaCandidatePaths({});
    const build = (d: string) => join(pkg, 'build', d, CUDA_ADDON_FILE);
    expect(paths[0]).toBe(build('Release'));
    expect(paths[1]).toBe(build('Debug'));
    expect(paths[paths.length - 1]).toBe(build(''));
    const dir = join(pkg, 'prebuilds', `${process.platform}-${process.arch}`);
    expect(paths.slice(2, -1)).toEqual([existsSync(join(dir, FILE)) ? join(dir, FILE) : dir]);
  });
});

(x64Skip ? describe.skip : describe)(`cuda-backend host mode: the linux-x64 prebuilt binary${x64Skip ? `: ${x64Skip}` : ''}`, () => {
  it('is an x86-64 ELF that needs only glibc and libgcc_s', () => {
    expectPortableElf(x64, 62);
  });

  it('loads as a prebuilt host-mode addon (no device code) and runs cuda-host tables', () => {
    const load = loadCudaAddon([x64]);
    expect(load.reason).toBeNull();
    expect(load.build).toBe('prebuilt');
    expect(load.binding!.info().deviceCode).toBe(false);
    const backend = new CudaBackend({ mode: 'host', name: 'cuda-host-prebuilt', load: () => load });
    const t = createTable({ dim: 2, initializer: { kind: 'constant', value: -1 } }, { backend });
    t.upsertSync([5n, 6n], Float32Array.from([1, 2, 3, 4]));
    const r = t.findOrInsertSync([6n, 7n]);
    expect(Array.from(r.values)).toEqual([3, 4, -1, -1]);
    expect(Array.from(r.exists)).toEqual([1, 0]);
    t.dispose();
    // Without a GPU the device mode of the prebuilt binary says it has no device code.
    const device = new CudaBackend({ load: () => load });
    expect(device.isUsable()).toBe(false);
    expect(device.unavailableReason()).toBe(
      `the loaded addon is the prebuilt binary of the host mode (${x64}), which has no device code: install the CUDA toolkit (nvcc) ` +
        "and build from source with `EMBEDSTACK_CUDA=on pnpm --filter @embedstack/cuda-backend rebuild`; the host mode runs as backend 'cuda-host'",
    );
  });
});

// core's whole conformance suite (differential property tests included) on the prebuilt
// binary: what the source build passes in conformance.test.ts, the shipped binary passes too.
if (!x64Skip) {
  const load = loadCudaAddon([x64]);
  const prebuilt = new CudaBackend({ mode: 'host', name: 'cuda-host-prebuilt', load: () => load });
  runConformanceSuite({ name: 'cuda-host (linux-x64 prebuilt binary)', backend: () => prebuilt, propertyRuns: 20 });
}

const runSkip = runSkipReason(arm64, BUILD, pkg);
// A skip says why on the console too: the default reporter of `pnpm test` lists no skipped titles.
for (const [part, why] of [
  ['the linux-x64 prebuilt binary (and the conformance suite on it)', x64Skip],
  ['the linux-arm64 prebuilt binary', buildSkipReason(arm64, BUILD)],
  ['cuda-host on an emulated arm64 CPU', runSkip],
] as const) {
  if (why) console.log(`[cuda-backend prebuild tests] ${part} skipped: ${why}`);
}
(buildSkipReason(arm64, BUILD) ? describe.skip : describe)(`cuda-backend host mode: the linux-arm64 prebuilt binary${buildSkipReason(arm64, BUILD) ? `: ${buildSkipReason(arm64, BUILD)}` : ''}`, () => {
  it('is an AArch64 ELF that needs only glibc and libgcc_s', () => {
    expectPortableElf(arm64, 183);
  });
});

(runSkip ? describe.skip : describe)(`cuda-backend host mode on an emulated arm64 CPU (qemu-user)${runSkip ? `: ${runSkip}` : ''}`, () => {
  it('the package loads prebuilds/linux-arm64 by itself; cuda-host lookups, pooling and sgd give the hand-computed values', () => {
    const out = JSON.parse(runScript(QEMU_ARM64, handScript('cuda-host', '{ build: m.loadCudaAddon().build, path: m.loadCudaAddon().path }'), pkg));
    expect(out).toEqual({ ...HAND_VALUES, loaded: { build: 'prebuilt', path: arm64 } });
  });

  it('a seeded workload on cuda-host gives the same bits on arm64 as the x86-64 prebuilt binary', () => {
    const onArm = runScript(QEMU_ARM64, seededScript('cuda-host'), pkg);
    const onX64 = runScript([process.execPath], seededScript('cuda-host'), pkg, x64Skip ? {} : { EMBEDSTACK_CUDA_ADDON: x64 });
    expect(onArm).toMatch(/^[0-9a-f]{64}$/);
    expect(onArm).toBe(onX64);
  });
});
