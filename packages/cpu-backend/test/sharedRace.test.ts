import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// Typed arrays over a SharedArrayBuffer can be rewritten by another thread (a Worker) while a
// call runs, sync or Promise. The kernels read an input more than once and assume it the same
// (a batch's keys deduped, then placed; a capped table's scores compared in a sort; exists
// flags counted, then applied), so a value changed between two reads wrote past their buffers:
// the process aborted ("free(): invalid next size", "malloc(): unaligned tcache chunk") or
// segfaulted within seconds. The binding now reads a copy of every shared input taken as the
// call's arguments are parsed (outputs, only written, stay in place).

const require = createRequire(import.meta.url);
const child = fileURLToPath(new URL('./fixtures/sharedRace.mjs', import.meta.url));
const corePath = require.resolve('@embedstack/core');
const cpuPath = require.resolve('@embedstack/cpu-backend');

describe('cpu backend: inputs over a SharedArrayBuffer rewritten by a Worker during calls', () => {
  it.each([1, 2])('seed %i: thousands of sync and Promise calls, the process survives, every error coded', (seed) => {
    const r = spawnSync(process.execPath, [child, corePath, cpuPath, String(seed), '3000'], { encoding: 'utf8', timeout: 60_000 });
    expect({ status: r.status, signal: r.signal, stderr: r.stderr.slice(-400) }).toEqual({ status: 0, signal: null, stderr: '' });
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { calls: number; codes: Record<string, number>; wrong: string[] };
    expect(out.wrong).toEqual([]);
    expect(out.calls).toBeGreaterThan(500);
  }, 90_000);
});
