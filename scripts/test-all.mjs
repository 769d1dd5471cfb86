#!/usr/bin/env node
// The README's test command: builds, typechecks and lints every package (turbo), runs every vitest test
// across the workspace and the native C++ tests (plain and ASan+UBSan), then prints
// one closing line "N passed, N failed, N skipped". Exits non-zero when anything fails.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const env = { ...process.env, TURBO_TELEMETRY_DISABLED: '1', FORCE_COLOR: process.env.FORCE_COLOR ?? '0' };
const bin = (name) => join(root, 'node_modules', '.bin', name);
let failedSteps = 0;

/** Prints how long a step took ("=== <title>: N s"). */
const took = (title, started) => console.log(`=== ${title}: ${((Date.now() - started) / 1000).toFixed(0)} s`);

function step(title, cmd, args, opts = {}) {
  console.log(`\n=== ${title}: ${cmd} ${args.join(' ')}`);
  const started = Date.now();
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', env, ...opts });
  took(title, started);
  if (r.status !== 0) {
    console.log(`=== ${title} FAILED (exit ${r.status ?? r.signal})`);
    failedSteps++;
    return false;
  }
  return true;
}

const only = process.argv.slice(2);
const want = (name) => only.length === 0 || only.includes(name);

if (want('build')) step('build', bin('turbo'), ['run', 'build', '--output-logs=errors-only']);
if (want('typecheck')) step('typecheck', bin('turbo'), ['run', 'typecheck', '--output-logs=errors-only']);
if (want('lint')) step('lint (layering rules included)', bin('turbo'), ['run', 'lint', '--output-logs=errors-only']);
// The API reference (pnpm docs) checked without writing it: broken {@link}s and types that
// public signatures use but no index.ts exports are errors (typedoc.json's validation).
if (want('docs')) step('API docs (TypeDoc validation)', bin('typedoc'), ['--emit', 'none']);
// The prebuilt binaries this machine can make: cpu-backend's (every CPU level: the level tests
// load each) and cuda-backend's host mode; linux-arm64 too when g++-aarch64-linux-gnu is
// installed (the arm64 tests run them under qemu-user). Incremental build directories: a
// rebuild only recompiles what changed (the staleness tests fail on prebuilds older than the sources).
const prebuildScript = join(root, 'packages', 'cpu-backend', 'scripts', 'prebuild.mjs');
if ((want('build') || want('prebuilds')) && existsSync(prebuildScript)) {
  for (const name of ['cpu-backend', 'cuda-backend']) {
    const dir = join(root, 'packages', name);
    step(`prebuilt binaries (${name}: ${name === 'cpu-backend' ? 'every CPU level' : 'the host mode'}, linux-arm64 cross-compiled)`, process.execPath, [prebuildScript, '--package', dir, '--all'], { cwd: dir });
  }
}

let passed = 0;
let failed = 0;
let skipped = 0;
function vitest(title, name, args, extraEnv = {}) {
  mkdirSync(join(root, '.tmp'), { recursive: true });
  const out = join(root, '.tmp', `vitest-${name}.json`);
  step(title, bin('vitest'), ['run', ...args, '--reporter=default', '--reporter=json', `--outputFile.json=${out}`], {
    env: { ...env, ...extraEnv },
  });
  if (existsSync(out)) {
    const report = JSON.parse(readFileSync(out, 'utf8'));
    passed += report.numPassedTests ?? 0;
    failed += report.numFailedTests ?? 0;
    skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
    if (report.numFailedTestSuites > 0 && report.numFailedTests === 0) failed += report.numFailedTestSuites;
  } else {
    failed++;
  }
}

if (want('vitest')) {
  vitest('vitest (every package; tfra on the reference backend)', 'all', []);
  // The tfra suite again on the native CPU backend (the product path).
  vitest('vitest (tfra on the cpu backend)', 'tfra-cpu', ['packages/tfra'], { TFRA_TEST_BACKEND: 'cpu' });
  // The sok suite again on the native CPU backend (devices' native calls run concurrently there).
  vitest('vitest (sok on the cpu backend)', 'sok-cpu', ['packages/sok'], { SOK_TEST_BACKEND: 'cpu' });
  // The facades' suites on the CUDA backend's host mode (its kernels on CPU threads; CI has no GPU).
  vitest('vitest (tfra on cuda-host)', 'tfra-cuda-host', ['packages/tfra'], { TFRA_TEST_BACKEND: 'cuda-host' });
  vitest('vitest (tpu-embedding on cuda-host)', 'tpu-cuda-host', ['packages/tpu-embedding'], { TPU_TEST_BACKEND: 'cuda-host' });
}

const nativeScript = join(root, 'packages', 'cpu-backend', 'scripts', 'test-native.sh');
if (want('native') && existsSync(nativeScript)) {
  if (step('native C++ tests (plain, ASan+UBSan)', 'bash', [nativeScript])) passed++;
  else failed++;
}
const cudaScripts = join(root, 'packages', 'cuda-backend', 'scripts');
if (want('native') && existsSync(join(cudaScripts, 'test-native.sh'))) {
  if (step('cuda-backend native tests, host mode (plain, ASan+UBSan)', 'bash', [join(cudaScripts, 'test-native.sh')])) passed++;
  else failed++;
  if (step('cuda-backend ASan+UBSan addon: malformed calls and conformance', 'bash', [join(cudaScripts, 'test-asan-js.sh')])) passed++;
  else failed++;
}

// Install like sharp (#16): pack every package, publint + attw, npm install with no compiler
// (the prebuilt binary runs the facades' lookups), then once without prebuilds (source build).
const packCheck = join(root, 'scripts', 'pack-check.mjs');
if (want('pack') && existsSync(packCheck)) {
  console.log(`\n=== pack, lint and install the tarballs: node ${packCheck}`);
  const started = Date.now();
  const r = spawnSync(process.execPath, [packCheck], { cwd: root, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  process.stdout.write(r.stdout ?? '');
  took('pack, lint and install the tarballs', started);
  const m = /pack-check: (\{.*\})\s*$/.exec(r.stdout ?? '');
  if (m) {
    const c = JSON.parse(m[1]);
    passed += c.passed;
    failed += c.failed;
  } else {
    failed++;
  }
  if (r.status !== 0) failedSteps++;
}

if (failedSteps > 0 && failed === 0) failed = failedSteps;
console.log(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || failedSteps > 0 ? 1 : 0);
