import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { Progress, progressMode } from './progress.js';

/** A stream that keeps what is written (and claims to be a terminal when asked to). */
class Sink extends Writable {
  text = '';
  constructor(readonly isTTY = false) {
    super();
  }
  override _write(chunk: Buffer, _enc: string, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

/** What a terminal would show: escape sequences removed. */
const visible = (s: string): string => s.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');

describe('progressMode', () => {
  it('is off with --json, bars on a terminal outside CI, lines otherwise', () => {
    expect(progressMode(true, { isTTY: true }, {})).toBe('off');
    expect(progressMode(false, { isTTY: true }, {})).toBe('bars');
    expect(progressMode(false, { isTTY: true }, { CI: 'true' })).toBe('lines');
    expect(progressMode(false, { isTTY: false }, {})).toBe('lines');
  });
});

function run(p: Progress): void {
  p.startRun([3, 2]);
  p.startSuite('find', 3);
  p.label('findSync (warm-up)', { transient: true });
  p.label('findSync | JS Map');
  p.step();
  p.log('find: a warning');
  p.step();
  p.endSuite();
  p.startSuite('bag', 2);
  p.label('lookupCombinedSync');
  p.step();
  p.endSuite();
}

describe('Progress', () => {
  it('lines mode prints one line per suite and per measurement started, and the log', () => {
    const out = new Sink();
    const p = new Progress();
    p.configure('lines', out);
    run(p);
    expect(out.text).toBe(
      [
        '[find] suite 1/2, 3 measurements',
        '[find 0/3] findSync | JS Map',
        'find: a warning',
        '[bag] suite 2/2, 2 measurements',
        '[bag 0/2] lookupCombinedSync',
        '',
      ].join('\n'),
    );
  });

  it('off mode prints only the log', () => {
    const out = new Sink();
    const p = new Progress();
    p.configure('off', out);
    run(p);
    expect(out.text).toBe('find: a warning\n');
  });

  it('bars mode draws the all-suites bar and the suite bar with ETA and the current measurement', () => {
    const out = new Sink(true);
    const p = new Progress();
    p.configure('bars', out);
    p.startRun([4, 2]);
    p.startSuite('find', 4);
    p.label('dim 64: findSync | JS Map');
    p.step();
    p.log('find: a warning');
    const shown = visible(out.text);
    expect(shown).toMatch(/suite 1\/2 \[[█░]{24}\] 0\/6 \| ETA .* \| all suites \(find running\)/);
    expect(shown).toMatch(/find {6}\[[█░]{24}\] 0\/4 \| ETA .* \| dim 64: findSync \| JS Map/);
    expect(shown).toMatch(/suite 1\/2 \[█{4}░{20}\] 1\/6/);
    expect(shown).toMatch(/find {6}\[█{6}░{18}\] 1\/4/);
    expect(shown).toContain('find: a warning');
    expect(p.current).toEqual({ suite: 'find', done: 1, total: 4, label: 'dim 64: findSync | JS Map' });
    p.endSuite();
    const cleared = out.text.length;
    p.log('after the suite');
    expect(out.text.slice(cleared)).toBe('after the suite\n');
  });
});
