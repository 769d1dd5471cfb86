// `install` lifecycle script (node-gyp-build's install pattern, with cmake-js):
// nothing to do when a prebuilt binary for this platform loads (prebuilds/, matched
// by node-gyp-build); else builds the addon from source into build/Release.
//
//   node scripts/install.cjs           what npm / pnpm run at install; never fails the
//                                      install (the backend then says, when used, what to run)
//   node scripts/install.cjs --build   builds from source whatever is there; exits 1 on failure
//
// A package manager that skips install scripts (pnpm 10 without onlyBuiltDependencies,
// npm with an allowScripts policy) loses nothing where a prebuilt binary exists.
'use strict';
const { existsSync } = require('node:fs');
const { join } = require('node:path');
const { spawnSync } = require('node:child_process');

const root = join(__dirname, '..');
const force = process.argv.includes('--build');
const note = (msg) => console.warn(`[@embedstack/cpu-backend] ${msg}`);
const done = (code) => process.exit(force ? code : 0);

if (!force && process.env.EMBEDSTACK_SKIP_NATIVE_BUILD) {
  note('EMBEDSTACK_SKIP_NATIVE_BUILD is set: not building the native addon.');
  process.exit(0);
}
if (!force && existsSync(join(root, 'build', 'Release', 'embedstack_cpu.node'))) process.exit(0);

/** The baseline prebuilt binary node-gyp-build picks for this platform, when it loads here. */
function loadablePrebuild() {
  let path;
  try {
    process.env.PREBUILDS_ONLY = '1'; // node-gyp-build reads it when first required
    path = require('node-gyp-build').resolve(root);
  } catch {
    return null; // no prebuild for this platform (or node-gyp-build is not installed yet)
  }
  try {
    require(path);
    return path;
  } catch (e) {
    note(`the prebuilt binary ${path} does not load here (${String(e.message).split('\n')[0]}); building from source.`);
    return null;
  }
}

if (!force) {
  const prebuild = loadablePrebuild();
  if (prebuild) process.exit(0);
}

let cli;
try {
  cli = require.resolve('cmake-js/bin/cmake-js', { paths: [root] });
} catch {
  note(`cmake-js is not installed yet; build later with: node ${join(root, 'scripts', 'install.cjs')} --build`);
  done(1);
}
const r = spawnSync(process.execPath, [cli, 'compile', '--out', 'build', '--log-level', 'warn'], { cwd: root, stdio: 'inherit' });
if (r.status !== 0) {
  note('the native build failed (is cmake and a C++17 compiler installed? apt-get install -y cmake g++);');
  note(`fix it and run: node ${join(root, 'scripts', 'install.cjs')} --build`);
  done(1);
}
done(0);
