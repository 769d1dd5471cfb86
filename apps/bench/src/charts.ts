/**
 * Charts as Vega-Lite specifications (data inline, so each .vl.json opens as it is in
 * any Vega viewer or editor), rendered to SVG headless by `vega` (no canvas, no
 * browser: text widths are estimated). Two shapes cover the suites: a line chart of
 * series over a numeric x (table size, batch, threads) and a bar chart of a suite's
 * figures per case, with each figure's sample spread as an error bar.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parse, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

export interface Chart {
  /** File stem inside the --plot directory: `<name>.svg` and `<name>.vl.json`. */
  name: string;
  spec: TopLevelSpec;
}

export interface Series {
  name: string;
  /** [x, y] pairs; x > 0 on a log axis. Non-finite points are left out. */
  points: readonly (readonly [number, number])[];
}

export interface LineChartOptions {
  name: string;
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly Series[];
  /** log2 x axis (table sizes, batch sizes). Default false. */
  xLog?: boolean;
  /** Tick labels as counts with K/M/G (powers of two). Default false. */
  xCounts?: boolean;
}

const SCHEMA = 'https://vega.github.io/schema/vega-lite/v6.json';
const WIDTH = 520;
/** Pixels per bar in a bar chart. */
const BAR_STEP = 14;

/** Vega expression: 4194304 -> "4M", 65536 -> "64K" (the bench's formatCount). */
const COUNT_LABEL =
  "datum.value >= 1073741824 ? format(datum.value / 1073741824, '~g') + 'G' : " +
  "datum.value >= 1048576 ? format(datum.value / 1048576, '~g') + 'M' : " +
  "datum.value >= 1024 ? format(datum.value / 1024, '~g') + 'K' : format(datum.value, '~g')";

export function lineChart(o: LineChartOptions): Chart {
  const values = o.series.flatMap((s) =>
    s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!o.xLog || x > 0)).map(([x, y]) => ({ series: s.name, x, y })),
  );
  const xs = [...new Set(values.map((v) => v.x))].sort((a, b) => a - b);
  return {
    name: o.name,
    spec: {
      $schema: SCHEMA,
      title: o.title,
      width: WIDTH,
      height: 300,
      data: { values },
      mark: { type: 'line', point: true },
      encoding: {
        x: {
          field: 'x',
          type: 'quantitative',
          title: o.xLabel,
          scale: o.xLog ? { type: 'log', base: 2 } : { zero: false },
          // Few distinct x values (sizes, batches, thread counts): tick exactly those.
          axis: { values: xs, ...(o.xCounts ? { labelExpr: COUNT_LABEL } : {}), grid: false },
        },
        y: { field: 'y', type: 'quantitative', title: o.yLabel, scale: { zero: true } },
        color: { field: 'series', type: 'nominal', title: null, sort: o.series.map((s) => s.name) },
        tooltip: [{ field: 'series' }, { field: 'x', title: o.xLabel }, { field: 'y', title: o.yLabel, format: '.3~s' }],
      },
    },
  };
}

export interface Bar {
  /** The case (one group of figures), e.g. "dim 64, 4M keys, uniform". */
  group: string;
  /** The figure, e.g. "find (findSync)". */
  name: string;
  value: number;
  /** Error bar ends (e.g. median -/+ MAD). */
  low?: number;
  high?: number;
}

export interface BarChartOptions {
  name: string;
  title: string;
  /** The value axis title, e.g. "M keys/s". */
  valueLabel: string;
  bars: readonly Bar[];
}

/** Horizontal bars grouped by case (long case titles read better on the y axis), one colour per figure. */
export function barChart(o: BarChartOptions): Chart {
  const values = o.bars.filter((b) => Number.isFinite(b.value)).map((b) => ({ ...b, low: b.low ?? b.value, high: b.high ?? b.value }));
  const groups = [...new Set(values.map((v) => v.group))];
  const names = [...new Set(values.map((v) => v.name))];
  const y = { field: 'group', type: 'nominal' as const, title: null, sort: groups, axis: { labelLimit: 260 } };
  const yOffset = { field: 'name', type: 'nominal' as const, sort: names };
  return {
    name: o.name,
    spec: {
      $schema: SCHEMA,
      title: o.title,
      width: WIDTH - 120,
      // With a yOffset, Vega-Lite applies the step to the offset band: 14 px per bar, so a
      // case's band is 14 px x its figures (a step per case would multiply by the figures).
      height: { step: BAR_STEP },
      data: { values },
      encoding: { y, yOffset },
      layer: [
        {
          mark: { type: 'bar' },
          encoding: {
            x: { field: 'value', type: 'quantitative', title: o.valueLabel },
            color: { field: 'name', type: 'nominal', title: null, sort: names, legend: { orient: 'bottom', columns: 2, labelLimit: 400 } },
            tooltip: [{ field: 'group' }, { field: 'name' }, { field: 'value', format: '.3~s' }, { field: 'low', format: '.3~s' }, { field: 'high', format: '.3~s' }],
          },
        },
        { mark: { type: 'rule', color: 'black' }, encoding: { x: { field: 'low', type: 'quantitative' }, x2: { field: 'high' } } },
      ],
    },
  };
}

/** The chart rendered by vega's headless SVG renderer. */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Writes `<dir>/<name>.vl.json` and `<dir>/<name>.svg`; returns both paths. */
export async function writeChart(dir: string, chart: Chart): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const json = path.join(dir, `${chart.name}.vl.json`);
  const svg = path.join(dir, `${chart.name}.svg`);
  writeFileSync(json, JSON.stringify(chart.spec, null, 2) + '\n');
  writeFileSync(svg, await renderSvg(chart.spec));
  return [svg, json];
}
