import { describe, expect, it } from 'vitest';
import { DEMO_FEATURES, demoBytes, demoSizeError } from './limits.js';

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
