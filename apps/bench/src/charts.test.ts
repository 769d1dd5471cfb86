import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { barChart, lineChart, renderSvg, writeChart } from './charts.js';
import type { Group } from './report.js';
import { groupBars } from './suites/common.js';

const line = lineChart({
  name: 'scale-table-size',
  title: 'find vs table size',
  xLabel: 'keys in the table',
  yLabel: 'M keys/s',
  xLog: true,
  xCounts: true,
  series: [
    { name: 'findSync', points: [[1 << 20, 34.7], [4 << 20, 29.4], [16 << 20, NaN], [0, 5]] },
    { name: 'upsertSync', points: [[1 << 20, 7.3], [16 << 20, 2.9]] },
  ],
});

describe('lineChart', () => {
  it('puts the finite points inline, ticks exactly the x values, log2 x axis', () => {
    const spec = line.spec as unknown as { data: { values: unknown[] }; encoding: { x: { scale: unknown; axis: { values: number[] } } } };
    expect(spec.data.values).toEqual([
      { series: 'findSync', x: 1 << 20, y: 34.7 },
      { series: 'findSync', x: 4 << 20, y: 29.4 },
      { series: 'upsertSync', x: 1 << 20, y: 7.3 },
      { series: 'upsertSync', x: 16 << 20, y: 2.9 },
    ]);
    expect(spec.encoding.x.scale).toEqual({ type: 'log', base: 2 });
    expect(spec.encoding.x.axis.values).toEqual([1 << 20, 4 << 20, 16 << 20]);
  });

  it('renders to SVG with vega, headless: title, axis titles, count labels and the legend', async () => {
    const svg = await renderSvg(line.spec);
    expect(svg.startsWith('<svg')).toBe(true);
    for (const text of ['find vs table size', 'keys in the table', 'M keys/s', '>1M<', '>4M<', '>16M<', 'findSync', 'upsertSync']) expect(svg).toContain(text);
    // one line per series, one point per data point
    expect(svg.match(/aria-roledescription="line mark"/g)).toHaveLength(2);
    expect(svg.match(/aria-roledescription="point"/g)).toHaveLength(4);
  });
});

describe('barChart from measured groups', () => {
  const groups: Group[] = [
    {
      title: 'dim 64, 4M keys, uniform, batch 64K',
      params: {},
      figures: [
        { name: 'find', kind: 'ours', value: 16e6, unit: 'keys/s', spread: { mad: 1e6, min: 14e6, max: 17e6, rme: 2, outliers: 0, samples: 10 } },
        { name: 'JS Map', kind: 'peer', value: 0.8e6, unit: 'keys/s' },
        { name: 'broken', kind: 'peer', value: NaN, unit: 'keys/s' },
        { name: 'copy', kind: 'peer', value: 11, unit: 'GB/s' },
      ],
    },
  ];
  const bars = groupBars(groups, 'keys/s', 1e6, (g) => g.title.replace(/, batch \S+$/, ''));

  it('takes the figures of the unit, scaled, with median -/+ MAD as the error bar', () => {
    expect(bars).toEqual([
      { group: 'dim 64, 4M keys, uniform', name: 'find', value: 16, low: 15, high: 17 },
      { group: 'dim 64, 4M keys, uniform', name: 'JS Map', value: 0.8 },
    ]);
  });

  it('writes <name>.vl.json (the spec, data inline) and <name>.svg', async () => {
    const chart = barChart({ name: 'find-throughput', title: 'find vs its peers', valueLabel: 'M keys/s', bars });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-charts-'));
    try {
      const files = await writeChart(path.join(dir, 'charts'), chart);
      expect(files.map((f) => path.basename(f))).toEqual(['find-throughput.svg', 'find-throughput.vl.json']);
      const spec = JSON.parse(readFileSync(files[1]!, 'utf8'));
      expect(spec).toEqual(JSON.parse(JSON.stringify(chart.spec)));
      expect(spec.$schema).toBe('https://vega.github.io/schema/vega-lite/v6.json');
      expect(spec.data.values).toEqual([
        { group: 'dim 64, 4M keys, uniform', name: 'find', value: 16, low: 15, high: 17 },
        { group: 'dim 64, 4M keys, uniform', name: 'JS Map', value: 0.8, low: 0.8, high: 0.8 },
      ]);
      const svg = readFileSync(files[0]!, 'utf8');
      for (const text of ['find vs its peers', 'M keys/s', 'dim 64, 4M keys, uniform', 'JS Map']) expect(svg).toContain(text);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('gives each bar one 14 px step: 6 cases x 6 figures plot 504 px high, not 6 x 6 x a case band', async () => {
    const many = [];
    for (let c = 0; c < 6; c++) for (let f = 0; f < 6; f++) many.push({ group: `case ${c}`, name: `figure ${f}`, value: 1 + f });
    const svg = await renderSvg(barChart({ name: 'many', title: 'many', valueLabel: 'M keys/s', bars: many }).spec);
    expect(svg.match(/aria-roledescription="bar"/g)).toHaveLength(36);
    // the bars take 36 x 14 = 504 px; the case bands' padding, title, x axis and a 3-row legend
    // add a few hundred (a step per case would have been 36 x 94 = 3384 px of plot)
    const height = Number(/<svg[^>]* height="(\d+)"/.exec(svg)![1]);
    expect(height).toBeGreaterThanOrEqual(504);
    expect(height).toBeLessThan(1000);
  });
});
