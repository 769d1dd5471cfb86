/**
 * The result model every suite returns, ratio math over it, and the two outputs:
 * text tables (stdout) and one JSON object per suite (--json).
 */
import type { ChartSpec } from './svg.js';
import { formatRatio, formatSI, ratio } from './stats.js';

export interface Figure {
  /** e.g. "cpu findSync", "JS Map<bigint, Float32Array>" */
  name: string;
  /** 'ours' figures get a ratio to every 'peer' figure of the same group and unit. */
  kind: 'ours' | 'peer';
  /** NaN when the figure could not be measured (see `note`). */
  value: number;
  /** 'keys/s', 'rows/s', 'GB/s', 'B/key', ... */
  unit: string;
  /** Costs (bytes, latency): a ratio > 1 then still means "ours is better". */
  lowerIsBetter?: boolean;
  /** Why a figure is missing, or what exactly it measures. */
  note?: string;
  /** Raw per-sample figures. */
  samples?: number[];
}

export interface Group {
  title: string;
  params: Record<string, string | number>;
  figures: Figure[];
}

export interface Target {
  text: string;
  measured: number;
  op: '>=' | '<=';
  bound: number;
  pass: boolean;
  /** How the measured figure reads: 'ratio' (formatted 12.3x) or a unit. */
  unit: string;
}

export interface Chart extends ChartSpec {
  /** File name inside the --plot directory. */
  file: string;
}

export interface SuiteResult {
  suite: string;
  /** Which API path is measured (findSync, Promise form, ...). */
  path: string;
  groups: Group[];
  targets: Target[];
  notes: string[];
  charts: Chart[];
  /** Wall time of the suite. */
  seconds?: number;
}

/** ratios[ours.name][peer.name] for every ours/peer pair of one unit with a finite ratio. */
export function groupRatios(g: Group): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const o of g.figures.filter((f) => f.kind === 'ours')) {
    const row: Record<string, number> = {};
    for (const p of g.figures.filter((f) => f.kind === 'peer' && f.unit === o.unit)) {
      const r = ratio(o.value, p.value, o.lowerIsBetter ?? false);
      if (Number.isFinite(r)) row[p.name] = r;
    }
    out[o.name] = row;
  }
  return out;
}

function find(g: Group, name: string): Figure {
  const f = g.figures.find((x) => x.name === name);
  if (!f) throw new Error(`No figure "${name}" in group "${g.title}"`);
  return f;
}

/** A target on the ratio of two figures of a group: ours / peer op bound. */
export function ratioTarget(g: Group, ours: string, peer: string, op: '>=' | '<=', bound: number, text: string): Target {
  const o = find(g, ours);
  const measured = ratio(o.value, find(g, peer).value, o.lowerIsBetter ?? false);
  return { text, measured, op, bound, unit: 'ratio', pass: check(measured, op, bound) };
}

/** A target on an absolute figure. */
export function valueTarget(measured: number, op: '>=' | '<=', bound: number, unit: string, text: string): Target {
  return { text, measured, op, bound, unit, pass: check(measured, op, bound) };
}

function check(v: number, op: '>=' | '<=', bound: number): boolean {
  return Number.isFinite(v) && (op === '>=' ? v >= bound : v <= bound);
}

export function formatValue(v: number, unit: string): string {
  if (unit === 'ratio') return formatRatio(v);
  if (unit === 'B/key' || unit === 'ms' || unit === 'GB/s') return Number.isFinite(v) ? `${v.toFixed(unit === 'GB/s' ? 2 : 1)} ${unit}` : '—';
  return `${formatSI(v)} ${unit}`;
}

/** The text table of one suite. */
export function formatSuite(r: SuiteResult): string {
  const lines: string[] = [];
  lines.push(`== ${r.suite} (${r.path})${r.seconds !== undefined ? ` — ${r.seconds.toFixed(1)} s` : ''}`);
  for (const g of r.groups) {
    lines.push('', `  ${g.title}`);
    const ratios = groupRatios(g);
    const width = Math.max(...g.figures.map((f) => f.name.length), 10);
    for (const f of g.figures) {
      const tag = f.kind === 'ours' ? 'ours' : 'peer';
      const value = Number.isFinite(f.value) ? formatValue(f.value, f.unit) : `— (${f.note ?? 'not measured'})`;
      let line = `    ${tag}  ${f.name.padEnd(width)}  ${value.padStart(14)}`;
      if (f.kind === 'ours') {
        const parts = Object.entries(ratios[f.name] ?? {}).map(([p, x]) => `${formatRatio(x)} ${p}`);
        if (parts.length) line += `   ${parts.join(' · ')}`;
      }
      if (f.note && Number.isFinite(f.value)) line += `   (${f.note})`;
      lines.push(line);
    }
  }
  if (r.targets.length) {
    lines.push('', '  targets');
    for (const t of r.targets) {
      lines.push(`    ${t.pass ? 'PASS' : 'MISS'}  ${t.text}: ${formatValue(t.measured, t.unit)} (${t.op} ${formatValue(t.bound, t.unit)})`);
    }
  }
  for (const n of r.notes) lines.push(`  note: ${n}`);
  return lines.join('\n') + '\n';
}

/** The --json object of one suite (NaN becomes null). */
export function suiteJson(r: SuiteResult, context: { machine: unknown; versions: unknown; backend: string; backendNote?: string; full: boolean }): string {
  const obj = {
    suite: r.suite,
    path: r.path,
    ...context,
    seconds: r.seconds,
    groups: r.groups.map((g) => ({ ...g, ratios: groupRatios(g) })),
    targets: r.targets,
    notes: r.notes,
  };
  return JSON.stringify(obj, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v));
}
