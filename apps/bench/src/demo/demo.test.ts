import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ClickLog } from './data.js';
import { auc, logLoss, quantile } from './metrics.js';

describe('demo metrics', () => {
  it('auc counts the positive-over-negative pairs (ties one half)', () => {
    // positives 0.35, 0.8; negatives 0.1, 0.4: 0.35 > 0.1, 0.35 < 0.4, 0.8 > both -> 3 of 4 pairs
    expect(auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])).toBe(0.75);
    expect(auc([0.5, 0.5], [1, 0])).toBe(0.5);
    // one tie among three pairs: positive 0.3 vs negatives 0.3 (1/2) and 0.1 (1); positive 0.05 vs 0.3 (0), 0.1 (0)
    expect(auc([0.3, 0.3, 0.1, 0.05], [1, 0, 0, 1])).toBe(1.5 / 4);
    expect(auc([0.1, 0.2], [1, 1])).toBeNaN();
  });
  it('logLoss and quantile', () => {
    expect(logLoss([0.8, 0.3], [1, 0])).toBeCloseTo((-Math.log(0.8) - Math.log(0.7)) / 2, 12);
    expect(quantile([5, 1, 3, 2, 4], 0.5)).toBe(3);
    expect(quantile([5, 1, 3, 2, 4], 1)).toBe(5);
  });
});

describe('demo click log', () => {
  it('is deterministic per seed, with ids in the vocabulary', () => {
    const a = new ClickLog({ vocab: 500, seed: 3 }).next(1000);
    const b = new ClickLog({ vocab: 500, seed: 3 }).next(1000);
    const c = new ClickLog({ vocab: 500, seed: 4 }).next(1000);
    expect(a.ids).toHaveLength(26);
    expect(a.ids).toEqual(b.ids);
    expect(a.labels).toEqual(b.labels);
    expect(a.ids[0]).not.toEqual(c.ids[0]);
    for (const col of a.ids) for (const id of col) expect(id >= 0 && id < 500).toBe(true);
  });
  it('has Zipf ids and a planted signal the hidden model ranks well', () => {
    const n = 3000;
    const log = new ClickLog({ vocab: 1000, seed: 1 }).next(n);
    const counts = new Map<number, number>();
    for (const id of log.ids[5]!) counts.set(id, (counts.get(id) ?? 0) + 1);
    const top = Math.max(...counts.values());
    expect(top).toBeGreaterThan(10 * (n / 1000)); // the hottest id is far above the uniform share
    // The hidden probabilities' AUC by plain pair counting: well above chance.
    let wins = 0;
    let pairs = 0;
    for (let i = 0; i < n; i++) {
      if (log.labels[i] !== 1) continue;
      for (let j = 0; j < n; j++) {
        if (log.labels[j] !== 0) continue;
        pairs++;
        wins += log.truth[i]! > log.truth[j]! ? 1 : log.truth[i] === log.truth[j] ? 0.5 : 0;
      }
    }
    expect(wins / pairs).toBeGreaterThan(0.8);
  });
});

const demo = fileURLToPath(new URL('../../dist/demo.js', import.meta.url));

describe('pnpm demo --quick (the built CLI, end to end)', () => {
  it('trains, checkpoints, exports, serves the trained rows, plots', () => {
    // The test command builds before it tests; run `pnpm build` first when running this file alone.
    expect(existsSync(demo), `${demo} (run pnpm build first)`).toBe(true);
    const plots = mkdtempSync(join(tmpdir(), 'embedstack-demo-plot-'));
    let r;
    try {
      r = spawnSync(process.execPath, [demo, '--quick', '--seed', '2', '--plot', plots], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, CI: '1' } });
      const charts = /charts: (.*)/.exec(r.stdout)?.[1]?.split(', ') ?? [];
      expect(charts).toHaveLength(3);
      for (const c of charts) expect(readFileSync(c, 'utf8')).toMatch(/^(<\?xml[^>]*>\s*)?<svg/);
    } finally {
      rmSync(plots, { recursive: true, force: true });
    }
    expect(r.stderr).not.toMatch(/FAILED/);
    expect(r.status).toBe(0);
    const served = /served AUC (\d\.\d+) = trained AUC (\d\.\d+)/.exec(r.stdout);
    expect(served).not.toBeNull();
    expect(served![1]).toBe(served![2]);
    const aucs = [...r.stdout.matchAll(/epoch \d+\/\d+: .*test AUC (\d\.\d+)/g)].map((m) => Number(m[1]));
    expect(aucs).toHaveLength(2);
    expect(aucs[1]!).toBeGreaterThan(0.65);
    expect(r.stdout).toMatch(/L1 hit rate 0\.\d+/);
  }, 150_000);
});

describe('pnpm demo: bad folders and sizes are refused before any work', () => {
  const run = (args: string[]) => spawnSync(process.execPath, [demo, ...args], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, CI: '1' } });
  it('--out holding a previous run, --out or --plot naming a file, --train below one batch: exit 1 with a message, no click log', () => {
    expect(existsSync(demo), `${demo} (run pnpm build first)`).toBe(true);
    const root = mkdtempSync(join(tmpdir(), 'embedstack-demo-args-'));
    try {
      const previous = join(root, 'previous');
      const file = join(root, 'file');
      writeFileSync(file, 'x');
      // a folder a previous run left its checkpoint in (before: the whole run, then an AlreadyExistsError stack trace)
      mkdirSync(join(previous, 'checkpoint'), { recursive: true });
      writeFileSync(join(previous, 'checkpoint', 'C01'), 'rows');
      const cases: [string[], string][] = [
        [['--quick', '--out', previous], `error: option '--out <dir>' argument '${previous}' is invalid. Expected a new or empty folder but "${previous}" holds 1 entries (checkpoint; a previous run's?)`],
        [['--quick', '--out', file], `error: option '--out <dir>' argument '${file}' is invalid. Expected a folder but received "${file}", which is a file.`],
        [['--quick', '--plot', file], `error: option '--plot <dir>' argument '${file}' is invalid. Expected a folder but received "${file}", which is a file.`],
        [['--train', '100'], 'error: --train 100 is less than one batch (--batch 1024)'],
        [['--quick', '--batch', '100000'], 'error: --train 16384 is less than one batch (--batch 100000)'],
      ];
      for (const [args, message] of cases) {
        const r = run(args);
        expect(r.status, args.join(' ')).toBe(1);
        expect(r.stderr).toContain(message);
        expect(r.stderr).toContain('(run with --help for the options)');
        expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
        expect(r.stdout).not.toContain('click log');
      }
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }, 120_000);
});
