#!/usr/bin/env node
// The README's test command: builds, typechecks and lints every package (turbo), runs every vitest test
// across the workspace and the native C++ tests (plain and ASan+UBSan), then prints
// one closing line "N passed, N failed, N skipped". Exits non-zero when anything fails.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// Colour only on a terminal: into a file or a CI log the output stays plain. (FORCE_COLOR=0
// alone does not do it: picocolors, which vitest uses, colours whenever FORCE_COLOR is set.)
const plain = !process.stdout.isTTY && !('FORCE_COLOR' in process.env) && !('NO_COLOR' in process.env);
const env = { ...process.env, TURBO_TELEMETRY_DISABLED: '1', ...(plain ? { NO_COLOR: '1' } : {}) };
const bin = (name) => join(root, 'node_modules', '.bin', name);
let failedSteps = 0;
/** What failed, repeated at the end: the steps, and each failed vitest test (file > title). */
const failures = [];

/**
 * The CPU seconds a step used (user + system, its child processes included), measured by GNU
 * time where it is installed: CI's budget is CPU-bound on 2 cores, so each step says what it
 * cost besides its wall-clock seconds. [cmd, args] unchanged without /usr/bin/time.
 */
const timeBin = existsSync('/usr/bin/time') ? '/usr/bin/time' : null;
let cpuFiles = 0;
function withCpu(cmd, args) {
  if (!timeBin) return { cmd, args, cpu: () => '' };
  mkdirSync(join(root, '.tmp'), { recursive: true });
  const file = join(root, '.tmp', `cpu-${process.pid}-${cpuFiles++}.txt`);
  return {
    cmd: timeBin,
    args: ['-o', file, '-f', '%U %S', cmd, ...args],
    cpu() {
      try {
        const last = readFileSync(file, 'utf8').trim().split('\n').pop() ?? '';
        const [user, sys] = last.split(' ').map(Number);
        return Number.isFinite(user) && Number.isFinite(sys) ? ` (CPU ${(user + sys).toFixed(0)} s: user ${user.toFixed(0)}, system ${sys.toFixed(0)})` : '';
      } catch {
        return '';
      }
    },
  };
}

/** Prints how long a step took ("=== <title>: N s (CPU N s ...)"), from started to ended. */
const took = (title, started, cpu = '', ended = Date.now()) => console.log(`=== ${title}: ${((ended - started) / 1000).toFixed(0)} s${cpu}`);

/** Records a step that failed (exit status, or signal); false, the step's outcome. */
function stepFailed(title, status) {
  console.log(`=== ${title} FAILED (exit ${status})`);
  failedSteps++;
  failures.push(`step: ${title} (exit ${status})`);
  return false;
}

/** The child's exit code (or signal, or spawn error) once it has ended. */
const exitOf = (child) =>
  new Promise((resolve) => {
    child.on('error', (e) => resolve(String(e)));
    child.on('close', (code, signal) => resolve(code ?? signal));
  });

/** Runs a step (its output inherited); true when it passed. Awaited, not spawnSync: the event
 * loop stays free to note when a background step (stepAsync) ends. */
async function step(title, cmd, args, opts = {}) {
  console.log(`\n=== ${title}: ${cmd} ${args.join(' ')}`);
  const started = Date.now();
  const t = withCpu(cmd, args);
  const status = await exitOf(spawn(t.cmd, t.args, { cwd: root, stdio: 'inherit', env, ...opts }));
  took(title, started, t.cpu());
  return status === 0 || stepFailed(title, status);
}

/**
 * step() in the background: its output goes to .tmp/step-<name>.log, printed (with the
 * step's seconds) by the promise's done(), so steps that leave a core idle (single-threaded
 * node work, configure and link phases) overlap without mixing their output.
 */
