// `install` lifecycle script: cpu-backend's install steps (scripts/install.cjs there)
// for this package: nothing to do when the host mode's prebuilt binary for this
// platform loads (prebuilds/) or build/Release exists; else builds the addon with
// scripts/build.cjs (device code when nvcc is found, else the host mode only, saying
// so). Never fails the install: without a toolchain the backend reports, when used,
// what to install.
//
//   node scripts/install.cjs           what npm / pnpm run at install
//   node scripts/install.cjs --build   builds from source whatever is there; exits 1 on failure
//
// When nvcc is found (or EMBEDSTACK_CUDA=on) the source build runs even where the
// prebuilt binary loads: only a source build holds device code. Without nvcc a source
// build would be the host mode, which the prebuilt binary already is.
'use strict';
const { dirname, join } = require('node:path');
const { spawnSync } = require('node:child_process');

const root = join(__dirname, '..');
let shared;
try {
  shared = require(join(dirname(require.resolve('@embedstack/cpu-backend/package.json', { paths: [root] })), 'scripts', 'install.cjs'));
} catch (e) {
  console.warn(`[@embedstack/cuda-backend] @embedstack/cpu-backend is not installed (${e.message}); build later with: node ${join(root, 'scripts', 'install.cjs')} --build`);
  process.exit(process.argv.includes('--build') ? 1 : 0);
}
const mode = (process.env.EMBEDSTACK_CUDA ?? 'auto').toLowerCase();
const deviceBuild = mode === 'on' || (mode !== 'off' && require('./build.cjs').findNvcc() !== null);
shared.install({
  root,
  name: '@embedstack/cuda-backend',
  addonFile: 'embedstack_cuda.node',
  preferSource: deviceBuild,
  buildHint: 'cmake and a C++17 compiler are needed: apt-get install -y cmake g++',
  build: () => spawnSync(process.execPath, [join(__dirname, 'build.cjs')], { cwd: root, stdio: 'inherit' }).status,
});
