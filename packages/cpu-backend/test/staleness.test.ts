import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAddon } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

// The guard against prebuilt binaries older than the native sources (#16): scripts/prebuild.mjs
// writes `<binary>.json` with the hash of the sources it built from; `prebuild.mjs --check`
// (each package's prepack) and, in a workspace checkout, the loader compare it with the
// sources on disk. Run on a small package laid out like cpu-backend, holding a real binary.

const pkg = fileURLToPath(new URL('..', import.meta.url));
const prebuildScript = join(pkg, 'scripts', 'prebuild.mjs');
const FILE = '@embedstack+cpu-backend.napi.glibc.node';
const real = join(pkg, 'prebuilds', 'linux-x64', FILE);
const skip =
  process.platform !== 'linux' || process.arch !== 'x64'
    ? 'the guard is checked with the linux-x64 binary'
    : !existsSync(real)
      ? `${real} is not built: run \`pnpm --filter @embedstack/cpu-backend build:prebuilds\``
      : null;

const SOURCE = 'int answer() { return 42; }\n';
/** The hash prebuild.mjs records, worked out here: sha256 of "<name>/<path>\0<text>\0" per file, 16 hex digits. */
const HASH = createHash('sha256').update(`@fixture/native/native/a.cc\0${SOURCE}\0`).digest('hex').slice(0, 16);

/** A package with native/a.cc and a prebuilt binary; `checkout`: has src/ (a workspace checkout). */
function fixture(sidecar: object | null, checkout = true): { root: string; binary: string } {
  const root = mkdtempSync(join(tmpdir(), 'embedstack-stale-'));
  writeFileSync(join(root, 'package.json'), JSON.stringify({ name: '@fixture/native', files: ['dist', 'native'] }));
  mkdirSync(join(root, 'native'));
  writeFileSync(join(root, 'native', 'a.cc'), SOURCE);
  if (checkout) mkdirSync(join(root, 'src'));
  const dir = join(root, 'prebuilds', 'linux-x64');
  mkdirSync(dir, { recursive: true });
  const binary = join(dir, FILE);
  copyFileSync(real, binary);
  if (sidecar) writeFileSync(`${binary}.json`, JSON.stringify(sidecar));
  return { root, binary };
}

const check = (root: string) => spawnSync(process.execPath, [prebuildScript, '--package', root, '--check'], { encoding: 'utf8' });

(skip ? describe.skip : describe)(`stale prebuilt binaries${skip ? `: ${skip}` : ''}`, () => {
  it('a binary built from these sources loads, and --check passes', () => {
    const { root, binary } = fixture({ sourceHash: HASH, target: 'linux-x64', level: 'baseline' });
    const load = loadAddon([binary]);
    expect(load.reason).toBeNull();
    expect(load.build).toBe('prebuilt');
    const r = check(root);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`1 prebuilt binaries, all from the sources here (hash ${HASH})`);
  });

  it('a binary recorded from other sources is skipped in a checkout with the rebuild command; --check fails (prepack)', () => {
    const { root, binary } = fixture({ sourceHash: '0123456789abcdef', target: 'linux-x64', level: 'baseline' });
    const load = loadAddon([binary]);
    expect(load.binding).toBeNull();
    expect(load.attempts).toEqual([{ path: binary, error: `stale prebuilt binary: built from other native sources (hash 0123456789abcdef; the sources here hash to ${HASH})` }]);
    expect(load.reason).toContain('older than the native sources here');
    expect(load.reason).toContain('pnpm --filter @embedstack/cpu-backend build:prebuilds --all');
    const r = check(root);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`prebuilds/linux-x64/${FILE} is stale: built from other native sources`);
  });

  it('a binary without its record is refused the same way', () => {
    const { root, binary } = fixture(null);
    const load = loadAddon([binary]);
    expect(load.attempts[0]!.error).toMatch(/^stale prebuilt binary: no .*\.node\.json \(it was not made by scripts\/prebuild\.mjs/);
    // the fix named is the prebuilds' rebuild (the sidecar's name, `.glibc.node.json`, is no C library error)
    expect(load.reason).toContain('older than the native sources here');
    expect(load.reason).toContain('pnpm --filter @embedstack/cpu-backend build:prebuilds --all');
    expect(check(root).status).toBe(1);
  });

  it('an installed package (no src/) is not re-hashed at load: its tarball was checked when packed', () => {
    const { binary } = fixture({ sourceHash: '0123456789abcdef' }, false);
    expect(loadAddon([binary]).build).toBe('prebuilt');
  });

  it("this workspace's prebuilt binaries (cpu-backend and cuda-backend) come from the sources here", () => {
    for (const dir of [pkg, join(pkg, '..', 'cuda-backend')]) {
      const r = check(dir);
      expect(r.status, r.stderr).toBe(0);
    }
  });
});
