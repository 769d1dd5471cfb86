import { describe, expect, it } from 'vitest';
import { type Figure, formatSpread, formatSuite, formatTarget, type Group, groupRatios, pairedRatio, ratioMedian, ratioTarget, type SuiteResult, suiteJson, valueTarget } from './report.js';

const group: Group = {
  title: 'dim 64, 4M keys, uniform',
  params: { dim: 64 },
  figures: [
    {
      name: 'find (findSync)',
      kind: 'ours',
      value: 30e6,
      unit: 'keys/s',
      samples: [29e6, 30e6, 31e6],
      spread: { mad: 0.6e6, min: 29e6, max: 31e6, rme: 4.2, outliers: 0, samples: 3 },
    },
    { name: 'JS Map', kind: 'peer', value: 2e6, unit: 'keys/s', spread: { mad: 0.25e6, min: 1e6, max: 4e6, rme: 30, outliers: 2, samples: 12 }, note: 'Map<bigint, Float32Array>' },
    { name: 'native gather (2 threads)', kind: 'peer', value: 40e6, unit: 'keys/s' },
    { name: 'copy', kind: 'peer', value: 8, unit: 'GB/s' },
    { name: 'broken peer', kind: 'peer', value: NaN, unit: 'keys/s', note: 'unavailable: no wasm' },
  ],
};

describe('groupRatios', () => {
  it('pairs each ours figure with every measured peer of its unit', () => {
    expect(groupRatios(group)).toEqual({ 'find (findSync)': { 'JS Map': 15, 'native gather (2 threads)': 0.75 } });
  });
  it('inverts cost figures', () => {
    const g: Group = {
      title: 'memory',
      params: {},
      figures: [
        { name: 'table', kind: 'ours', value: 272, unit: 'B/key', lowerIsBetter: true },
        { name: 'JS Map', kind: 'peer', value: 544, unit: 'B/key', lowerIsBetter: true },
      ],
    };
    expect(groupRatios(g)).toEqual({ table: { 'JS Map': 2 } });
  });
});

