// A target's verdict on constructed figures: no PASS from a missing, zero, broken or
// not-comparable side (review bench35), and the native ceiling loop against a plain sum.
import { describe, expect, it } from 'vitest';
import { loadNative } from './native.js';
import { torchFailure } from './peers/torch.js';
import { formatTarget, type Group, ratioTarget, requireSameOutput, valueTarget } from './report.js';
import { overheadBeyond } from './suites/common.js';
import { sumsAgree } from './suites/dtypes.js';
import { delayP99Ms } from './suites/hps.js';

describe('strict targets (<)', () => {
  it('pass strictly below the bound only, and print the operator the spec states', () => {
    expect(valueTarget(9.99, '<', 10, 'ms', 'p99 < 10 ms').pass).toBe(true);
    expect(valueTarget(10, '<', 10, 'ms', 'p99 < 10 ms').pass).toBe(false);
    expect(valueTarget(NaN, '<', 10, 'ms', 'p99 < 10 ms').pass).toBe(false);
    expect(valueTarget(-Infinity, '<', 10, 'ms', 'p99 < 10 ms').pass).toBe(false);
    expect(formatTarget(valueTarget(5.1, '<', 10, 'ms', 'event-loop p99'))).toBe('PASS  event-loop p99: 5.1 ms (< 10.0 ms)');
  });
  it('an infinite ratio never passes a >= target', () => {
    expect(valueTarget(Infinity, '>=', 0.5, 'ratio', 'kernel vs HKV').pass).toBe(false);
  });
});

describe('a peer that computed something else', () => {
  const g: Group = {
    title: 'bag',
    params: {},
    figures: [
      { name: 'ours', kind: 'ours', value: 120e6, unit: 'rows/s' },
      { name: 'PyTorch', kind: 'peer', value: 100e6, unit: 'rows/s' },
    ],
  };
  it('keeps a target whose peer agreed with ours as it is', () => {
    const t = ratioTarget(g, 'ours', 'PyTorch', '>=', 1, 'bag >= 1.0x PyTorch');
    expect(requireSameOutput(t, true, 'differs')).toEqual(t);
  });
  it('turns a PASS against a peer whose output differs into a MISS that says why', () => {
    const t = requireSameOutput(ratioTarget(g, 'ours', 'PyTorch', '>=', 1, 'bag >= 1.0x PyTorch'), false, "PyTorch's output sum differs from ours");
    expect(t).toMatchObject({ pass: false, measured: 1.2, text: "bag >= 1.0x PyTorch (not comparable: PyTorch's output sum differs from ours)" });
    expect(formatTarget(t)).toBe("MISS  bag >= 1.0x PyTorch (not comparable: PyTorch's output sum differs from ours): 1.20x (>= 1.00x)");
  });
  it('counts output sums as agreeing within the tolerance only, and never a missing checksum', () => {
    expect(sumsAgree(1234.5, 1234.5 + 0.001, 1e-5)).toBe(true); // 0.001 <= 1e-5 x 1234.5
    expect(sumsAgree(1234.5, 1234.6, 1e-5)).toBe(false);
    expect(sumsAgree(0.2, 0.2 + 5e-6, 1e-5)).toBe(true); // at least 1 in magnitude: 5e-6 <= 1e-5
    expect(sumsAgree(1234.5, Number(undefined), 1e-5)).toBe(false); // the child printed no checksum
    expect(sumsAgree(NaN, NaN, 1e-5)).toBe(false);
  });
});

describe('bytes per key beyond the values', () => {
  it('is the figure minus the value bytes', () => {
    expect(overheadBeyond(270.5, 256)).toBe(14.5);
    expect(overheadBeyond(256, 256)).toBe(0);
  });
  it('is NaN below the value bytes (a broken RSS read), so a <= target cannot PASS on it', () => {
    expect(overheadBeyond(0, 256)).toBeNaN();
    expect(overheadBeyond(200, 256)).toBeNaN();
    expect(overheadBeyond(NaN, 256)).toBeNaN();
    expect(valueTarget(overheadBeyond(0, 256), '<=', 16, 'B/key', 'overhead at 10M keys').pass).toBe(false);
    expect(valueTarget(overheadBeyond(270, 256), '<=', 16, 'B/key', 'overhead at 10M keys').pass).toBe(true);
  });
});

describe('event-loop delay p99', () => {
  it('is NaN for a monitor that recorded nothing, else the p99 in ms', () => {
    expect(delayP99Ms({ count: 0, percentile: () => 0 })).toBeNaN();
    expect(delayP99Ms({ count: 12, percentile: (p) => (p === 99 ? 4.2e6 : 0) })).toBe(4.2);
    expect(valueTarget(delayP99Ms({ count: 0, percentile: () => 0 }), '<', 10, 'ms', 'p99').pass).toBe(false);
  });
});

