import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEMO_FEATURES, demoBatchError, demoBytes, demoSizeError, prepareOutDir } from './limits.js';

const GiB = 2 ** 30;

describe('the demo size check', () => {
  it('counts rows, the Adagrad accumulator and the ids', () => {
    // 26 tables x 10000 rows x 8 floats x 4 bytes x 2 (values + accumulator) = 16,640,000;
    // 26 ids x (262144 + 16384) examples x 8 bytes = 57,933,824
    const defaults = { features: DEMO_FEATURES, vocab: 10_000, dim: 8, trainExamples: 262_144, testExamples: 16_384 };
    expect(demoBytes(defaults)).toBe(16_640_000 + 57_933_824);
    expect(demoSizeError(defaults, 23.5 * GiB)).toBeNull();
  });

  it('refuses sizes past a quarter of the memory, naming them and both amounts', () => {
    const s = { features: 26, vocab: 1000, dim: 1e8, trainExamples: 16_384, testExamples: 4096 };
    // 26 x 1000 x 1e8 x 8 = 2.08e13 bytes, plus 26 x 20480 x 8 = 4,259,840: 18.9 TiB
    expect(demoBytes(s)).toBe(20_800_004_259_840);
    const e = demoSizeError(s, 24 * GiB)!;
    expect(e).toMatch(/^error: --vocab 1000, --dim 100000000, --train 16384 and --test 4096 need at least 18\.9 TiB /);
    expect(e).toContain("more than a quarter of this machine's 24.0 GiB");
    // the bound itself: exactly a quarter passes, one byte over does not
    const small = { features: 1, vocab: 1, dim: 1, trainExamples: 0, testExamples: 0 }; // 8 bytes
    expect(demoSizeError(small, 32)).toBeNull();
    expect(demoSizeError(small, 31)).not.toBeNull();
  });
});

describe('the demo checks before any work', () => {
  it('refuses a training set below one batch, naming both options', () => {
    expect(demoBatchError(1024, 1024)).toBeNull();
    expect(demoBatchError(100, 1024)).toBe('error: --train 100 is less than one batch (--batch 1024): the demo trains whole batches. Raise --train or lower --batch.');
  });

  it('--out: makes a new folder, takes an empty one, refuses a file or a folder holding a previous run', () => {
    const root = mkdtempSync(join(tmpdir(), 'embedstack-demo-out-'));
    try {
      const fresh = join(root, 'a', 'b');
      expect(prepareOutDir(fresh)).toBeNull();
      expect(statSync(fresh).isDirectory()).toBe(true);
      expect(prepareOutDir(fresh)).toBeNull(); // empty: fine
      mkdirSync(join(fresh, 'checkpoint'));
      mkdirSync(join(fresh, 'serving'));
      expect(prepareOutDir(fresh)).toBe(`Expected a new or empty folder but "${fresh}" holds 2 entries (checkpoint, serving; a previous run's?): pick another folder or empty this one.`);
      const file = join(root, 'f');
      writeFileSync(file, 'x');
      expect(prepareOutDir(file)).toBe(`Expected a folder but received "${file}", which is a file.`);
      expect(prepareOutDir(join(file, 'sub'))).toBe(`Expected a folder the run can be kept in but received "${join(file, 'sub')}" (a file is in the way).`);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