describe('targets', () => {
  it('ratio targets pass and miss by the bound', () => {
    const a = ratioTarget(group, 'find (findSync)', 'JS Map', '>=', 15, 't1');
    expect(a).toMatchObject({ measured: 15, pass: true, unit: 'ratio' });
    expect(ratioTarget(group, 'find (findSync)', 'native gather (2 threads)', '>=', 0.8, 't2').pass).toBe(false);
    expect(ratioTarget(group, 'find (findSync)', 'broken peer', '>=', 0.1, 't3').pass).toBe(false);
    expect(() => ratioTarget(group, 'find (findSync)', 'nobody', '>=', 1, 't4')).toThrow(/No figure "nobody"/);
  });
  // Five rounds, one sample of each job per round; the load rises during round 3, between
  // the sync sample (still quiet, 40) and the Promise one (already busy, 19). Every round
  // but that one reads 0.95; the medians (40 and 19) come from different rounds.
  const sync: Figure = { name: 'sync', kind: 'ours', value: 40, unit: 'keys/s', samples: [40, 40, 40, 20, 20], interleaved: 7 };
  const promise: Figure = { name: 'promise', kind: 'ours', value: 19, unit: 'keys/s', samples: [38, 38, 19, 19, 19], interleaved: 7 };
  it('ratio targets on figures sampled in the same rounds take the median of the per-round ratios', () => {
    const g: Group = { title: 'g', params: {}, figures: [sync, promise] };
    const t = ratioTarget(g, 'promise', 'sync', '>=', 0.9, 'promise >= 0.9x sync');
    // per round: 38/40, 38/40, 19/40, 19/20, 19/20 -> 0.95, 0.95, 0.475, 0.95, 0.95
    expect(t.measured).toBeCloseTo(0.95, 12);
    expect(t.paired).toEqual({ rounds: 5, roundsMeeting: 4, ofMedians: 19 / 40 });
    expect(t.pass).toBe(true);
    // The printed line names the estimator, the rounds meeting the bound and the other estimate.
    expect(formatTarget(t)).toBe('PASS  promise >= 0.9x sync: 0.95x (>= 0.90x) [median of 5 per-round ratios, 4 of 5 rounds meet the bound; ratio of the medians 0.47x]');
    // The ours-vs-peer column marks the paired ratio and says what the mark means.
    const text = formatSuite({ suite: 's', path: 'p', groups: [{ ...g, figures: [promise, { ...sync, kind: 'peer' }] }], targets: [], notes: [], charts: [] });
    expect(text).toContain('0.95x* sync');
    expect(text).toContain('* the median of per-round ratios');
  });
  it('joins the middle two of an even count of ratios by their geometric mean, so a / b is the inverse of b / a', () => {
    expect(ratioMedian([2, 3])).toBeCloseTo(Math.sqrt(6), 12);
    expect(ratioMedian([1 / 3, 1 / 2])).toBeCloseTo(1 / Math.sqrt(6), 12);
    expect(ratioMedian([4, 1, 9])).toBe(4);
    const a: Figure = { name: 'a', kind: 'ours', value: 0, unit: 'x/s', samples: [2, 3], interleaved: 1 };
    const b: Figure = { name: 'b', kind: 'ours', value: 0, unit: 'x/s', samples: [1, 1], interleaved: 1 };
    expect(pairedRatio(a, b).value * pairedRatio(b, a).value).toBeCloseTo(1, 12);
  });
  it('falls back to the ratio of the medians for figures of different rounds or counts', () => {
    expect(pairedRatio(promise, { ...sync, interleaved: 8 })).toEqual({ value: 19 / 40, rounds: 0, perRound: [] });
    expect(pairedRatio(promise, { ...sync, interleaved: undefined })).toEqual({ value: 19 / 40, rounds: 0, perRound: [] });
    expect(pairedRatio(promise, { ...sync, samples: [40, 40, 40, 20] })).toEqual({ value: 19 / 40, rounds: 0, perRound: [] });
    const t = ratioTarget({ title: 'g', params: {}, figures: [promise, { ...sync, interleaved: 8 }] }, 'promise', 'sync', '>=', 0.9, 'x');
    expect(t.paired).toBeUndefined();
    expect(t.pass).toBe(false);
  });
  it('pairs costs round by round too (inverted) and skips rounds without a finite ratio', () => {
    const ours: Figure = { name: 'table', kind: 'ours', value: 100, unit: 'ms', lowerIsBetter: true, samples: [100, 0, 200, 100, 100], interleaved: 3 };
    const peer: Figure = { name: 'peer', kind: 'peer', value: 300, unit: 'ms', lowerIsBetter: true, samples: [300, 300, 400, NaN, 200], interleaved: 3 };
    // rounds 1, 3 and 5: 300/100, 400/200, 200/100; round 2 (ours 0) and 4 (peer NaN) have no ratio
    expect(pairedRatio(ours, peer)).toEqual({ value: 2, rounds: 3, perRound: [3, 2, 2] });
    expect(groupRatios({ title: 'g', params: {}, figures: [ours, peer] })).toEqual({ table: { peer: 2 } });
  });
  it('gives no ratio (no PASS) when half the rounds or more have none: a side broken in most rounds measures nothing', () => {
    const ours: Figure = { name: 'ours', kind: 'ours', value: 100, unit: 'x/s', samples: [100, 100, 100, 100], interleaved: 4 };
    const half: Figure = { name: 'peer', kind: 'peer', value: 50, unit: 'x/s', samples: [50, 50, 0, NaN], interleaved: 4 };
    expect(pairedRatio(ours, half)).toEqual({ value: NaN, rounds: 0, perRound: [] });
    // one good round of four (the others 0 or infinite rates): it alone would read 2x and PASS
    const broken: Figure = { name: 'peer', kind: 'peer', value: NaN, unit: 'x/s', samples: [50, Infinity, 0, NaN], interleaved: 4 };
    const t = ratioTarget({ title: 'g', params: {}, figures: [ours, broken] }, 'ours', 'peer', '>=', 1, 'ours >= 1x peer');
    expect(t.measured).toBeNaN();
    expect(t.pass).toBe(false);
    expect(groupRatios({ title: 'g', params: {}, figures: [ours, broken] })).toEqual({ ours: {} });
    // three of four good rounds: their median
    expect(pairedRatio(ours, { ...half, samples: [50, 50, 25, NaN] }).value).toBe(2);
  });
  it('value targets compare with <= and >=', () => {
    expect(valueTarget(20, '<=', 24, 'B/key', 'x').pass).toBe(true);
    expect(valueTarget(25, '<=', 24, 'B/key', 'x').pass).toBe(false);
    expect(valueTarget(NaN, '<=', 24, 'B/key', 'x').pass).toBe(false);
  });
});

