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
// cuda-backend's install script runs the same steps (`install()` below) with its own build.
'use strict';
const { existsSync } = require('node:fs');
const { join } = require('node:path');
const { spawnSync } = require('node:child_process');

/**
 * The install steps of a package with a native addon.
 * @param {{ root: string, name: string, addonFile: string, build: () => number, buildHint: string, preferSource?: boolean }} pkg
 *   build() compiles from source and returns the exit status; buildHint says what the
 *   source build needs (printed when it fails); preferSource: build even when a
 *   prebuilt binary loads (cuda-backend with nvcc: only a source build has device code).
 */
function install(pkg) {
  const force = process.argv.includes('--build');
  const note = (msg) => console.warn(`[${pkg.name}] ${msg}`);
  const done = (code) => process.exit(force ? code : 0);
  const again = `node ${join(pkg.root, 'scripts', 'install.cjs')} --build`;

  if (!force && process.env.EMBEDSTACK_SKIP_NATIVE_BUILD) {
    note('EMBEDSTACK_SKIP_NATIVE_BUILD is set: not building the native addon.');
    process.exit(0);
  }
  if (!force && existsSync(join(pkg.root, 'build', 'Release', pkg.addonFile))) process.exit(0);
  if (!force && !pkg.preferSource && loadablePrebuild(pkg.root, note)) process.exit(0);

  let status;
  try {
    status = pkg.build();
  } catch (e) {
    note(`${e.message}; build later with: ${again}`);
    done(1);
  }
  if (status !== 0) {
    note(`the native build failed (${pkg.buildHint});`);
    note(`fix it and run: ${again}`);
    done(1);
  }
  done(0);
}

/** The baseline prebuilt binary node-gyp-build picks for this platform, when it loads here. */
function loadablePrebuild(root, note) {
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

/** cmake-js resolved from a package root (thrown when it is not installed yet). */
function cmakeJs(root) {
  try {
    return require.resolve('cmake-js/bin/cmake-js', { paths: [root] });
  } catch {
    throw new Error('cmake-js is not installed yet');
  }
}

module.exports = { install, cmakeJs };

if (require.main === module) {
  const root = join(__dirname, '..');
  install({
    root,
    name: '@embedstack/cpu-backend',
    addonFile: 'embedstack_cpu.node',
    buildHint: 'is cmake and a C++17 compiler installed? apt-get install -y cmake g++',
    build: () => spawnSync(process.execPath, [cmakeJs(root), 'compile', '--out', 'build', '--log-level', 'warn'], { cwd: root, stdio: 'inherit' }).status,
  });
}
