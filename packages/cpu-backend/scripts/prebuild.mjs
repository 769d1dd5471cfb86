#!/usr/bin/env node
// Builds the prebuilt binaries shipped in the npm packages of the native addons
// (cpu-backend, and cuda-backend's host mode), in prebuildify's layout, read at run
// time with node-gyp-build's matching (src/prebuilds.ts):
//
//   prebuilds/<platform>-<arch>/<@scope+name>.napi[.glibc|.musl].node   the baseline build
//   prebuilds/<platform>-<arch>/<level>/<same file name>                x86-64 levels avx2, avx512 (cpu-backend)
//
// node-gyp-build alone would pick the baseline file (it skips sub-directories), so
// the layout stays loadable by the standard loader; ours adds the CPU level.
// Beside each binary, `<file>.node.json` records the hash of the native sources it
// was built from (scripts/native-sources.cjs); `--check` compares it with the
// sources on disk (each package's `prepack`: a stale prebuild is never packed).
//
//   node scripts/prebuild.mjs                 this machine's platform (linux-x64: baseline, avx2, avx512)
//   node scripts/prebuild.mjs --target linux-arm64   cross-compiled (apt-get install -y g++-aarch64-linux-gnu)
//   node scripts/prebuild.mjs --all           every target this machine can build (what a release packs)
//   node scripts/prebuild.mjs --clean         removes prebuilds/ and the build directories first
//   node scripts/prebuild.mjs --check         builds nothing; exits 1 when a binary in prebuilds/ is stale
//   ... --package <dir>                       another package (default: cpu-backend; e.g. ../cuda-backend)
//
// Build directories (build-prebuild-<target>-<level>) are kept, so a rebuild only
// recompiles what changed. They sit beside build/ and build-native/ (one level under
// the package), so a compiler cache (ccache with base_dir, as .ci/run sets it) sees
// the same relative source paths there and can reuse an identical compile. The macOS and Windows binaries come from CI
// (.github/workflows/prebuilds.yml), not from this machine.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { arch as hostArch, platform as hostPlatform } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const { prebuiltBinaries, sidecarPath, sourceHash, staleness } = require('./native-sources.cjs');
const cpuRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
const X64_LEVELS = ['baseline', 'avx2', 'avx512'];

/**
 * The packages with prebuilt binaries: the addon cmake-js builds, the x86-64 levels
 * (one build per level, no clones), and extra CMake definitions. cuda-backend ships
 * its host mode only (no nvcc: see its README, "Install"), one binary per platform
 * for the baseline ISA (x86-64 v1 runs on every x86-64 CPU; the host mode is for tests
 * and machines without a GPU, not for speed).
 */
const PACKAGES = {
  '@embedstack/cpu-backend': { addon: 'embedstack_cpu.node', x64Levels: X64_LEVELS, defines: [] },
  '@embedstack/cuda-backend': { addon: 'embedstack_cuda.node', x64Levels: null, defines: ['EMBEDSTACK_CUDA=off'] },
};

function usage(message) {
  if (message) console.error(`prebuild: ${message}`);
  console.error('usage: node scripts/prebuild.mjs [--package <dir>] [--target <platform-arch>]... [--all] [--clean] [--check]');
  process.exit(2);
}

const args = process.argv.slice(2);
const wanted = [];
let all = false;
let clean = false;
let check = false;
let root = cpuRoot;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--all') all = true;
  else if (a === '--clean') clean = true;
  else if (a === '--check') check = true;
  else if (a === '--package') {
    if (!args[i + 1]) usage('--package needs a directory');
    root = resolve(args[++i]);
  } else if (a === '--target') {
    const t = args[++i];
    if (!t) usage('--target needs a value');
    wanted.push(t === 'host' ? `${hostPlatform()}-${hostArch()}` : t);
  } else usage(`unknown argument ${a}`);
}

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const hash = sourceHash(root);

if (check) {
  // The prepack guard: every binary in prebuilds/ must come from the sources being packed.
  const stale = prebuiltBinaries(root)
    .map((binary) => ({ binary, why: staleness(binary, hash) }))
    .filter((s) => s.why !== null);
  for (const s of stale) console.error(`prebuild: ${relative(root, s.binary)} is stale: ${s.why}`);
  if (stale.length > 0) {
    console.error(`prebuild: rebuild them with \`node ${relative(process.cwd(), fileURLToPath(import.meta.url))} --package ${relative(process.cwd(), root) || '.'} --all\` (or remove prebuilds/ to pack without them)`);
    process.exit(1);
  }
  console.log(`prebuild: ${pkg.name}: ${prebuiltBinaries(root).length} prebuilt binaries, all from the sources here (hash ${hash})`);
  process.exit(0);
}
const config = PACKAGES[pkg.name];
if (!config) usage(`${pkg.name} has no prebuilt binaries (packages: ${Object.keys(PACKAGES).join(', ')})`);
if (clean) {
  rmSync(join(root, 'prebuilds'), { recursive: true, force: true });
  rmSync(join(root, 'build-prebuild'), { recursive: true, force: true }); // the old layout
  for (const d of readdirSync(root)) if (d.startsWith('build-prebuild-')) rmSync(join(root, d), { recursive: true, force: true });
}