describe('why a PyTorch peer did not start', () => {
  it('says how to install torch when it is missing', () => {
    const why = torchFailure(["ModuleNotFoundError: No module named 'torch'"], 'child peer exited (code 1)', '/usr/bin/python3');
    expect(why).toBe("PyTorch unavailable (/usr/bin/python3: ModuleNotFoundError: No module named 'torch'); install it with: apt-get install -y python3-torch");
  });
  it('says torch cannot run the peer, without an install hint, when torch imported (it printed its version)', () => {
    const lines = ['version 1.13.0a0', 'Traceback (most recent call last):', "RuntimeError: Expected tensor for argument #1 'weight' to have one of the following scalar types: Half, Float, Double; but got CPUBFloat16Type instead"];
    const why = torchFailure(lines, 'child peer exited (code 1)', '/usr/bin/python3');
    expect(why).toBe(`PyTorch 1.13.0a0 cannot run this peer (/usr/bin/python3: ${lines[2]})`);
    expect(why).not.toContain('install');
  });
  it('falls back to the start error when the child printed nothing', () => {
    expect(torchFailure([], 'could not start: spawn /nope ENOENT\nmore', '/nope')).toBe('PyTorch unavailable (/nope: could not start: spawn /nope ENOENT); install it with: apt-get install -y python3-torch');
  });
});

