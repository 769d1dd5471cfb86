import { describe, expect, it } from 'vitest';
import { type Checks, checkSame } from './suites/facades.js';
import { runSuiteJson } from './suiteRun.testing.js';

/** Every facade/core pairing of the suite: the group's `ours` figure, its peer, and the target over them. */
const PAIRINGS: [ours: string, peer: string, target: string][] = [
  ['tpu enqueue + dequeue', 'core lookupCombined', 'tpu-embedding enqueue+dequeue >= 0.8x core lookupCombined'],
  ['tpu enqueue + dequeue({ out })', 'core lookupCombined({ out })', 'tpu-embedding enqueue+dequeue({ out }) >= 0.8x core lookupCombined({ out })'],
  ['sok lookupSparse', 'core lookupCombined', 'sok lookupSparse >= 0.8x core lookupCombined'],
  ['tpu applyGradients', 'core applyGradients', 'tpu-embedding applyGradients >= 0.7x core applyGradients'],
  ['tfra lookupSync', 'core findSync', 'tfra lookupSync >= 0.8x core findSync'],
  ['tfra lookupSync({ out })', 'core findSync({ out })', 'tfra lookupSync({ out }) >= 0.8x core findSync({ out })'],
  ['tfra lookup', 'core find', 'tfra lookup >= 0.8x core find'],
  ['tfra embeddingLookupSparse', 'core lookupCombined', 'tfra embeddingLookupSparse >= 0.8x core lookupCombined'],
  ['tfra optimizer step', 'core applyGradients', 'tfra DynamicEmbeddingOptimizer step >= 0.7x core applyGradients'],
  ['hps lookup (L1 hits)', 'core findSync', 'hps lookup (L1-hit path) >= 0.8x core findSync'],
];

interface JsonFigure {
  name: string;
  value: number;
  samples?: number[];
  interleaved?: number;
}

/** ours / peer as the report takes it: round by round (median; an even count's middle two by their geometric mean) for figures of the same rounds, else of the medians. */
function expectedRatio(ours: JsonFigure, peer: JsonFigure): number {
  const a = ours.samples ?? [];
  const b = peer.samples ?? [];
  if (ours.interleaved === undefined || ours.interleaved !== peer.interleaved || a.length !== b.length || a.length === 0) return ours.value / peer.value;
  const r = a.map((x, i) => x / b[i]!).sort((x, y) => x - y);
  const m = r.length >> 1;
  return r.length % 2 === 1 ? r[m]! : Math.sqrt(r[m - 1]! * r[m]!); // an even count: the geometric mean of the middle two
}
interface JsonSuite {
  suite: string;
  backend: string;
  groups: { title: string; figures: JsonFigure[]; ratios: Record<string, Record<string, number>> }[];
  targets: { text: string; measured: number; pass: boolean }[];
}

describe('bench facades suite', () => {
  it('the output check counts a pair as differing on one float, -0 against 0 or a length, and not on equal NaNs', () => {
    const c: Checks = { pairs: 0, differ: [] };
    checkSame(c, 'same', Float32Array.from([1, NaN, -0]), Float32Array.from([1, NaN, -0]));
    expect(c).toEqual({ pairs: 1, differ: [] });
    checkSame(c, 'one float', Float32Array.from([1, 2, 3]), Float32Array.from([1, 2.0000002, 3]));
    checkSame(c, 'signed zero', Float32Array.from([0]), Float32Array.from([-0]));
    checkSame(c, 'length', Float32Array.from([1, 2]), Float32Array.from([1]));
    expect(c.pairs).toBe(4);
    expect(c.differ).toEqual([
      'one float: 1 of 3 floats differ (lengths 3 vs 3)',
      'signed zero: 1 of 1 floats differ (lengths 1 vs 1)',
      'length: 1 of 1 floats differ (lengths 2 vs 1)',
    ]);
  });

  it('--facades-tiny on the reference backend: every pairing prints a ratio and every facade returns its core op\'s values bit for bit', () => {
    const { result, stderr } = runSuiteJson<JsonSuite>('facades', ['--facades-tiny', '--backend', 'reference']);
    expect(result.suite).toBe('facades');
    expect(result.backend).toBe('reference');
    for (const [ours, peer, text] of PAIRINGS) {
      const group = result.groups.find((g) => g.figures.some((f) => f.name === ours));
      expect(group, ours).toBeDefined();
      for (const name of [ours, peer]) {
        const f = group!.figures.find((x) => x.name === name);
        expect(f, `${ours}: figure ${name}`).toBeDefined();
        expect(Number.isFinite(f!.value) && f!.value > 0, `${name}: ${f!.value}`).toBe(true);
      }
      const ratio = group!.ratios[ours]?.[peer];
      expect(ratio, `${ours} vs ${peer}`).toBeCloseTo(expectedRatio(group!.figures.find((f) => f.name === ours)!, group!.figures.find((f) => f.name === peer)!), 9);
      const target = result.targets.find((t) => t.text === text);
      expect(target, text).toBeDefined();
      expect(target!.measured).toBeCloseTo(ratio!, 9);
    }
    // the 6 forward pairs were compared before timing, and none differed
    const same = result.targets.find((t) => t.text.startsWith('every facade forward returns its core op'));
    expect(same?.text).toContain('(6 pairs checked before timing)');
    expect(same?.measured).toBe(0);
    expect(same?.pass).toBe(true);
    expect(stderr).not.toMatch(/ differ \(lengths/);
  }, 180_000);
});
