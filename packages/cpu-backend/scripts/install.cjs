// `install` lifecycle script: builds the native addon when it is missing. Never
// fails the install (a root `pnpm install` may run it before cmake-js is in place,
// or on a machine without a compiler): the backend then reports, when used, what
// to install or run (see src/loader.ts).
'use strict';
const { existsSync } = require('node:fs');
const { join } = require('node:path');
const { spawnSync } = require('node:child_process');

const root = join(__dirname, '..');
const note = (msg) => console.warn(`[@embedstack/cpu-backend] ${msg}`);

if (process.env.EMBEDSTACK_SKIP_NATIVE_BUILD) {
  note('EMBEDSTACK_SKIP_NATIVE_BUILD is set: not building the native addon.');
  process.exit(0);
}
if (existsSync(join(root, 'build', 'Release', 'embedstack_cpu.node'))) process.exit(0);

let cli;
try {
  cli = require.resolve('cmake-js/bin/cmake-js', { paths: [root] });
} catch {
  note('cmake-js is not installed yet; build later with: pnpm --filter @embedstack/cpu-backend build');
  process.exit(0);
}
const r = spawnSync(process.execPath, [cli, 'compile', '--out', 'build', '--log-level', 'warn'], { cwd: root, stdio: 'inherit' });
if (r.status !== 0) {
  note('the native build failed (is cmake and a C++17 compiler installed? apt-get install -y cmake g++);');
  note('fix it and run: pnpm --filter @embedstack/cpu-backend build');
}
process.exit(0);