function stepAsync(title, name, cmd, args, opts = {}) {
  mkdirSync(join(root, '.tmp'), { recursive: true });
  const log = join(root, '.tmp', `step-${name}.log`);
  const fd = openSync(log, 'w');
  const started = Date.now();
  const t = withCpu(cmd, args);
  const child = spawn(t.cmd, t.args, { cwd: root, env, ...opts, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const exit = exitOf(child);
  const ended = exit.then(() => Date.now());
  return {
    /** Prints the step's output and time; true when it passed. A failure is counted unless `counted` is false. */
    async done({ counted = true } = {}) {
      const status = await exit;
      const end = await ended;
      console.log(`\n=== ${title}: ${cmd} ${args.join(' ')} (ran alongside the steps above)`);
      process.stdout.write(readFileSync(log, 'utf8'));
      took(title, started, t.cpu(), end);
      if (status !== 0 && !counted) console.log(`=== ${title}: exit ${status} (not counted here)`);
      return status === 0 || (counted && stepFailed(title, status));
    },
  };
}

const only = process.argv.slice(2);
const want = (name) => only.length === 0 || only.includes(name);

// The prebuilt binaries this machine can make: cpu-backend's (every CPU level: the level tests
// load each) and cuda-backend's host mode; linux-arm64 too when g++-aarch64-linux-gnu is
// installed (the arm64 tests run them under qemu-user). Incremental build directories: a
// rebuild only recompiles what changed (the staleness tests fail on prebuilds older than the
// sources). They need the native sources and node_modules only, so they compile while the
// TypeScript build, typecheck, lint and TypeDoc run (node work that leaves cores idle: the
// build follows the packages' dependency chain, TypeDoc is one process); vitest waits for them.
const prebuildScript = join(root, 'packages', 'cpu-backend', 'scripts', 'prebuild.mjs');
const prebuilds = [];
if ((want('build') || want('prebuilds')) && existsSync(prebuildScript)) {
  for (const name of ['cpu-backend', 'cuda-backend']) {
    const dir = join(root, 'packages', name);
    const title = `prebuilt binaries (${name}: ${name === 'cpu-backend' ? 'every CPU level' : 'the host mode'}, linux-arm64 cross-compiled)`;
    prebuilds.push(stepAsync(title, `prebuild-${name}`, process.execPath, [prebuildScript, '--package', dir, '--all'], { cwd: dir }));
  }
}

if (want('build')) await step('build', bin('turbo'), ['run', 'build', '--output-logs=errors-only']);
// typecheck and lint in one turbo run, with the API reference (pnpm docs) checked alongside,
// without writing it: broken {@link}s and types that public signatures use but no index.ts
// exports are errors (typedoc.json's validation).
const docsTitle = 'API docs (TypeDoc validation)';
const docs = want('docs') && want('build') ? stepAsync(docsTitle, 'docs', bin('typedoc'), ['--emit', 'none']) : null;
/**
 * The workspace packages' `lint` scripts (`eslint <paths>`, run in each package) as one eslint run
 * from the root over the same paths with the same config (eslint.config.js at the root either
 * way): one process instead of one per package (61.6 -> 26.3 CPU s measured). null when a script
 * is not of that form: then turbo runs them.
 */
function lintPaths() {
  const paths = [];
  for (const top of ['packages', 'apps', 'examples']) {
    if (!existsSync(join(root, top))) continue;
    for (const name of readdirSync(join(root, top))) {
      const json = join(root, top, name, 'package.json');
      if (!existsSync(json)) continue;
      const lint = JSON.parse(readFileSync(json, 'utf8')).scripts?.lint;
      if (lint === undefined) continue;
      const m = /^eslint((?: [\w./-]+)+)$/.exec(lint);
      if (!m || m[1].split(' ').some((a) => a.startsWith('-') || a.includes('..'))) return null;
      paths.push(...m[1].trim().split(' ').map((a) => join(top, name, a)));
    }
  }
  return paths;
}
const lintOnce = want('lint') ? lintPaths() : null;
const lint = lintOnce && lintOnce.length > 0 ? stepAsync('lint (layering rules included; every package\'s lint paths, one eslint)', 'lint', bin('eslint'), lintOnce) : null;
const checks = ['typecheck', 'lint'].filter(want).filter((c) => !(c === 'lint' && lint));
// --only when the build step above ran: its outputs are in place (no cache replays that rewrite
// dist/ while TypeDoc reads it).
if (checks.length > 0) {
  await step(`${checks.join(' + ')}${checks.includes('lint') ? ' (layering rules included)' : ''}`, bin('turbo'), ['run', ...checks, '--output-logs=errors-only', ...(want('build') ? ['--only'] : [])]);
}
if (lint) await lint.done();
if (docs) await docs.done();
else if (want('docs')) await step(docsTitle, bin('typedoc'), ['--emit', 'none']);
for (const p of prebuilds) await p.done();

let passed = 0;
let failed = 0;
let skipped = 0;
async function vitest(title, name, args, extraEnv = {}) {
  mkdirSync(join(root, '.tmp'), { recursive: true });
  const out = join(root, '.tmp', `vitest-${name}.json`);
  await step(title, bin('vitest'), ['run', ...args, '--reporter=default', '--reporter=json', `--outputFile.json=${out}`], {
    env: { ...env, ...extraEnv },
  });
  if (existsSync(out)) {
    const report = JSON.parse(readFileSync(out, 'utf8'));
    passed += report.numPassedTests ?? 0;
    failed += report.numFailedTests ?? 0;
    skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
    if (report.numFailedTestSuites > 0 && report.numFailedTests === 0) failed += report.numFailedTestSuites;
    for (const file of report.testResults ?? []) {
      const rel = String(file.name ?? '').replace(`${root}/`, '');
      const tests = (file.assertionResults ?? []).filter((t) => t.status === 'failed');
      for (const t of tests) failures.push(`test (${name}): ${rel} > ${t.fullName ?? t.title}`);
      if (tests.length === 0 && file.status === 'failed') failures.push(`test file (${name}): ${rel}: ${String(file.message ?? '').split('\n')[0]}`);
    }
  } else {
    failed++;
  }
}

// The native tests run in three chains in the background, from now on, at the lowest CPU
// priority (nice 19), one compile at a time each (two for the ASan+UBSan one): cpu-backend's
// Release tree, its ASan+UBSan tree, and cuda-backend's (its host mode, plain and ASan+UBSan, then
// its ASan addon: malformed calls and conformance). vitest below leaves about a third of a core
// idle on 2 cores (its files wait on redis-server and child processes), and the chains' builds
// (EMBEDSTACK_NATIVE_BUILD_ONLY=1) take only that. Their tests wait for vitest's end (a gate file
// written then: some native cases time threads against a clock, which a nice-19 process beside a
// busy vitest could miss); after it, the chains and the tarball checks fill the two cores
// together, each chain running its tests as soon as its build is done. (When every build ran
// first and the tests after them all, or both cpu-backend trees in one chain, the last of them
// ran alone with a core idle.) Each check counts when its chain ends: passed when the chain
// printed its line `=== <title>: passed`.
const nativeScript = join(root, 'packages', 'cpu-backend', 'scripts', 'test-native.sh');
const cudaScripts = join(root, 'packages', 'cuda-backend', 'scripts');
const nativeGate = join(root, '.tmp', `native-gate-${process.pid}`);
rmSync(nativeGate, { force: true });
const nativeChecks = []; // { titles, name, task }: a background chain and the checks it counts
/** A chain of shell lines at nice 19 (stepAsync) whose titles are its checks. */
function nativeChain(name, titles, lines, extraEnv = {}) {
  const title = `${titles.join('; then the ')} (in the background at nice 19)`;
  const opts = { env: { ...env, EMBEDSTACK_NATIVE_JOBS: '1', EMBEDSTACK_NATIVE_ONLY: '', EMBEDSTACK_NATIVE_BUILD_ONLY: '0', ...extraEnv } };
  nativeChecks.push({ titles, name, task: stepAsync(title, name, 'nice', ['-n', '19', 'bash', '-c', lines.join('\n')], opts) });
}
/** A test-native.sh's lines: its trees built, then (vitest ended) built again, a no-op, and tested. */
const builtThenTested = (script) => [
  `EMBEDSTACK_NATIVE_BUILD_ONLY=1 bash ${JSON.stringify(script)}`,
  `while [ ! -e ${JSON.stringify(nativeGate)} ]; do sleep 1; done`,
  `bash ${JSON.stringify(script)}`,
];
if (want('native') && existsSync(nativeScript)) {
  // The ASan+UBSan chain is the longest (its library and test files compile at -O0/-O1 with the
  // sanitizers, then its tests run on one core): two compiles at a time, so it is not the last to end.
  for (const [which, title, jobs] of [['release', 'native C++ tests (Release)', '1'], ['asan', 'native C++ tests (ASan+UBSan)', '2']]) {
    const [build, gate, test] = builtThenTested(nativeScript);
    nativeChain(`native-cpu-${which}`, [title], [build, gate, `${test} && echo "=== ${title}: passed"`], { EMBEDSTACK_NATIVE_ONLY: which, EMBEDSTACK_NATIVE_JOBS: jobs });
  }
}
if (want('native') && existsSync(join(cudaScripts, 'test-native.sh'))) {
  const cudaNative = 'cuda-backend native tests, host mode (plain, ASan+UBSan)';
  const cudaAsan = 'cuda-backend ASan+UBSan addon: malformed calls and conformance';
  const [build, gate, test] = builtThenTested(join(cudaScripts, 'test-native.sh'));
  // both run whatever the first's outcome; the exit status says whether both passed
  nativeChain('cuda-native', [cudaNative, cudaAsan], [
    build,
    gate,
    `${test} && echo "=== ${cudaNative}: passed"; a=$?`,
    `bash ${JSON.stringify(join(cudaScripts, 'test-asan-js.sh'))} && echo "=== ${cudaAsan}: passed"; b=$?`,
    '[ $a -eq 0 ] && [ $b -eq 0 ]',
  ]);
}

if (want('vitest')) {
  await vitest('vitest (every package; tfra on the reference backend)', 'all', []);
  // The tfra suite again on the native CPU backend (the product path), and the sok suite
  // (devices' native calls run concurrently there): one run, each package reading its own variable.
  await vitest('vitest (tfra and sok on the cpu backend)', 'cpu', ['packages/tfra', 'packages/sok'], { TFRA_TEST_BACKEND: 'cpu', SOK_TEST_BACKEND: 'cpu' });
  // The facades' suites on the CUDA backend's host mode (its kernels on CPU threads; CI has no GPU).
  await vitest('vitest (tfra and tpu-embedding on cuda-host)', 'cuda-host', ['packages/tfra', 'packages/tpu-embedding'], {
    TFRA_TEST_BACKEND: 'cuda-host',
    TPU_TEST_BACKEND: 'cuda-host',
  });
}

// The tarball checks start now, beside the native chains (nothing else at normal priority ran
// beside vitest above: its tests have timeouts): compiles and npm's waits fill the two cores.
// Install like sharp (#16): pack every package, publint + attw, npm install with no compiler
// (the prebuilt binary runs the facades' lookups), then once without prebuilds (source build).
mkdirSync(join(root, '.tmp'), { recursive: true });
writeFileSync(nativeGate, 'vitest has ended\n'); // the native chains may run their tests now
const packCheck = join(root, 'scripts', 'pack-check.mjs');
const pack = want('pack') && existsSync(packCheck) ? stepAsync('pack, lint and install the tarballs', 'pack-check', process.execPath, [packCheck]) : null;
for (const c of nativeChecks) {
  // each of its checks counts one
  await c.task.done();
  const log = readFileSync(join(root, '.tmp', `step-${c.name}.log`), 'utf8');
  for (const title of c.titles) {
    if (log.includes(`=== ${title}: passed`)) passed++;
    else failed++;
  }
}
rmSync(nativeGate, { force: true }); // every chain has ended
if (pack) {
  await pack.done();
  const m = /pack-check: (\{.*\})\s*$/.exec(readFileSync(join(root, '.tmp', 'step-pack-check.log'), 'utf8'));
  if (m) {
    const c = JSON.parse(m[1]);
    passed += c.passed;
    failed += c.failed;
  } else {
    failed++;
  }
}

if (failedSteps > 0 && failed === 0) failed = failedSteps;
if (failures.length > 0) console.log(`\nfailed:\n${failures.map((f) => `  - ${f}`).join('\n')}`);
console.log(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || failedSteps > 0 ? 1 : 0);
