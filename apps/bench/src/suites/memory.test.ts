import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { CHILD_HEAP_FLAGS, heapChangeNote, type MemoryChildResult } from './memory.js';

// A child allocating 4M objects that each live through the next 100K allocations: scavenges find
// most of the young generation alive, and V8 grows it (to 32 MiB on Node 20) unless the flags pin it
// (new space is then 2 semi-spaces of 1 MiB).
const NEW_SPACE_SCRIPT = [
  "const v8 = require('node:v8');",
  'const ring = new Array(100000);',
  'let keep = 0;',
  'for (let i = 0; i < 4e6; i++) { const o = { a: i, b: [i, i + 1, i + 2] }; ring[i % 100000] = o; keep += o.b.length; }',
  "const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');",
  'console.log(JSON.stringify({ keep, newSpace: s.space_size }));',
].join('\n');

const newSpaceAfterPressure = (flags: readonly string[]): number => {
  const r = spawnSync(process.execPath, [...flags, '-e', NEW_SPACE_SCRIPT], { encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  const out = JSON.parse(r.stdout.trim()) as { keep: number; newSpace: number };
  expect(out.keep).toBe(12e6);
  return out.newSpace;
};

describe('memory suite: V8 kept out of the RSS delta', () => {
  it("the child's flags hold V8's young generation at a few MiB under allocation pressure (free, it grows past 8 MiB)", () => {
    expect(newSpaceAfterPressure(CHILD_HEAP_FLAGS)).toBeLessThanOrEqual(4 * 2 ** 20);
    // the same pressure without the flags: the growth the flags exist to prevent (so this test can fail)
    expect(newSpaceAfterPressure([])).toBeGreaterThan(8 * 2 ** 20);
  }, 60_000);

  it('heapChangeNote names the largest change of heapTotal, with its sign, over the good results', () => {
    const r = (a: number, b: number): MemoryChildResult => ({ rssDelta: 0, memoryUsage: 0, size: 0, capacity: 0, heapTotal: [a, b] });
    const MiB = 2 ** 20;
    expect(heapChangeNote([r(58 * MiB, 26 * MiB), r(10 * MiB, 11 * MiB), new Error('x')])).toContain('at most -32.0 MiB');
    expect(heapChangeNote([r(10 * MiB, 11.5 * MiB)])).toContain('at most +1.5 MiB');
    expect(heapChangeNote([new Error('x')])).toBe('V8 heapTotal change between the readings: no child result');
  });
});
