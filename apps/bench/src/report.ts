/**
 * The result model every suite returns, ratio math over it, and the two outputs:
 * cli-table3 tables (stdout) and one JSON object per suite (--json).
 */
import Table from 'cli-table3';
import type { Chart } from './charts.js';
import { formatRatio, formatSI, ratio } from './format.js';
import type { Spread } from './harness.js';

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
  /**
   * The measureInterleaved call that took the samples (harness.ts, Measured.interleaved):
   * two figures with the same id were sampled in the same rounds, and their ratio is
   * the median of their per-round ratios ({@link pairedRatio}).
   */
  interleaved?: number;
  /** How far the samples spread (measured figures; in the figure's unit). */
  spread?: Spread;
}

export interface Group {
  title: string;
  params: Record<string, string | number>;
  figures: Figure[];
}

export interface Target {
  text: string;
  /** The ratio or figure compared with the bound (a ratio of interleaved figures: the median of the per-round ratios). */
  measured: number;
  /**
   * A ratio taken round by round: how many rounds, how many of them met the bound on their
   * own, and the ratio of the two medians for comparison (printed with the target).
   */
  paired?: { rounds: number; roundsMeeting: number; ofMedians: number };
  op: TargetOp;
  bound: number;
  pass: boolean;
  /** How the measured figure reads: 'ratio' (formatted 12.3x) or a unit. */
  unit: string;
}

/** How a target's measured figure compares with its bound ('<': strictly below, as the spec's "p99 < 10 ms"). */
export type TargetOp = '>=' | '<=' | '<';

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

/**
 * ours / peer (inverted for costs). Two figures sampled in the same rounds of one
 * measureInterleaved call (same `interleaved` id and sample count) are compared round by
 * round: the median over rounds of ours_i / peer_i. Each round's two samples ran a few
 * hundred milliseconds apart, under about the same machine load, while the load of a
 * shared machine moves between rounds; the ratio of the two medians would then compare
 * samples from different rounds (each median falls where its own job's samples happen to
 * split). Rounds without a finite positive ratio (a broken sample on either side) are left
 * out, but only a majority of good rounds gives a ratio: NaN otherwise (a side broken in most
 * rounds measures nothing, and its one good round must not decide a target). Other pairs:
 * the ratio of the medians. `rounds` is 0 when not paired.
 */
export function pairedRatio(ours: Figure, peer: Figure): { value: number; rounds: number; perRound: number[] } {
  const lower = ours.lowerIsBetter ?? false;
  const a = ours.samples;
  const b = peer.samples;
  if (ours.interleaved !== undefined && ours.interleaved === peer.interleaved && a && b && a.length === b.length && a.length > 0) {
    const perRound = a.map((x, i) => ratio(x, b[i]!, lower)).filter((r) => Number.isFinite(r) && r > 0);
    if (perRound.length * 2 > a.length) return { value: ratioMedian(perRound), rounds: perRound.length, perRound };
    return { value: NaN, rounds: 0, perRound: [] };
  }
  return { value: ratio(ours.value, peer.value, lower), rounds: 0, perRound: [] };
}

/**
 * The median of positive ratios, the two middle ones of an even count joined by their
 * geometric mean: so the ratio of a to b is exactly the inverse of the ratio of b to a (an
 * arithmetic mean of the middle two would lean toward the numerator's side).
 */
export function ratioMedian(ratios: readonly number[]): number {
  const v = [...ratios].sort((x, y) => x - y);
  const m = v.length >> 1;
  return v.length % 2 === 1 ? v[m]! : Math.sqrt(v[m - 1]! * v[m]!);
}

/** ratios[ours.name][peer.name] for every ours/peer pair of one unit with a finite ratio ({@link pairedRatio}). */
export function groupRatios(g: Group): Record<string, Record<string, number>> {
  return pairsOf(g, (r) => r.value);
}

/** pairedRounds[ours.name][peer.name]: the rounds a ratio of {@link groupRatios} was taken over (0: the ratio of the medians). */
export function groupPairedRounds(g: Group): Record<string, Record<string, number>> {
  return pairsOf(g, (r) => r.rounds);
}