const FILE = `${pkg.name.replace(/\//g, '+')}.napi`;
/** What can be built: the host's platform, and linux-arm64 from an x86-64 Linux host. */
const TARGETS = {
  'linux-x64': { platform: 'linux', arch: 'x64', levels: config.x64Levels ?? ['baseline'], compiler: 'c++' },
  'linux-arm64': {
    platform: 'linux',
    arch: 'arm64',
    levels: ['baseline'],
    compiler: 'aarch64-linux-gnu-g++',
    toolchain: join(cpuRoot, 'native', 'cmake', 'aarch64-linux-gnu.cmake'),
  },
};

function isMusl() {
  if (hostPlatform() !== 'linux') return false;
  const report = process.report?.getReport?.();
  return existsSync('/etc/alpine-release') || (report && !report.header?.glibcVersionRuntime);
}

function has(command) {
  const r = spawnSync(command, ['--version'], { stdio: 'ignore' });
  return r.error === undefined && r.status === 0;
}

const host = `${hostPlatform()}-${hostArch()}`;
const canCross = hostPlatform() === 'linux' && hostArch() === 'x64';
let targets = wanted.length > 0 ? wanted : [host];
if (all) targets = [host, ...(canCross ? ['linux-arm64'] : [])].filter((t, i, a) => a.indexOf(t) === i);

const cmakeJs = require.resolve('cmake-js/bin/cmake-js', { paths: [root] });
/**
 * A cross-compiled build's environment: without ccache's base_dir (.ci/run sets it). Under it the
 * compiler sees each path relative to its build folder, so cuda-backend's compiles of cpu-backend's
 * sources (../../cpu-backend/native/src/...) never match cpu-backend's own (../native/src/...), flags
 * alike; with absolute paths they do (about 55 CPU s of the arm64 builds measured). Only the host's
 * builds need base_dir: pack-check's source builds from the tarballs (the host's target) find their
 * compiles in the cache through it.
 */
function crossEnv() {
  const env = { ...process.env };
  delete env.CCACHE_BASEDIR;
  return env;
}
const libc = hostPlatform() === 'linux' ? (isMusl() ? 'musl' : 'glibc') : null;
let built = 0;
for (const name of targets) {
  const t = TARGETS[name] ?? (name === host ? { platform: hostPlatform(), arch: hostArch(), levels: ['baseline'], compiler: 'c++' } : null);
  if (!t) usage(`cannot build ${name} here (targets: ${Object.keys(TARGETS).join(', ')} from linux-x64, or the host)`);
  if (name !== host && !(canCross && name === 'linux-arm64')) usage(`cannot cross-compile ${name} on ${host}`);
  if (t.toolchain && !has(t.compiler)) {
    const msg = `${name}: ${t.compiler} not found (apt-get install -y g++-aarch64-linux-gnu)`;
    if (all) {
      console.warn(`prebuild: skipping ${msg}`);
      continue;
    }
    usage(msg);
  }
  const file = `${FILE}${libc ? `.${libc}` : ''}.node`;
  for (const level of t.levels) {
    const out = join(root, `build-prebuild-${name}-${level}`);
    const cmakeArgs = [
      cmakeJs,
      'compile',
      '--out',
      out,
      '--log-level',
      'warn',
      '--arch',
      t.arch,
      '--CDEMBEDSTACK_PORTABLE=ON',
      ...config.defines.map((d) => `--CD${d}`),
      ...(t.arch === 'x64' && config.x64Levels ? [`--CDEMBEDSTACK_CPU_LEVEL=${level}`] : []),
      ...(t.toolchain ? [`--CDCMAKE_TOOLCHAIN_FILE=${t.toolchain}`] : []),
    ];
    console.log(`prebuild: ${pkg.name} ${name} ${level}`);
    const r = spawnSync(process.execPath, cmakeArgs, { cwd: root, stdio: 'inherit', env: t.toolchain ? crossEnv() : process.env });
    if (r.status !== 0) {
      console.error(`prebuild: the ${pkg.name} ${name} ${level} build failed`);
      process.exit(1);
    }
    const dir = join(root, 'prebuilds', name, level === 'baseline' ? '' : level);
    mkdirSync(dir, { recursive: true });
    // Copied beside, then renamed over: a process that has the old file loaded keeps its
    // mapping (a copy into the same file would change the pages under it).
    const tmp = join(dir, `.${file}.${process.pid}.tmp`);
    copyFileSync(join(out, 'Release', config.addon), tmp);
    renameSync(tmp, join(dir, file));
    // Written after the build that compiled these sources: the binary's provenance.
    writeFileSync(sidecarPath(join(dir, file)), `${JSON.stringify({ sourceHash: hash, target: name, level })}\n`);
    console.log(`prebuild: wrote ${join('prebuilds', name, level === 'baseline' ? '' : level, file)} (sources ${hash})`);
    built++;
  }
}
if (built === 0) usage('nothing was built');
