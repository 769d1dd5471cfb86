import { describe, expect, it } from 'vitest';
import { runSuiteJson } from './suiteRun.testing.js';

interface JsonFigure {
  name: string;
  value: number;
  samples?: number[];
  interleaved?: number;
}
interface JsonGroup {
  title: string;
  figures: JsonFigure[];
}
interface JsonSuite {
  suite: string;
  groups: JsonGroup[];
  targets: { text: string; measured: number; pass: boolean }[];
  notes: string[];
}

/** ours / peer round by round (the median; an even count's middle two by their geometric mean), recomputed here from the samples. */
function perRoundRatio(ours: JsonFigure, peer: JsonFigure): number {
  const a = ours.samples ?? [];
  const b = peer.samples ?? [];
  expect(ours.interleaved, `${ours.name} and ${peer.name} sampled in the same rounds`).toBe(peer.interleaved);
  expect(a.length).toBe(b.length);
  const r = a.map((x, i) => x / b[i]!).sort((x, y) => x - y);
  const m = r.length >> 1;
  return r.length % 2 === 1 ? r[m]! : Math.sqrt(r[m - 1]! * r[m]!);
}

const devices = (n: number): string => `${n} device${n === 1 ? '' : 's'}`;

describe('bench sok suite', () => {
  it('a tiny run on the reference backend: fresh and reused-output forward rows for 1, 2 and 4 devices, the device targets judged on the reused-output rows, the fresh rows\' ratios in a note', () => {
    const { result } = runSuiteJson<JsonSuite>('sok', ['--sok-rows', '4096', '--sok-bags', '8', '--sok-tiny', '--backend', 'reference']);
    expect(result.suite).toBe('sok');
    const group = (title: string): JsonGroup => {
      const g = result.groups.find((x) => x.title.startsWith(title));
      expect(g, title).toBeDefined();
      return g!;
    };
    const fig = (g: JsonGroup, name: string): JsonFigure => {
      const f = g.figures.find((x) => x.name === name);
      expect(f, `${g.title}: ${name}`).toBeDefined();
      expect(Number.isFinite(f!.value) && f!.value > 0).toBe(true);
      return f!;
    };
    // Each device count's ratio to core, fresh and into reused outputs, all four jobs in the same rounds.
    const toCore = new Map<string, number>();
    for (const n of [1, 2, 4]) {
      const fresh = group(`sok forward, ${devices(n)}:`);
      const out = group(`sok forward into reused outputs, ${devices(n)}:`);
      group(`sok backward (SGD step), ${devices(n)}:`);
      const sf = fig(fresh, `sok lookupSparse (${devices(n)})`);
      const cf = fig(fresh, 'core lookupCombined');
      const so = fig(out, `sok lookupSparse, reused out (${devices(n)})`);
      const co = fig(out, 'core lookupCombined, reused out');
      expect(new Set([sf.interleaved, cf.interleaved, so.interleaved, co.interleaved]).size).toBe(1);
      toCore.set(`fresh${n}`, perRoundRatio(sf, cf));
      toCore.set(`out${n}`, perRoundRatio(so, co));
    }
    const target = (start: string) => {
      const t = result.targets.find((x) => x.text.startsWith(start));
      expect(t, start).toBeDefined();
      return t!;
    };
    // The judged device targets are the reused-output rows' ratios, and every device count gave 1 device's bits.
    const t21 = target('nd2 forward >= 1.3x nd1, reused outputs');
    const t42 = target('nd4 forward >= nd2, reused outputs');
    expect(t21.measured).toBeCloseTo(toCore.get('out2')! / toCore.get('out1')!, 9);
    expect(t42.measured).toBeCloseTo(toCore.get('out4')! / toCore.get('out2')!, 9);
    for (const t of [t21, t42]) expect(t.text).not.toContain('not comparable');
    // The 1-device target against core stays on the fresh rows.
    expect(target('nd1: sok lookupSparse forward >= 0.8x core lookupCombined').measured).toBeCloseTo(toCore.get('fresh1')!, 9);
    // The fresh rows' device ratios are printed as information (2 decimals, as formatRatio prints them).
    const note = result.notes.find((x) => x.includes('information, not judged'));
    expect(note).toBeDefined();
    const shown = (x: number): string => `${x.toFixed(2)}x`;
    expect(note).toContain(`nd2 / nd1 ${shown(toCore.get('fresh2')! / toCore.get('fresh1')!)}`);
    expect(note).toContain(`nd4 / nd2 ${shown(toCore.get('fresh4')! / toCore.get('fresh2')!)}`);
  }, 180_000);
});
