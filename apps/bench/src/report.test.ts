import { describe, expect, it } from 'vitest';
import { formatSuite, type Group, groupRatios, ratioTarget, type SuiteResult, suiteJson, valueTarget } from './report.js';

const group: Group = {
  title: 'dim 64, 4M keys, uniform',
  params: { dim: 64 },
  figures: [
    { name: 'find (findSync)', kind: 'ours', value: 30e6, unit: 'keys/s' },
    { name: 'JS Map', kind: 'peer', value: 2e6, unit: 'keys/s' },
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
    targets: [ratioTarget(group, 'find (findSync)', 'JS Map', '>=', 15, 'find >= 15x JS Map')],
    notes: ['a note'],
    charts: [],
  };
  it('the text table shows figures, ratios, unavailable peers and targets', () => {
    const t = formatSuite(r);
    expect(t).toContain('== find (findSync)');
    expect(t).toMatch(/ours {2}find \(findSync\) +30\.0 M keys\/s +15\.0x JS Map · 0\.75x native gather \(2 threads\)/);
    expect(t).toContain('— (unavailable: no wasm)');
    expect(t).toContain('PASS  find >= 15x JS Map: 15.0x (>= 15.0x)');
    expect(t).toContain('note: a note');
  });
  it('the JSON object carries raw numbers, ratios and context; NaN becomes null', () => {
    const o = JSON.parse(suiteJson(r, { machine: { cores: 2 }, versions: { node: '20' }, backend: 'cpu', full: false }));
    expect(o.suite).toBe('find');
    expect(o.machine).toEqual({ cores: 2 });
    expect(o.groups[0].figures[0].value).toBe(30e6);
    expect(o.groups[0].figures[4].value).toBeNull();
    expect(o.groups[0].ratios['find (findSync)']['JS Map']).toBe(15);
    expect(o.targets[0]).toMatchObject({ pass: true, measured: 15, bound: 15 });
  });
});
