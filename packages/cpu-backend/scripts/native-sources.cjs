// The native sources a package's addon is compiled from, and their hash: the guard
// against shipping or testing prebuilt binaries older than the sources (issue #16).
//
// The sources are the entries of the package's "files" that are build inputs
// (CMakeLists.txt and everything under native/), plus the same of each @embedstack
// dependency that ships native sources (cuda-backend compiles cpu-backend's shared
// ones). CRLF is read as LF, so a Windows checkout hashes like a Linux one.
//
// scripts/prebuild.mjs writes the hash beside each binary it builds
// (`<binary>.node.json`: { sourceHash, target, level }); `prebuild.mjs --check`
// (the packages' `prepack`, so `pnpm pack` / `npm publish` of a stale prebuild
// fails) and the loader in a workspace checkout (src/loader.ts) compare it with the
// sources on disk.
'use strict';
const { createHash } = require('node:crypto');
const { existsSync, readdirSync, readFileSync, statSync } = require('node:fs');
const { dirname, join, relative, sep } = require('node:path');

/** The sidecar of a prebuilt binary: `<binary>.json` (node-gyp-build ignores files not ending in .node). */
function sidecarPath(binary) {
  return `${binary}.json`;
}

function readJson(path) {
  return JSON.parse(readFileSync(path, 'utf8'));
}

/** The build inputs among a package.json's "files". */
function nativeEntries(pkg) {
  return (pkg.files ?? []).filter((f) => f === 'CMakeLists.txt' || f === 'native' || f.startsWith('native/'));
}

function walk(path, out) {
  if (!existsSync(path)) return;
  if (statSync(path).isDirectory()) {
    for (const name of readdirSync(path).sort()) walk(join(path, name), out);
  } else out.push(path);
}

/**
 * True when the package at `root` builds an addon from native sources of its own (its
 * "files" list build inputs); false for any other folder (an app that keeps a binary
 * in its own prebuilds/, one without a readable package.json).
 */
function hasNativeSources(root) {
  try {
    return nativeEntries(readJson(join(root, 'package.json'))).length > 0;
  } catch {
    return false;
  }
}

/** `[{ name, dir, files }]`: the package and each @embedstack dependency with native sources. */
function nativeSourceSets(root) {
  const pkg = readJson(join(root, 'package.json'));
  const sets = [{ name: pkg.name, dir: root, entries: nativeEntries(pkg) }];
  for (const dep of Object.keys(pkg.dependencies ?? {}).filter((n) => n.startsWith('@embedstack/')).sort()) {
    let dir;
    try {
      dir = dirname(require.resolve(`${dep}/package.json`, { paths: [root] }));
    } catch {
      continue;
    }
    const entries = nativeEntries(readJson(join(dir, 'package.json')));
    if (entries.length > 0) sets.push({ name: dep, dir, entries });
  }
  return sets.map(({ name, dir, entries }) => {
    const files = [];
    for (const e of entries) walk(join(dir, e), files);
    return { name, dir, files };
  });
}

/** sha256 (first 16 hex digits) of the native sources' paths and contents. */
function sourceHash(root) {
  const h = createHash('sha256');
  for (const set of nativeSourceSets(root)) {
    for (const file of set.files) {
      h.update(`${set.name}/${relative(set.dir, file).split(sep).join('/')}\0`);
      h.update(readFileSync(file, 'utf8').replace(/\r\n/g, '\n'));
      h.update('\0');
    }
  }
  return h.digest('hex').slice(0, 16);
}

/** Every prebuilt binary under `<root>/prebuilds` (any depth). */
function prebuiltBinaries(root) {
  const files = [];
  walk(join(root, 'prebuilds'), files);
  return files.filter((f) => f.endsWith('.node'));
}

/**
 * Why a prebuilt binary cannot be trusted to match `hash` (the sources' hash), or
 * null when its sidecar says it was built from them.
 */
function staleness(binary, hash) {
  const side = sidecarPath(binary);
  if (!existsSync(side)) return `no ${side} (it was not made by scripts/prebuild.mjs, so its sources are unknown)`;
  let recorded;
  try {
    recorded = readJson(side).sourceHash;
  } catch (e) {
    return `unreadable ${side} (${e.message})`;
  }
  return recorded === hash ? null : `built from other native sources (hash ${recorded}; the sources here hash to ${hash})`;
}

module.exports = { sidecarPath, sourceHash, hasNativeSources, nativeSourceSets, prebuiltBinaries, staleness };
