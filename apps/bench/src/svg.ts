/**
 * A small hand-written SVG line-chart writer (no dependencies): one chart, several
 * series, linear or log2 x axis, linear y axis from 0, a legend. Returns the
 * document as a string; the caller writes it.
 */

export interface Series {
  name: string;
  /** [x, y] pairs; x > 0 when the x axis is logarithmic. Non-finite points are skipped. */
  points: readonly (readonly [number, number])[];
}

export interface ChartSpec {
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly Series[];
  /** log2 x axis (table sizes, batch sizes). Default false. */
  xLog?: boolean;
  width?: number;
  height?: number;
  /** Formats tick labels. */
  formatX?: (x: number) => string;
  formatY?: (y: number) => string;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];

/** Escapes text for SVG element content and attribute values. */
export function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

/** "Nice" tick values covering [0, max]: steps of 1, 2 or 5 times a power of ten. */
export function niceTicks(max: number, target = 5): number[] {
  if (!(max > 0) || !Number.isFinite(max)) return [0, 1];
  const raw = max / target;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? 10 * p;
  const ticks: number[] = [];
  for (let v = 0; v < max + step * 0.999; v += step) ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

const num = (v: number): string => (Math.round(v * 10) / 10).toString();

export function lineChart(spec: ChartSpec): string {
  const W = spec.width ?? 640;
  const H = spec.height ?? 400;
  const m = { left: 70, right: 170, top: 40, bottom: 50 };
  const pw = W - m.left - m.right;
  const ph = H - m.top - m.bottom;
  const fx = spec.formatX ?? ((x: number) => String(x));
  const fy = spec.formatY ?? ((y: number) => String(y));
  const xLog = spec.xLog ?? false;
  const pts = spec.series.map((s) => s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!xLog || x > 0)));
  const xs = pts.flat().map(([x]) => (xLog ? Math.log2(x) : x));
  const ys = pts.flat().map(([, y]) => y);
  let x0 = xs.length ? Math.min(...xs) : 0;
  let x1 = xs.length ? Math.max(...xs) : 1;
  if (x0 === x1) {
    x0 -= 1;
    x1 += 1;
  }
  const yTicks = niceTicks(ys.length ? Math.max(...ys) : 1);
  const yMax = yTicks[yTicks.length - 1]!;
  const sx = (x: number): number => m.left + (((xLog ? Math.log2(x) : x) - x0) / (x1 - x0)) * pw;
  const sy = (y: number): number => m.top + ph - (y / yMax) * ph;
  // Few distinct x values (sizes, batches, thread counts): tick exactly those.
  const distinctX = [...new Set(pts.flat().map(([x]) => x))].sort((a, b) => a - b);
  const xTickValues = xLog || distinctX.length <= 12 ? distinctX : niceTicks(x1).filter((v) => v >= x0 && v <= x1);
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect x="0" y="0" width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${escapeXml(spec.title)}</text>`);
  for (const t of yTicks) {
    const y = num(sy(t));
    out.push(`<line x1="${m.left}" y1="${y}" x2="${m.left + pw}" y2="${y}" stroke="#ddd"/>`);
    out.push(`<text x="${m.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${escapeXml(fy(t))}</text>`);
  }
  for (const t of xTickValues) {
    const x = num(sx(t));
    out.push(`<line x1="${x}" y1="${m.top + ph}" x2="${x}" y2="${m.top + ph + 5}" stroke="#333"/>`);
    out.push(`<text x="${x}" y="${m.top + ph + 18}" text-anchor="middle">${escapeXml(fx(t))}</text>`);
  }
  out.push(`<line x1="${m.left}" y1="${m.top + ph}" x2="${m.left + pw}" y2="${m.top + ph}" stroke="#333"/>`);
  out.push(`<line x1="${m.left}" y1="${m.top}" x2="${m.left}" y2="${m.top + ph}" stroke="#333"/>`);
  out.push(`<text x="${m.left + pw / 2}" y="${H - 10}" text-anchor="middle">${escapeXml(spec.xLabel)}</text>`);
  out.push(`<text x="16" y="${m.top + ph / 2}" text-anchor="middle" transform="rotate(-90 16 ${m.top + ph / 2})">${escapeXml(spec.yLabel)}</text>`);
  spec.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const p = pts[i]!;
    if (p.length > 0) {
      const coords = p.map(([x, y]) => `${num(sx(x))},${num(sy(y))}`).join(' ');
      out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${coords}"/>`);
      for (const [x, y] of p) out.push(`<circle cx="${num(sx(x))}" cy="${num(sy(y))}" r="3" fill="${color}"/>`);
    }
    const ly = m.top + 10 + i * 18;
    out.push(`<line x1="${m.left + pw + 12}" y1="${ly}" x2="${m.left + pw + 32}" y2="${ly}" stroke="${color}" stroke-width="2"/>`);
    out.push(`<text x="${m.left + pw + 38}" y="${ly}" dominant-baseline="middle">${escapeXml(s.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}
