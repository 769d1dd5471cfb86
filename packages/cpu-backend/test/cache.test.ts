import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { loadAddon } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

const child = fileURLToPath(new URL('./fixtures/malformedCacheCalls.cjs', import.meta.url));

describe('cpu backend cache: no input crashes the process', () => {
  it('malformed raw cacheXxx calls are each a coded error and leave the cache as it was', () => {
    const load = loadAddon();
    expect(load.binding, load.reason ?? '').not.toBeNull();
    const r = spawnSync(process.execPath, [child, load.path!], { encoding: 'utf8', timeout: 60_000 });
    expect(r.signal, r.stderr).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout.trim().split('\n').pop()!) as { calls: number; coded: number; uncoded: string[]; returned: string[]; intact: boolean; disposed: boolean };
    expect(report.uncoded).toEqual([]);
    expect(report.returned).toEqual([]);
    expect(report.calls).toBeGreaterThan(150);
    expect(report.coded).toBe(report.calls);
    expect(report.intact).toBe(true);
    expect(report.disposed).toBe(true);
  }, 60_000);
});