describe('native gather-reduce (the bag ceiling)', () => {
  /** The arena's value at (row, column), as createArena writes it. */
  const cell = (row: number, dim: number, c: number): number => Math.fround((((row * dim + c) * 2654435761) % 2 ** 32 & 0xffff) / 65536 - 0.5);
  /** A float32 sum in bag order, then the mean's float32 scale: what the loop computes. */
  function plain(rows: number, dim: number, splits: Int32Array, ids: Uint32Array, mean: boolean): Float32Array {
    const out = new Float32Array((splits.length - 1) * dim);
    for (let r = 0; r + 1 < splits.length; r++) {
      const n = splits[r + 1]! - splits[r]!;
      const scale = mean && n > 0 ? Math.fround(1 / n) : 1;
      for (let c = 0; c < dim; c++) {
        let acc = 0;
        for (let j = splits[r]!; j < splits[r + 1]!; j++) if (ids[j]! < rows) acc = Math.fround(acc + cell(ids[j]!, dim, c));
        out[r * dim + c] = Math.fround(acc * scale);
      }
    }
    return out;
  }
  it('prefetches every cache line a row spans, once, also rows that do not start on a line (dims not a multiple of 16)', () => {
    const native = loadNative();
    for (let dim = 1; dim <= 70; dim++) {
      const rowBytes = dim * 4;
      // where the arena's rows start within a line (the arena starts on one)
      const starts = new Set(Array.from({ length: 64 }, (_, row) => (row * rowBytes) % 64));
      for (const start of starts) {
        const want: number[] = [];
        for (let line = Math.floor(start / 64) * 64; line < start + rowBytes; line += 64) want.push(line);
        expect(native.rowLines(start, rowBytes), `dim ${dim}, row at byte ${start}`).toEqual(want);
      }
    }
    // the bench's dim 64 on the arena's aligned rows: its four lines, as before
    expect(native.rowLines(0, 256)).toEqual([0, 64, 128, 192]);
  });

  for (const dim of [64, 200, 8]) {
    it(`sums and averages bags bit for bit as a plain float32 loop (dim ${dim}: ${dim % 64 === 0 ? 'whole 64-column blocks' : 'a partial block'}), on 1 and 2 threads, skipping ids out of range`, () => {
      const native = loadNative();
      const rows = 5000;
      const arena = native.createArena(rows, dim, 2);
      try {
        // bags of 0..40 ids (prefetches run past bag ends and past the last id), a few out of range
        const sizes = Array.from({ length: 97 }, (_, r) => (r * 7) % 41);
        const splits = Int32Array.from({ length: sizes.length + 1 }, (_, r) => sizes.slice(0, r).reduce((a, b) => a + b, 0));
        const ids = Uint32Array.from({ length: splits[sizes.length]! }, (_, j) => (j % 53 === 5 ? rows + j : (j * 2654435761) % rows));
        for (const mean of [false, true]) {
          const want = plain(rows, dim, splits, ids, mean);
          for (const threads of [1, 2]) {
            const out = new Float32Array(want.length).fill(7);
            native.gatherReduce(arena, splits, ids, out, mean, threads);
            expect(Buffer.from(out.buffer).equals(Buffer.from(want.buffer)), `mean ${mean}, ${threads} threads`).toBe(true);
          }
        }
      } finally {
        native.freeArena(arena);
      }
    });
  }

  // The hash-bag ceiling (suites/hashBag.ts): every variant of its passes, with and without
  // score stores, pools the same rows into the same bits as the plain loop (and so as the
  // gather-reduce); ids past the arena or the layout's records are skipped.
  for (const dim of [64, 200, 8]) {
    it(`hash-bag ceiling (dim ${dim}): every variant sums and averages bit for bit as a plain float32 loop, on 1 and 2 threads`, () => {
      const native = loadNative();
      const rows = 3000;
      const arena = native.createArena(rows, dim, 2);
      const layout = native.createHashLayout(37 * 64 + 5, rows, 2); // 37 lines (a partial line's bytes dropped)
      try {
        // bags of 0..40 ids, one longer than a small chunk, a few ids out of range
        const sizes = [...Array.from({ length: 97 }, (_, r) => (r * 7) % 41), 300, 0, 2];
        const splits = Int32Array.from({ length: sizes.length + 1 }, (_, r) => sizes.slice(0, r).reduce((a, b) => a + b, 0));
        const ids = Uint32Array.from({ length: splits[sizes.length]! }, (_, j) => (j % 53 === 5 ? rows + j : (j * 2654435761) % rows));
        for (const mean of [false, true]) {
          const want = plain(rows, dim, splits, ids, mean);
          for (const threads of [1, 2]) {
            const tunings: (Float64Array | undefined)[] = [undefined];
            for (const variant of [0, 1, 2]) {
              for (const [chunk, indexAhead, recordAhead, near] of [[1024, 64, 32, 8], [40, 8, 3, 2], [1, 1, 1, 1]]) {
                tunings.push(Float64Array.from([variant, chunk!, indexAhead!, recordAhead!, near!, variant === 1 ? 0 : 1, variant === 2 ? 1 : 0]));
              }
            }
            for (const tuning of tunings) {
              const out = new Float32Array(want.length).fill(7);
              native.hashBagReduce(layout, arena, splits, ids, out, mean, threads, tuning);
              expect(Buffer.from(out.buffer).equals(Buffer.from(want.buffer)), `mean ${mean}, ${threads} threads, tuning ${tuning ? [...tuning].join('/') : 'default'}`).toBe(true);
            }
          }
        }
        // a layout with fewer records than the arena has rows: ids at or past its records are skipped too
        const short = native.createHashLayout(64, 100, 1);
        const few = Uint32Array.from([5, 99, 100, 2999]);
        const out = new Float32Array(dim);
        native.hashBagReduce(short, arena, Int32Array.from([0, 4]), few, out, false, 1);
        expect(Buffer.from(out.buffer).equals(Buffer.from(plain(100, dim, Int32Array.from([0, 4]), few, false).buffer))).toBe(true);
        native.freeHashLayout(short);
      } finally {
        native.freeHashLayout(layout);
        native.freeArena(arena);
      }
    });
  }

  it('hash-bag ceiling: rejects bad arguments and a freed layout with a TypeError, writing nothing', () => {
    const native = loadNative();
    const arena = native.createArena(10, 4, 1);
    const layout = native.createHashLayout(640, 10, 1);
    const splits = Int32Array.from([0, 2]);
    const ids = Uint32Array.from([1, 2]);
    const out = new Float32Array(4).fill(7);
    try {
      expect(() => native.hashBagReduce(layout, arena, splits, ids, new Float32Array(3), false, 1)).toThrow(/out is shorter/);
      expect(() => native.hashBagReduce(layout, arena, Int32Array.from([0, 3]), ids, out, false, 1)).toThrow(/bad splits/);
      expect(() => native.hashBagReduce(layout, arena, splits, ids, out, false, 1, Float64Array.from([0, 1024, 64, 32, 8, 1]))).toThrow(/Float64Array of 7/);
      expect(() => native.hashBagReduce(layout, arena, splits, ids, out, false, 1, Float64Array.from([3, 1024, 64, 32, 8, 1, 0]))).toThrow(/out of range/);
      expect(() => native.hashBagReduce(layout, arena, splits, ids, out, false, 1, Float64Array.from([0, 0, 64, 32, 8, 1, 0]))).toThrow(/out of range/);
      expect(() => native.createHashLayout(64, 0)).toThrow(/rows in \[1/);
      expect([...out]).toEqual([7, 7, 7, 7]);
      native.freeHashLayout(layout);
      expect(() => native.hashBagReduce(layout, arena, splits, ids, out, false, 1)).toThrow(/hashBagReduce\(layout/);
    } finally {
      native.freeArena(arena);
    }
  });
});