describe('output', () => {
  const r: SuiteResult = {
    suite: 'find',
    path: 'findSync',
    groups: [group],
    targets: [ratioTarget(group, 'find (findSync)', 'JS Map', '>=', 15, 'find >= 15x JS Map'), ratioTarget(group, 'find (findSync)', 'native gather (2 threads)', '>=', 0.8, 'find >= 0.8x gather')],
    notes: ['a note'],
    charts: [],
    seconds: 12.34,
  };
  /** The table's rows, cells trimmed (cli-table3 draws │ between cells). */
  const rows = (text: string): string[][] =>
    text
      .split('\n')
      .filter((l) => l.startsWith('│'))
      .map((l) => l.split('│').slice(1, -1).map((c) => c.trim()));

  it('the spread reads as relative MAD, samples and outliers', () => {
    expect(formatSpread(group.figures[0]!)).toBe('±2.0% n=3'); // 0.6 / 30
    expect(formatSpread(group.figures[1]!)).toBe('±13% n=12, 2 outliers'); // 0.25 / 2
    expect(formatSpread(group.figures[2]!)).toBe(''); // not measured by the harness
    const withCores = { ...group.figures[0]!, spread: { ...group.figures[0]!.spread!, cores: 1.94 } };
    expect(formatSpread(withCores)).toBe('±2.0% n=3, 1.9 cores');
  });

  it('the table shows figures, medians, spreads, ratios, notes and unavailable peers', () => {
    const t = formatSuite(r);
    expect(t.split('\n')[0]).toBe('== find (findSync) — 12.3 s');
    expect(t).toContain('  dim 64, 4M keys, uniform\n');
    expect(rows(t)).toEqual([
      ['', 'figure', 'median', 'spread', 'ours vs peer'],
      ['ours', 'find (findSync)', '30.0 M keys/s', '±2.0% n=3', '15.0x JS Map'],
      ['', '', '', '', '0.75x native gather (2 threads)'],
      ['peer', 'JS Map', '2.00 M keys/s', '±13% n=12, 2 outliers', ''],
      ['', '(Map<bigint, Float32Array>)', '', '', ''],
      ['peer', 'native gather (2 threads)', '40.0 M keys/s', '', ''],
      ['peer', 'copy', '8.00 GB/s', '', ''],
      ['peer', 'broken peer', '—', '', ''],
      ['', '(unavailable: no wasm)', '', '', ''],
    ]);
  });

  it('prints a PASS or MISS line per target, then the notes', () => {
    const t = formatSuite(r);
    expect(t).toContain('\n  targets\n    PASS  find >= 15x JS Map: 15.0x (>= 15.0x)\n    MISS  find >= 0.8x gather: 0.75x (>= 0.80x)\n');
    expect(t).toContain('\n  note: a note\n');
  });

  it('the JSON object carries raw numbers, spreads, ratios and context; NaN becomes null', () => {
    const o = JSON.parse(suiteJson(r, { machine: { cores: 2 }, versions: { node: '20' }, backend: 'cpu', backendLabel: "'cpu' on x, 2 threads", full: false }));
    expect(o.suite).toBe('find');
    expect(o.machine).toEqual({ cores: 2 });
    expect(o.backendLabel).toBe("'cpu' on x, 2 threads");
    expect(o.seconds).toBe(12.34);
    expect(o.groups[0].figures[0].value).toBe(30e6);
    expect(o.groups[0].figures[0].samples).toEqual([29e6, 30e6, 31e6]);
    expect(o.groups[0].figures[0].spread).toEqual({ mad: 0.6e6, min: 29e6, max: 31e6, rme: 4.2, outliers: 0, samples: 3 });
    expect(o.groups[0].figures[4].value).toBeNull();
    expect(o.groups[0].ratios['find (findSync)']).toEqual({ 'JS Map': 15, 'native gather (2 threads)': 0.75 });
    expect(o.targets[0]).toMatchObject({ pass: true, measured: 15, bound: 15 });
    expect(o.notes).toEqual(['a note']);
  });
});
