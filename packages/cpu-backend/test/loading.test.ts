import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BackendUnavailableError, createTable, ErrorCodes } from '@embedstack/core';
import { ADDON_FILE, CpuBackend, candidatePaths, describePlatform, explain, loadAddon, supportedCpuLevels } from '@embedstack/cpu-backend';
import { beforeAll, describe, expect, it } from 'vitest';

const pkg = fileURLToPath(new URL('..', import.meta.url));
const corePkg = fileURLToPath(new URL('../../core', import.meta.url));

/** Builds a package's dist with tsup when it is missing (`pnpm test` builds everything first). */
function ensureDist(dir: string): void {
  if (existsSync(join(dir, 'dist', 'index.js')) && existsSync(join(dir, 'dist', 'index.cjs'))) return;
  execFileSync(process.execPath, [join(pkg, '..', '..', 'node_modules', 'tsup', 'dist', 'cli-default.js')], { cwd: dir, stdio: 'pipe' });
}

function runNode(args: string[], env: NodeJS.ProcessEnv = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, args, { cwd: pkg, encoding: 'utf8', timeout: 60_000, env: { ...process.env, ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('cpu backend: loading', () => {
  beforeAll(() => {
    ensureDist(corePkg);
    ensureDist(pkg);
  }, 120_000);

  const probe =
    "const t = m.cpuBackend.isUsable() && core.createTable({ dim: 2 }, { backend: 'cpu' }); " +
    "t.upsertSync([1n], [3, 4]); console.log(JSON.stringify({ usable: m.cpuBackend.isUsable(), v: Array.from(t.findSync([1n]).values), backends: core.listBackends() }));";

  it('loads from CommonJS (require) and registers "cpu"', () => {
    const r = runNode(['-e', `const m = require('@embedstack/cpu-backend'); const core = require('@embedstack/core'); ${probe}`]);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ usable: true, v: [3, 4], backends: ['cpu'] });
  });

  it('loads from ESM (import) and registers "cpu"', () => {
    const r = runNode([
      '--input-type=module',
      '-e',
      `const m = await import('@embedstack/cpu-backend'); const core = await import('@embedstack/core'); ${probe}`,
    ]);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ usable: true, v: [3, 4], backends: ['cpu'] });
  });

  it('explains a missing build: unusable, and createTable throws BACKEND_UNAVAILABLE with the fix', () => {
    const empty = mkdtempSync(join(tmpdir(), 'embedstack-noaddon-'));
    const backend = new CpuBackend({ load: () => loadAddon(candidatePaths({ EMBEDSTACK_CPU_ADDON: empty })) });
    expect(backend.isUsable()).toBe(false);
    const reason = backend.unavailableReason()!;
    expect(reason).toContain(join(empty, ADDON_FILE));
    expect(reason).toContain('pnpm --filter @embedstack/cpu-backend build');
    expect(reason).not.toMatch(/module not found/i);
    let err: unknown;
    try {
      createTable({ dim: 2 }, { backend });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(BackendUnavailableError);
    expect((err as BackendUnavailableError).code).toBe(ErrorCodes.BACKEND_UNAVAILABLE);
    expect((err as Error).message).toBe(reason);
  });

  it('EMBEDSTACK_CPU_ADDON pointing at an empty directory: the built package says what to run', () => {
    const empty = mkdtempSync(join(tmpdir(), 'embedstack-noaddon-'));
    const r = runNode(
      [
        '-e',
        "const m = require('@embedstack/cpu-backend'); const core = require('@embedstack/core'); " +
          "try { core.getBackend('cpu'); console.log('no error'); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message, usable: m.cpuBackend.isUsable() })); }",
      ],
      { EMBEDSTACK_CPU_ADDON: empty },
    );
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { code: string; message: string; usable: boolean };
    expect(out.code).toBe('BACKEND_UNAVAILABLE');
    expect(out.usable).toBe(false);
    expect(out.message).toContain('not built');
    expect(out.message).toContain('pnpm --filter @embedstack/cpu-backend build');
    // the override is named as the cause, with the way back (a source build may exist beside it)
    expect(out.message).toContain(`EMBEDSTACK_CPU_ADDON=${JSON.stringify(empty)} chose the paths tried`);
    expect(out.message).toContain("or unset it to load this package's own build or prebuilt binary");
  });

  it('a corrupt .node file is reported as built for another platform, with the rebuild command', () => {
    const dir = mkdtempSync(join(tmpdir(), 'embedstack-badaddon-'));
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, ADDON_FILE), 'not an ELF file');
    const load = loadAddon([join(dir, ADDON_FILE)]);
    expect(load.binding).toBeNull();
    expect(load.attempts).toHaveLength(1);
    expect(load.reason).toContain('pnpm --filter @embedstack/cpu-backend rebuild');
  });

  it('names the fix for each cause', () => {
    const missing = [{ path: '/x/embedstack_cpu.node', error: 'no such file (ENOENT)' }];
    expect(explain(missing, () => ({ cmake: false, compiler: false }))).toContain('apt-get install -y cmake g++');
    expect(explain(missing, () => ({ cmake: false, compiler: true }))).toMatch(/cmake is not installed/);
    expect(explain(missing, () => ({ cmake: true, compiler: true }))).toContain('It is not built');
    const abi = [{ path: '/x/embedstack_cpu.node', error: 'The module was compiled against a different Node.js version using NODE_MODULE_VERSION 108' }];
    expect(explain(abi)).toContain('another Node.js version');
    const platform = [{ path: '/x/embedstack_cpu.node', error: '/x/embedstack_cpu.node: invalid ELF header' }];
    expect(explain(platform)).toContain('another platform');
    const glibc = [{ path: '/x/prebuilds/linux-x64/x.node', error: "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found" }];
    expect(explain(glibc, () => ({ cmake: true, compiler: true }))).toContain('newer C library than this system has (glibc >= 2.34); build it from source: run `pnpm --filter @embedstack/cpu-backend build`');
    // the loader's own stale-prebuild errors name the sidecar, whose file name holds the libc tag (glibc, musl): still stale
    for (const tag of ['glibc', 'musl']) {
      const bin = `/x/prebuilds/linux-x64/@embedstack+cpu-backend.napi.${tag}.node`;
      for (const error of [
        `stale prebuilt binary: no ${bin}.json (it was not made by scripts/prebuild.mjs, so its sources are unknown)`,
        `stale prebuilt binary: unreadable ${bin}.json (Unexpected end of JSON input)`,
      ]) {
        expect(explain([{ path: bin, error }], () => ({ cmake: true, compiler: true }))).toContain(
          'The prebuilt binaries are older than the native sources here; rebuild them: run `pnpm --filter @embedstack/cpu-backend build:prebuilds --all`.',
        );
      }
    }
  });

  it('names the platform, Node and Node-API version in every reason', () => {
    const reason = explain([{ path: '/x/embedstack_cpu.node', error: 'no such file (ENOENT)' }], () => ({ cmake: true, compiler: true }));
    expect(reason).toContain(`could not be loaded on ${process.platform}-${process.arch}`);
    expect(reason).toContain(`Node ${process.versions.node} (Node-API ${process.versions.napi})`);
    expect(describePlatform()).toMatch(new RegExp(`^${process.platform}-${process.arch}( \\((glibc|musl)\\))?, Node `));
  });

  it("a binary in an app's own prebuilds/ folder (a checkout, but no package with native sources) loads: the staleness guard is not its business, and never throws", () => {
    const real = loadAddon().path;
    expect(real, 'a loadable addon (build it first)').not.toBeNull();
    const apps: [string, string | null][] = [
      ['no package.json', null],
      ['an app without native sources', JSON.stringify({ name: 'my-app', files: ['dist'] })],
      ['an unreadable package.json', '{ not json'],
    ];
    for (const [what, manifest] of apps) {
      const root = mkdtempSync(join(tmpdir(), 'embedstack-app-'));
      mkdirSync(join(root, 'src'));
      if (manifest !== null) writeFileSync(join(root, 'package.json'), manifest);
      const dir = join(root, 'prebuilds', `${process.platform}-${process.arch}`);
      mkdirSync(dir, { recursive: true });
      const binary = join(dir, 'addon.node');
      copyFileSync(real!, binary);
      let load: ReturnType<typeof loadAddon> | null = null;
      expect(() => (load = loadAddon([binary])), what).not.toThrow();
      expect(load!.reason, what).toBeNull();
      expect(load!.path, what).toBe(binary);
      expect(load!.build, what).toBe('prebuilt');
    }
  });

  it('without a source build, the prebuilt binary of the best level the CPU runs is tried first, then lower levels', () => {
    const paths = candidatePaths({});
    const release = join(pkg, 'build', 'Release', ADDON_FILE);
    expect(paths[0]).toBe(release);
    const prebuilt = paths.filter((p) => p.includes(`${sep}prebuilds${sep}`));
    if (prebuilt.length === 1 && !prebuilt[0]!.endsWith('.node')) {
      // no prebuilt binary for this platform here: the directory is listed, and its attempt says so
      const load = loadAddon([prebuilt[0]!]);
      expect(load.attempts[0]!.error).toContain(`no prebuilt binary for ${process.platform}-${process.arch}`);
      return;
    }
    const levels = supportedCpuLevels().reverse();
    expect(prebuilt.map((p) => (p.includes(`${sep}avx512${sep}`) ? 'avx512' : p.includes(`${sep}avx2${sep}`) ? 'avx2' : 'baseline'))).toEqual(levels);
    // With the source build out of the way the best prebuilt level loads
    const load = loadAddon(paths.filter((p) => p !== release));
    expect(load.reason).toBeNull();
    expect(load.build).toBe('prebuilt');
    expect(load.level).toBe(levels[0]);
  });
});
