import { describe, expect, it } from 'vitest';
import { measure, measureAsync } from './harness.js';

describe('measure', () => {
  it('uses the seconds a self-timed call reports, one call per sample, median of the samples', () => {
    const seconds = [9, 0.5, 0.25, 1]; // warm-up, then three samples
    let calls = 0;
    const m = measure('self-timed', () => seconds[calls++]!, 100, { warmup: 1, minSamples: 3, maxSamples: 3, minMs: 0 });
    expect(calls).toBe(4);
    expect(m.samples).toEqual([200, 400, 100]);
    expect(m.rate).toBe(200);
    expect(m.calls).toBe(3);
  });

  it('without a warm-up calls once per sample', () => {
    const seen: number[] = [];
    const m = measure('cold', (i) => {
      seen.push(i);
      return 2;
    }, 10, { warmup: 0, minSamples: 2, maxSamples: 2, minMs: 0 });
    expect(seen).toEqual([0, 1]);
    expect(m.samples).toEqual([5, 5]);
  });

  it('passes increasing call numbers so callers can rotate batches', async () => {
    const seen: number[] = [];
    await measureAsync('async', async (i) => void seen.push(i), 1, { warmup: 2, minSamples: 1, maxSamples: 1, minMs: 0, sampleMs: 0 });
    expect(seen).toEqual([0, 1, 2]);
  });
});

describe('measureInterleaved', () => {
  it('warms every job up, then takes one sample of each per round', async () => {
    const { measureInterleaved } = await import('./harness.js');
    const order: string[] = [];
    const job = (name: string) => ({ label: name, items: 1, fn: (i: number) => void order.push(`${name}${i}`) });
    const ms = measureInterleaved([job('a'), job('b')], { warmup: 1, minSamples: 3, maxSamples: 3, minMs: 0, sampleMs: 0 });
    expect(order).toEqual(['a0', 'b0', 'a1', 'b1', 'a2', 'b2', 'a3', 'b3']);
    expect(ms.map((m) => m.samples.length)).toEqual([3, 3]);
  });
});
