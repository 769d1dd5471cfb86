// Runs in a fresh project where the packed tarballs were installed with npm
// (scripts/pack-check.mjs): cuda-backend's host mode, the acceptance line
// `createTable({ dim: 8 }, { backend: 'cuda-host' })`, and which addon the process loaded.
//   node use-cuda-host.mjs prebuilt|source   a lookup; the prebuilt (prebuilds/) or source (build/Release) addon ran
//   node use-cuda-host.mjs missing           neither exists: the error names the platform, what was tried and the command
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createTable } from '@embedstack/core';
import { loadCudaAddon } from '@embedstack/cuda-backend';
import { expectLookup } from './lookup.mjs';

const want = process.argv[2];
assert.ok(['prebuilt', 'source', 'missing'].includes(want), 'usage: node use-cuda-host.mjs prebuilt|source|missing');
const tuple = `${process.platform}-${process.arch}`;

if (want === 'missing') {
  let error;
  try {
    createTable({ dim: 8 }, { backend: 'cuda-host' });
  } catch (e) {
    error = e;
  }
  assert.ok(error, 'createTable on cuda-host throws when no addon exists');
  assert.equal(error.code, 'BACKEND_UNAVAILABLE');
  const m = error.message;
  assert.ok(m.includes(`could not be loaded on ${tuple}`), `names the platform: ${m}`);
  assert.ok(m.includes(`prebuilds/${tuple}: no such file (ENOENT): no prebuilt binary for ${tuple} in this package`), `says what was tried: ${m}`);
  assert.ok(m.includes('build/Release/embedstack_cuda.node: no such file'), `tries the source build: ${m}`);
  assert.match(m, /run `node \S*node_modules\/@embedstack\/cuda-backend\/scripts\/install\.cjs --build`/, `names the command: ${m}`);
  console.log(JSON.stringify({ ok: true, message: m }));
} else {
  expectLookup('cuda-host');
  const load = loadCudaAddon();
  assert.equal(load.build, want, `the ${want} addon runs (${load.path})`);
  // The binary in this process's memory map is the one reported.
  assert.ok(readFileSync('/proc/self/maps', 'utf8').includes(load.path), `${load.path} is mapped`);
  if (want === 'prebuilt') assert.ok(load.path.includes(`/prebuilds/${tuple}/`), load.path);
  else assert.match(load.path, /\/build\/Release\/embedstack_cuda\.node$/);
  console.log(JSON.stringify({ ok: true, arch: process.arch, build: load.build, path: load.path }));
}
