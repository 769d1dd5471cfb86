import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { loadAddon } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

const child = fileURLToPath(new URL('./fixtures/malformedCalls.cjs', import.meta.url));

describe('cpu backend: no input crashes the process', () => {
  it('a child survives thousands of malformed raw addon calls, each a coded error', () => {
    const load = loadAddon();
    expect(load.binding, load.reason ?? '').not.toBeNull();
    for (const seed of [1, 7]) {
      const r = spawnSync(process.execPath, [child, load.path!, String(seed)], { encoding: 'utf8', timeout: 60_000 });
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(0);
      const report = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
        calls: number;
        coded: number;
        uncoded: string[];
        returned: string[];
        tableStillWorks: boolean;
        special: string[];
      };
      expect(report.calls).toBeGreaterThanOrEqual(4000);
      expect(report.uncoded).toEqual([]);
      expect(report.returned).toEqual([]);
      expect(report.coded).toBe(report.calls);
      expect(report.tableStillWorks).toBe(true);
      // NaN / Inf values are stored as given; gradients with NaN/Inf give NaN, no trap
      expect(report.special).toEqual(['NaN', 'NaN', 'NaN', '0']);
    }
  }, 120_000);
});
