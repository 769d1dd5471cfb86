import { describe, expect, it } from 'vitest';
import { enough, joinLabels, type Measured, measure, measureInterleaved, poolInterleaved, statisticsOf, summarize } from './harness.js';
import { pairedRatio, ratioTarget } from './report.js';
import { measuredFigure } from './suites/common.js';

describe('measure', () => {
  it('uses the seconds a self-timed call reports, one call per sample, median of the samples', async () => {
    const seconds = [9, 0.5, 0.25, 1]; // warm-up, then three samples
    let calls = 0;
    const m = await measure('self-timed', () => seconds[calls++]!, 100, { warmup: 1, minSamples: 3, maxSamples: 3, minMs: 0 });
    expect(calls).toBe(4);
    expect(m.samples).toEqual([200, 400, 100]);
    expect(m.rate).toBe(200);
    expect(m.calls).toBe(3);
    // |200-200|, |400-200|, |100-200| -> median deviation 100; too few samples to call one an outlier
    expect(m.spread).toMatchObject({ mad: 100, min: 100, max: 400, outliers: 0, samples: 3 });
  });

  it('reports the cores the process kept busy: about one for a busy JS loop, near none while it waits, none for self-timed calls', async () => {
    const spin = (ms: number): void => {
      const end = performance.now() + ms;
      while (performance.now() < end);
    };
    const busy = await measure('busy', () => spin(2), 1, { warmup: 1, minSamples: 3, maxSamples: 3, minMs: 0, sampleMs: 30 });
    const idle = await measure('idle', () => new Promise<void>((r) => setTimeout(r, 5)), 1, { warmup: 1, minSamples: 3, maxSamples: 3, minMs: 0, sampleMs: 30, async: true });
    // The main thread spins through the whole busy sample: at most its own core plus a little
    // of the collector's (less than a core when a loaded machine takes the CPU away), and
    // always more than while it only waits on timers.
    expect(busy.spread.cores).toBeLessThan(1.6);
    expect(idle.spread.cores).toBeLessThan(0.5);
    expect(busy.spread.cores).toBeGreaterThan(idle.spread.cores!);
    const self = await measure('self-timed', () => 0.01, 1, { warmup: 1, minSamples: 2, maxSamples: 2, minMs: 0 });
    expect(self.spread.cores).toBeUndefined();
  });

  it('without a warm-up calls once per sample', async () => {
    const seen: number[] = [];
    const m = await measure('cold', (i) => void seen.push(i), 10, { warmup: 0, minSamples: 2, maxSamples: 2, minMs: 0, sampleMs: 50 });
    expect(seen).toEqual([0, 1]);
    expect(m.samples).toHaveLength(2);
    expect(m.calls).toBe(2);
  });

  it('groups short calls until a sample lasts sampleMs', async () => {
    let calls = 0;
    const m = await measure('short', () => void calls++, 1, { warmup: 1, minSamples: 2, maxSamples: 2, minMs: 0, sampleMs: 5 });
    expect(m.samples).toHaveLength(2);
    expect(m.calls).toBe(calls - 1);
    expect(m.calls).toBeGreaterThan(20); // a call is microseconds: many per 5 ms sample
  });

  it('awaits async calls one at a time and takes the seconds they report', async () => {
    const seen: number[] = [];
    let inFlight = 0;
    const fn = async (i: number): Promise<number> => {
      expect(inFlight).toBe(0);
      inFlight++;
      await new Promise((r) => setTimeout(r, 1));
      inFlight--;
      seen.push(i);
      return [1, 0.5, 0.25][i]!;
    };
    const m = await measure('async', fn, 10, { warmup: 1, minSamples: 2, maxSamples: 2, minMs: 0, async: true });
    expect(seen).toEqual([0, 1, 2]);
    expect(m.samples).toEqual([20, 40]);
    expect(m.rate).toBe(30);
  });

  it('passes a job error through', async () => {
    await expect(
      measure('broken', () => {
        throw new Error('boom');
      }, 1, { warmup: 0, minSamples: 1, maxSamples: 1, minMs: 0 }),
    ).rejects.toThrow('boom');
  });
});

