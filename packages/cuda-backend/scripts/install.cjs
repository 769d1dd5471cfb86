// `install` lifecycle script: builds the native addon when it is missing (device
// code when nvcc is found, else the host mode only, saying so). Never fails the
// install: without a toolchain the backend reports, when used, what to install.
'use strict';
const { existsSync } = require('node:fs');
const { join } = require('node:path');
const { spawnSync } = require('node:child_process');

const root = join(__dirname, '..');
const note = (msg) => console.warn(`[@embedstack/cuda-backend] ${msg}`);

if (process.env.EMBEDSTACK_SKIP_NATIVE_BUILD) {
  note('EMBEDSTACK_SKIP_NATIVE_BUILD is set: not building the native addon.');
  process.exit(0);
}
if (existsSync(join(root, 'build', 'Release', 'embedstack_cuda.node'))) process.exit(0);
const r = spawnSync(process.execPath, [join(__dirname, 'build.cjs')], { cwd: root, stdio: 'inherit' });
if (r.status !== 0) {
  note('the native build failed (cmake and a C++17 compiler are needed: apt-get install -y cmake g++);');
  note('fix it and run: pnpm --filter @embedstack/cuda-backend build');
}
process.exit(0);
