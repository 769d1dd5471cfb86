import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BackendUnavailableError, createTable, ErrorCodes } from '@embedstack/core';
import { CUDA_ADDON_FILE, CudaBackend, cudaBackend, cudaCandidatePaths, cudaHostBackend, explainCudaAttempts, loadCudaAddon } from '@embedstack/cuda-backend';
import { describe, expect, it } from 'vitest';

const pkg = fileURLToPath(new URL('..', import.meta.url));

function runNode(args: string[], env: NodeJS.ProcessEnv = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, args, { cwd: pkg, encoding: 'utf8', timeout: 60_000, env: { ...process.env, ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const status = loadCudaAddon().binding?.deviceStatus();
const noDevice = status !== undefined && !status.usable;

describe('cuda backend: loading and device detection', () => {
  it('registers cuda, cuda-host and cpu; from CommonJS and ESM', () => {
    const probe =
      "const t = core.createTable({ dim: 2 }, { backend: 'cuda-host' }); t.upsertSync([1n], [3, 4]); " +
      'console.log(JSON.stringify({ v: Array.from(t.findSync([1n]).values), backends: core.listBackends().sort() }));';
    for (const head of [
      "const m = require('@embedstack/cuda-backend'); const core = require('@embedstack/core');",
      "const m = await import('@embedstack/cuda-backend'); const core = await import('@embedstack/core');",
    ]) {
      const args = head.includes('await') ? ['--input-type=module', '-e', head + probe] : ['-e', head + probe];
      const r = runNode(args);
      expect(r.status, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual({ v: [3, 4], backends: ['cpu', 'cuda', 'cuda-host'] });
    }
  });

  it('reports what the build holds and what the machine offers', () => {
    expect(status).toBeDefined();
    const s = status!;
    expect(typeof s.compiled).toBe('boolean');
    if (s.usable) {
      expect(s.reason).toBe('');
      expect(s.devices.length).toBeGreaterThan(0);
    } else {
      expect(s.reason.length).toBeGreaterThan(20);
      // host-only builds name the missing nvcc; device builds on a machine without a GPU the CUDA error
      expect(s.reason).toMatch(s.compiled ? /cudaGetDeviceCount|device/ : /without nvcc/);
    }
    if (s.compiled) expect(s.architectures.length).toBeGreaterThan(0);
  });

  it('with nvcc on this machine the build holds device code for sm_80 and sm_90 (the default architectures)', () => {
    const nvcc = spawnSync(process.env.CUDACXX ?? 'nvcc', ['--version'], { encoding: 'utf8' });
    const info = loadCudaAddon().binding!.info();
    if (nvcc.status !== 0 || process.env.EMBEDSTACK_CUDA === 'off') {
      console.log(`[cuda-backend] no nvcc here (or EMBEDSTACK_CUDA=off): host-mode build, device code ${info.deviceCode}`);
      return;
    }
    expect(info.deviceCode).toBe(true);
    expect(info.architectures).toBe((process.env.EMBEDSTACK_CUDA_ARCHITECTURES || '80;90').replaceAll(';', ','));
  });

  it.runIf(noDevice)('without a usable GPU: cuda is not usable, says why, and the registry picks cpu', () => {
    expect(cudaBackend.isUsable()).toBe(false);
    expect(cudaBackend.unavailableReason()).toBe(status!.reason);
    expect(cudaHostBackend.isUsable()).toBe(true);
    let err: unknown;
    try {
      createTable({ dim: 2 }, { backend: cudaBackend });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(BackendUnavailableError);
    expect((err as Error).message).toContain(status!.reason);
    const r = runNode(['-e', "require('@embedstack/cuda-backend'); console.log(require('@embedstack/core').getBackend().name)"]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('cpu');
  });

  it.runIf(noDevice)('EMBEDSTACK_BACKEND=cuda is an error naming the reason, also through loadDefaultBackend (no import)', () => {
    const r = runNode(
      [
        '-e',
        "const core = require('@embedstack/core'); try { core.loadDefaultBackend({ from: process.cwd() + '/package.json' }); console.log('no error'); } " +
          'catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }',
      ],
      { EMBEDSTACK_BACKEND: 'cuda' },
    );
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { code: string; message: string };
    expect(out.code).toBe(ErrorCodes.BACKEND_UNAVAILABLE);
    expect(out.message).toContain('Backend "cuda" is registered but not usable on this machine');
    expect(out.message).toContain(status!.reason);
  });

  it('installed next to a facade, it is loaded by loadDefaultBackend and chosen only when a GPU is usable', () => {
    const r = runNode([
      '-e',
      "const core = require('@embedstack/core'); const b = core.loadDefaultBackend({ from: process.cwd() + '/package.json' }); " +
        'console.log(JSON.stringify({ name: b.name, backends: core.listBackends().sort() }));',
    ]);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { name: string; backends: string[] };
    expect(out.backends).toEqual(['cpu', 'cuda', 'cuda-host']);
    expect(out.name).toBe(status!.usable ? 'cuda' : 'cpu');
  });

  it('EMBEDSTACK_BACKEND=cuda-host runs the host mode, loaded on demand', () => {
    const r = runNode(
      ['-e', "const core = require('@embedstack/core'); const b = core.loadDefaultBackend({ from: process.cwd() + '/package.json' }); console.log(b.name, b.capabilities().device)"],
      { EMBEDSTACK_BACKEND: 'cuda-host' },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('cuda-host cpu');
  });

  it('stays mapped when the only worker threads that loaded it end with Promise calls in flight', () => {
    // Node dlcloses an addon when the last environment that loaded it ends; the shared
    // thread pool outlives environments, so the addon is linked to stay (-z nodelete).
    const script = `
      const { Worker } = require('node:worker_threads');
      const core = require.resolve('@embedstack/core'), cuda = require.resolve('@embedstack/cuda-backend');
      const body = 'const { parentPort } = require("node:worker_threads"); const c = require(' + JSON.stringify(core) + '); const m = require(' + JSON.stringify(cuda) + ');' +
        'const t = c.createTable({ dim: 4 }, { backend: "cuda-host" }); t.upsertSync([1n], [1, 2, 3, 4]); const keys = new BigInt64Array(200000).fill(1n);' +
        'let n = 0; const loop = () => t.find(keys).then((r) => { if (r.values[3] !== 4) throw new Error("bad value"); if (++n === 3) parentPort.postMessage(m.loadCudaAddon().path); loop(); }); loop(); loop();';
      const loaded = new Set(); // the addon file each worker loaded
      const ends = [0, 1].map(() => new Promise((res) => { const w = new Worker(body, { eval: true }); w.on('error', (e) => { console.error(e); process.exit(3); }); w.once('message', (path) => { loaded.add(require('node:fs').realpathSync(path)); w.terminate().then(res); }); }));
      Promise.all(ends).then(() => {
        const maps = require('node:fs').readFileSync('/proc/self/maps', 'utf8').split('\\n');
        const mapped = loaded.size > 0 && [...loaded].every((f) => maps.some((l) => l.endsWith(' ' + f)));
        const c = require(core); require(cuda);
        const t = c.createTable({ dim: 2 }, { backend: 'cuda-host' }); t.upsertSync([5n], [6, 7]);
        console.log('mapped ' + mapped + ' value ' + t.findSync([5n]).values[1]);
      });`;
    const r = runNode(['-e', script]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('mapped true value 7');
  });

  it('explains a missing build with the command to run', () => {
    const empty = mkdtempSync(join(tmpdir(), 'embedstack-nocuda-'));
    const backend = new CudaBackend({ mode: 'host', load: () => loadCudaAddon(cudaCandidatePaths({ EMBEDSTACK_CUDA_ADDON: empty })) });
    expect(backend.isUsable()).toBe(false);
    const reason = backend.unavailableReason()!;
    expect(reason).toContain(join(empty, CUDA_ADDON_FILE));
    expect(reason).toContain('pnpm --filter @embedstack/cuda-backend build');
    expect(() => createTable({ dim: 2 }, { backend })).toThrow(expect.objectContaining({ code: ErrorCodes.BACKEND_UNAVAILABLE }));
  });

  it('a corrupt .node file and a CPU addon are refused with the rebuild command', () => {
    const dir = mkdtempSync(join(tmpdir(), 'embedstack-badcuda-'));
    writeFileSync(join(dir, CUDA_ADDON_FILE), 'not an ELF file');
    const bad = loadCudaAddon([join(dir, CUDA_ADDON_FILE)]);
    expect(bad.binding).toBeNull();
    expect(bad.reason).toContain('pnpm --filter @embedstack/cuda-backend rebuild');
    const cpuAddon = join(pkg, '..', 'cpu-backend', 'build', 'Release', 'embedstack_cpu.node');
    const wrong = loadCudaAddon([cpuAddon]);
    expect(wrong.binding).toBeNull();
    expect(wrong.reason).toContain('stale build: not a CUDA backend addon');
  });

  it('names the fix for each cause', () => {
    expect(explainCudaAttempts([{ path: '/x', error: 'no such file (ENOENT)' }])).toContain('It is not built');
    expect(explainCudaAttempts([{ path: '/x', error: 'compiled against NODE_MODULE_VERSION 108' }])).toContain('another Node.js version');
    expect(explainCudaAttempts([{ path: '/x', error: '/x: invalid ELF header' }])).toContain('another platform');
  });

  it('validates its options', () => {
    expect(() => new CudaBackend({ mode: 'gpu' as never })).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_ARGUMENT }));
    expect(() => new CudaBackend({ device: -1 })).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_ARGUMENT }));
    expect(() => new CudaBackend({ hbmBudgetBytes: 1.5 })).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_ARGUMENT }));
    expect(() => new CudaBackend({ nope: 1 } as never)).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_ARGUMENT }));
    expect(new CudaBackend({ mode: 'host' }).name).toBe('cuda-host');
    expect(new CudaBackend().priority).toBeGreaterThan(10);
    expect(new CudaBackend({ mode: 'host' }).priority).toBeLessThan(10);
  });
});
