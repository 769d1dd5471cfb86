#!/usr/bin/env node
// Builds the prebuilt binaries shipped in the npm package, in prebuildify's layout,
// read at run time with node-gyp-build's matching (src/prebuilds.ts):
//
//   prebuilds/<platform>-<arch>/@embedstack+cpu-backend.napi[.glibc|.musl].node   the baseline build
//   prebuilds/<platform>-<arch>/<level>/<same file name>                         x86-64 levels avx2, avx512
//
// node-gyp-build alone would pick the baseline file (it skips sub-directories), so
// the layout stays loadable by the standard loader; ours adds the CPU level.
//
//   node scripts/prebuild.mjs                 this machine's platform (linux-x64: baseline, avx2, avx512)
//   node scripts/prebuild.mjs --target linux-arm64   cross-compiled (apt-get install -y g++-aarch64-linux-gnu)
//   node scripts/prebuild.mjs --all           every target this machine can build (what a release packs)
//   node scripts/prebuild.mjs --clean         removes prebuilds/ and the build directories first
//
// Build directories (build-prebuild/<target>-<level>) are kept, so a rebuild only
// recompiles what changed. The macOS and Windows binaries come from CI
// (.github/workflows/prebuilds.yml), not from this machine.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { arch as hostArch, platform as hostPlatform } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const FILE = `${pkg.name.replace(/\//g, '+')}.napi`;
const X64_LEVELS = ['baseline', 'avx2', 'avx512'];

/** What can be built: the host's platform, and linux-arm64 from an x86-64 Linux host. */
const TARGETS = {
  'linux-x64': { platform: 'linux', arch: 'x64', levels: X64_LEVELS, compiler: 'c++' },
  'linux-arm64': {
    platform: 'linux',
    arch: 'arm64',
    levels: ['baseline'],
    compiler: 'aarch64-linux-gnu-g++',
    toolchain: join(root, 'native', 'cmake', 'aarch64-linux-gnu.cmake'),
  },
};

function usage(message) {
  if (message) console.error(`prebuild: ${message}`);
  console.error('usage: node scripts/prebuild.mjs [--target <platform-arch>]... [--all] [--clean]');
  process.exit(2);
}

const args = process.argv.slice(2);
const wanted = [];
let all = false;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--all') all = true;
  else if (a === '--clean') {
    rmSync(join(root, 'prebuilds'), { recursive: true, force: true });
    rmSync(join(root, 'build-prebuild'), { recursive: true, force: true });
  } else if (a === '--target') {
    const t = args[++i];
    if (!t) usage('--target needs a value');
    wanted.push(t === 'host' ? `${hostPlatform()}-${hostArch()}` : t);
  } else usage(`unknown argument ${a}`);
}

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
    const out = join(root, 'build-prebuild', `${name}-${level}`);
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
      ...(t.arch === 'x64' ? [`--CDEMBEDSTACK_CPU_LEVEL=${level}`] : []),
      ...(t.toolchain ? [`--CDCMAKE_TOOLCHAIN_FILE=${t.toolchain}`] : []),
    ];
    console.log(`prebuild: ${name} ${level}`);
    const r = spawnSync(process.execPath, cmakeArgs, { cwd: root, stdio: 'inherit' });
    if (r.status !== 0) {
      console.error(`prebuild: the ${name} ${level} build failed`);
      process.exit(1);
    }
    const dir = join(root, 'prebuilds', name, level === 'baseline' ? '' : level);
    mkdirSync(dir, { recursive: true });
    copyFileSync(join(out, 'Release', 'embedstack_cpu.node'), join(dir, file));
    console.log(`prebuild: wrote ${join('prebuilds', name, level === 'baseline' ? '' : level, file)}`);
    built++;
  }
}
if (built === 0) usage('nothing was built');