describe('measureInterleaved', () => {
  it('warms every job up, then takes one sample of each per round', async () => {
    const order: string[] = [];
    const job = (name: string) => ({ label: name, items: 1, fn: (i: number) => void order.push(`${name}${i}`) });
    const ms = await measureInterleaved([job('a'), job('b')], { warmup: 1, minSamples: 3, maxSamples: 3, minMs: 0, sampleMs: 0 });
    // warm-up a0 b0; rounds a b, b a, a b
    expect(order).toEqual(['a0', 'b0', 'a1', 'b1', 'b2', 'a2', 'a3', 'b3']);
    expect(ms.map((m) => m.samples.length)).toEqual([3, 3]);
  });

  it('marks the jobs of one call as sampled in the same rounds, which ratio targets then pair', async () => {
    // Self-timed calls (one per sample): the load alternates every round (times x1, x4, x1,
    // x4, x1), and b is 0.8x a in every round: only samples paired by round read 0.8 in every
    // round (a shift by one round reads 0.2 or 3.2). Warm-up call first.
    const secondsA = [1, 1, 4, 1, 4, 1];
    const secondsB = [1, 1.25, 5, 1.25, 5, 1.25];
    let a = 0;
    let b = 0;
    const opts = { warmup: 1, minSamples: 5, maxSamples: 5, minMs: 0 };
    const ms = await measureInterleaved(
      [
        { label: 'a', items: 1, fn: () => secondsA[a++]! },
        { label: 'b', items: 1, fn: () => secondsB[b++]! },
      ],
      opts,
    );
    expect(ms[0]!.interleaved).toBeDefined();
    expect(ms[1]!.interleaved).toBe(ms[0]!.interleaved);
    const other = await measureInterleaved([{ label: 'c', items: 1, fn: () => 1 }], opts);
    expect(other[0]!.interleaved).not.toBe(ms[0]!.interleaved);
    const g = { title: 'g', params: {}, figures: [measuredFigure('b', 'ours', ms[1]!, 'x/s'), measuredFigure('a', 'peer', ms[0]!, 'x/s')] };
    // rates a: 1, 0.25, 1, 0.25, 1; b: 0.8, 0.2, 0.8, 0.2, 0.8: every round 0.8
    expect(ms[0]!.samples).toEqual([1, 0.25, 1, 0.25, 1]);
    expect(ms[1]!.samples).toEqual([0.8, 0.2, 0.8, 0.2, 0.8]);
    const t = ratioTarget(g, 'b', 'a', '>=', 0.8, 'b >= 0.8x a');
    expect(t.measured).toBeCloseTo(0.8, 12);
    expect(t.paired?.rounds).toBe(5);
    expect(t.paired?.roundsMeeting).toBe(5);
  });

  it('takes the jobs in the given order on even rounds and reversed on odd ones', async () => {
    const order: string[] = [];
    const job = (label: string) => ({ label, items: 1, fn: () => void order.push(label) });
    await measureInterleaved([job('a'), job('b'), job('c')], { warmup: 1, minSamples: 4, maxSamples: 4, minMs: 0, sampleMs: 0 });
    // the warm-up calls (one each, in order), then rounds a b c, c b a, a b c, c b a
    expect(order.join('')).toBe('abc' + 'abc' + 'cba' + 'abc' + 'cba');
  });

  it('interleaves a child-process-like async peer with a sync job', async () => {
    const order: string[] = [];
    const sync = { label: 's', items: 1, fn: (i: number) => void order.push(`s${i}`) };
    const child = { label: 'c', items: 1, async: true, fn: async (i: number) => (order.push(`c${i}`), 0.01) };
    await measureInterleaved([sync, child], { warmup: 1, minSamples: 2, maxSamples: 2, minMs: 0, sampleMs: 0 });
    expect(order).toEqual(['s0', 'c0', 's1', 'c1', 'c2', 's2']);
  });
});

describe('statistics (tinybench)', () => {
  it('summarizes rates: median, MAD, extremes and outliers beyond 3 scaled MADs', () => {
    const rates = [97, 98, 99, 100, 100, 101, 102, 103, 500];
    const s = summarize(
      rates.map((r) => 1000 / r),
      1,
    );
    expect(s.rate).toBeCloseTo(100, 9);
    // deviations from 100: 3 2 1 0 0 1 2 3 400 -> median 2; 3 x 1.4826 x 2 = 8.9: only 500 is out
    expect(s.spread.mad).toBeCloseTo(2, 9);
    expect(s.spread.min).toBeCloseTo(97, 9);
    expect(s.spread.max).toBeCloseTo(500, 9);
    expect(s.spread.outliers).toBe(1);
    expect(s.spread.samples).toBe(9);
    expect(s.samples.map((x) => Math.round(x))).toEqual(rates);
  });

  it('gives the median of the samples\' cores (the middle two averaged), and none without them', () => {
    expect(summarize([10, 10, 10], 1, [1.9, 0.9, 1.2]).spread.cores).toBeCloseTo(1.2, 12);
    expect(summarize([10, 10, 10, 10], 1, [2, 1, 1.5, 0.5]).spread.cores).toBeCloseTo(1.25, 12);
    expect(summarize([10, 10], 1).spread.cores).toBeUndefined();
  });

  it('counts no outliers below 8 samples', () => {
    const s = summarize([98, 99, 100, 100, 101, 102, 500].map((r) => 1000 / r), 1);
    expect(s.spread.mad).toBeCloseTo(1, 9);
    expect(s.spread.outliers).toBe(0);
  });

  it('takes the mean of the middle two for an even count, in calls per second', () => {
    const s = statisticsOf([1, 2, 3, 4]); // 1000, 500, 333.3, 250 calls/s
    expect(s.p50).toBeCloseTo((500 + 1000 / 3) / 2, 9);
    expect(s.min).toBe(250);
    expect(s.max).toBe(1000);
  });
});