function pairsOf(g: Group, pick: (r: ReturnType<typeof pairedRatio>) => number): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const o of g.figures.filter((f) => f.kind === 'ours')) {
    const row: Record<string, number> = {};
    for (const p of g.figures.filter((f) => f.kind === 'peer' && f.unit === o.unit)) {
      const r = pairedRatio(o, p);
      if (Number.isFinite(r.value)) row[p.name] = pick(r);
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

/** A target on the ratio of two figures of a group: ours / peer op bound ({@link pairedRatio}). */
export function ratioTarget(g: Group, ours: string, peer: string, op: TargetOp, bound: number, text: string): Target {
  const o = find(g, ours);
  const p = find(g, peer);
  const { value: measured, rounds, perRound } = pairedRatio(o, p);
  const roundsMeeting = perRound.filter((r) => check(r, op, bound)).length;
  const paired = rounds > 0 ? { paired: { rounds, roundsMeeting, ofMedians: ratio(o.value, p.value, o.lowerIsBetter ?? false) } } : {};
  return { text, measured, ...paired, op, bound, unit: 'ratio', pass: check(measured, op, bound) };
}

/** A target on an absolute figure (NaN or an infinite figure never passes). */
export function valueTarget(measured: number, op: TargetOp, bound: number, unit: string, text: string): Target {
  return { text, measured, op, bound, unit, pass: check(measured, op, bound) };
}

/**
 * A target against a peer that must compute what we compute: when `same` is false (the peer's
 * output differs from ours, or could not be checked) the target MISSes whatever its ratio, and
 * its text says why: a fast peer that returns other values measures nothing.
 */
export function requireSameOutput(t: Target, same: boolean, why: string): Target {
  return same ? t : { ...t, pass: false, text: `${t.text} (not comparable: ${why})` };
}

function check(v: number, op: TargetOp, bound: number): boolean {
  return Number.isFinite(v) && (op === '>=' ? v >= bound : op === '<=' ? v <= bound : v < bound);
}

export function formatValue(v: number, unit: string): string {
  if (unit === 'ratio') return formatRatio(v);
  if (unit === 'B/key' || unit === 'ms' || unit === 'GB/s') return Number.isFinite(v) ? `${v.toFixed(unit === 'GB/s' ? 2 : 1)} ${unit}` : '—';
  return `${formatSI(v)} ${unit}`;
}

/** The spread column: relative MAD, sample count, outliers and cores used ("±1.2% n=12, 1 outlier, 1.9 cores"). */
export function formatSpread(f: Figure): string {
  const s = f.spread;
  if (!s || !Number.isFinite(f.value) || f.value <= 0) return '';
  const rel = (100 * s.mad) / f.value;
  const outliers = s.outliers > 0 ? `, ${s.outliers} outlier${s.outliers === 1 ? '' : 's'}` : '';
  const cores = s.cores !== undefined ? `, ${s.cores.toFixed(1)} cores` : '';
  return `±${rel < 10 ? rel.toFixed(1) : rel.toFixed(0)}% n=${s.samples}${outliers}${cores}`;
}

/** A target's line, as the bench has always printed it: PASS or MISS, what, measured (bound). */
export function formatTarget(t: Target): string {
  const line = `${t.pass ? 'PASS' : 'MISS'}  ${t.text}: ${formatValue(t.measured, t.unit)} (${t.op} ${formatValue(t.bound, t.unit)})`;
  if (!t.paired) return line;
  const p = t.paired;
  return `${line} [median of ${p.rounds} per-round ratios, ${p.roundsMeeting} of ${p.rounds} rounds meet the bound; ratio of the medians ${formatRatio(p.ofMedians)}]`;
}

const TABLE_STYLE = { head: [], border: [], compact: true };

/** Widths of the wrapped columns (figure, ratios) for a terminal of `columns` (none: a file or pipe). */
function wrapWidths(columns?: number): [number, number] {
  if (!columns) return [42, 44];
  // kind, median and spread take ~45 columns with the borders; the rest is split.
  const w = Math.max(22, Math.min(44, Math.floor((columns - 46) / 2)));
  return [w, w];
}

/**
 * The text report of one suite: a heading, one table per group (each figure with its
 * median, spread and, for ours, the ratio to every peer of its unit), the targets
 * (PASS / MISS lines) and the notes. `columns`: the terminal's width, when printing to one.
 */
export function formatSuite(r: SuiteResult, columns?: number): string {
  const [figureWidth, ratioWidth] = wrapWidths(columns);
  const out: string[] = [`== ${r.suite} (${r.path})${r.seconds !== undefined ? ` — ${r.seconds.toFixed(1)} s` : ''}`];
  for (const g of r.groups) {
    const ratios = groupRatios(g);
    const rounds = groupPairedRounds(g);
    const table = new Table({ head: ['', 'figure', 'median', 'spread', 'ours vs peer'], style: TABLE_STYLE, wordWrap: true, colWidths: [null, figureWidth, null, null, ratioWidth] });
    for (const f of g.figures) {
      const value = Number.isFinite(f.value) ? formatValue(f.value, f.unit) : '—';
      const vs = f.kind === 'ours' ? Object.entries(ratios[f.name] ?? {}).map(([p, x]) => `${formatRatio(x)}${(rounds[f.name]?.[p] ?? 0) > 0 ? '*' : ''} ${p}`) : [];
      table.push([f.kind, f.note ? `${f.name}\n(${f.note})` : f.name, value, formatSpread(f), vs.join('\n')]);
    }
    out.push('', `  ${g.title}`, table.toString());
    if (Object.values(rounds).some((row) => Object.values(row).some((n) => n > 0))) {
      out.push('  * the median of per-round ratios (figures sampled in the same rounds); unmarked: the ratio of the medians');
    }
  }
  if (r.targets.length > 0) out.push('', '  targets', ...r.targets.map((t) => `    ${formatTarget(t)}`));
  if (r.notes.length > 0) out.push('', ...r.notes.map((n) => `  note: ${n}`));
  return out.join('\n') + '\n';
}

/** The --json object of one suite (NaN becomes null). */
export function suiteJson(
  r: SuiteResult,
  context: { machine: unknown; versions: unknown; backend: string; backendLabel?: string; backendNote?: string; full: boolean },
): string {
  const obj = {
    suite: r.suite,
    path: r.path,
    ...context,
    seconds: r.seconds,
    groups: r.groups.map((g) => ({ ...g, ratios: groupRatios(g), pairedRounds: groupPairedRounds(g) })),
    targets: r.targets,
    notes: r.notes,
  };
  return JSON.stringify(obj, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v));
}