describe('poolInterleaved', () => {
  // A job's result of one interleaved call: rates (items/s) of its samples, in round order.
  const result = (rates: number[], id: number | undefined, cores = 1.5): Measured => ({
    rate: rates[0]!,
    samples: rates,
    ...(id !== undefined ? { interleaved: id } : {}),
    calls: rates.length * 10,
    spread: { mad: 0, min: 0, max: 0, rme: 0, outliers: 0, samples: rates.length, cores },
  });

  it('joins each job\'s samples call by call and keeps them paired round by round', () => {
    // Call 1: rounds 1-3, call 2: rounds 4-5 (ours, peer), 100 items per call.
    const calls = [
      [result([200, 100, 400], 7, 1.9), result([100, 100, 100], 7, 1)],
      [result([300, 50], 8, 1.7), result([100, 25], 8, 1)],
    ];
    const [ours, peer] = poolInterleaved(calls, [100, 100]);
    expect(ours!.samples).toEqual([200, 100, 400, 300, 50]);
    expect(peer!.samples).toEqual([100, 100, 100, 100, 25]);
    expect(ours!.calls).toBe(50);
    expect(ours!.spread.cores).toBeCloseTo(1.8, 12); // the median of 1.9 and 1.7 (an even count: the middle two's mean)
    expect(ours!.interleaved).toBeDefined();
    expect(ours!.interleaved).toBe(peer!.interleaved);
    expect(ours!.interleaved).not.toBe(7);
    // Per-round ratios 2, 1, 4, 3, 2: their median is 2; the ratio of the medians would be 200 / 100 = 2 too, so check another pooling below.
    const fig = (m: Measured, kind: 'ours' | 'peer') => measuredFigure(kind, kind, m, 'ids/s');
    expect(pairedRatio(fig(ours!, 'ours'), fig(peer!, 'peer'))).toEqual({ value: 2, rounds: 5, perRound: [2, 1, 4, 3, 2] });
  });

  it('pairs by round, not by the medians', () => {
    // Rounds (ours, peer): (100, 100), (300, 100) | (20, 10), (20, 20), (60, 20): per round 1, 3, 2, 1, 3.
    const calls = [
      [result([100, 300], 1), result([100, 100], 1)],
      [result([20, 20, 60], 2), result([10, 20, 20], 2)],
    ];
    const [ours, peer] = poolInterleaved(calls, [10, 10]);
    const fig = (m: Measured, kind: 'ours' | 'peer') => measuredFigure(kind, kind, m, 'ids/s');
    expect(pairedRatio(fig(ours!, 'ours'), fig(peer!, 'peer')).value).toBe(2);
    // The ratio of the medians (60 / 20) mixes rounds of different loads.
    expect(ours!.rate / peer!.rate).toBeCloseTo(3, 12);
  });

  it('leaves results unpaired when a call\'s jobs were not sampled together', () => {
    const mixed = poolInterleaved([[result([1, 2], 3), result([1, 2], 4)]], [1, 1]);
    expect(mixed[0]!.interleaved).toBeUndefined();
    const uneven = poolInterleaved([[result([1, 2], 5), result([1], 5)]], [1, 1]);
    expect(uneven[1]!.interleaved).toBeUndefined();
    const none = poolInterleaved([[result([1], undefined), result([1], undefined)]], [1, 1]);
    expect(none[0]!.interleaved).toBeUndefined();
  });
});

describe('joinLabels', () => {
  it('names the shared case once', () => {
    expect(joinLabels(['dim 64, 4M: findSync', 'dim 64, 4M: native gather 1 thread'])).toBe('dim 64, 4M: findSync | native gather 1 thread');
    expect(joinLabels(['a: x', 'b: y'])).toBe('a: x | b: y');
    expect(joinLabels(['findSync', 'JS Map'])).toBe('findSync | JS Map');
    expect(joinLabels(['one: job'])).toBe('one: job');
  });
});

describe('enough (when sampling stops)', () => {
  const o = { warmup: 1, minSamples: 5, maxSamples: 40, minMs: 400, maxMs: 4000, sampleMs: 20 };
  it('needs both minSamples and minMs, stops at maxSamples or maxMs', () => {
    expect(enough(4, 3999, o)).toBe(false);
    expect(enough(5, 399, o)).toBe(false);
    expect(enough(5, 400, o)).toBe(true);
    expect(enough(40, 1, o)).toBe(true);
    expect(enough(1, 4000, o)).toBe(true);
    expect(enough(0, 9999, o)).toBe(false);
  });
});
