// The buffers of enqueue's copies are reused once their batch is spent, never while a queued,
// dequeued or pending batch still reads them.
import { type EmbeddingBackend, RaggedTensor, type Tensor } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import { FeatureConfig, TableConfig } from './config.js';
import { CopyPool } from './copyPool.js';
import { SGD } from './optimizers.js';
import { testBackends } from '../test/testUtil.js';
import { TPUEmbedding } from './tpuEmbedding.js';

const cases = await testBackends();

describe('CopyPool', () => {
  it('makes a new buffer with 1/8 more room, rounded up to 64 bytes', () => {
    const p = new CopyPool();
    expect(p.take(1000).byteLength).toBe(1152); // 1000 + 125 = 1125 -> 18 x 64
    expect(p.take(64).byteLength).toBe(128); // 64 + 8 = 72 -> 2 x 64
    expect(p.take(0).byteLength).toBe(0);
  });

  it('gives back a free buffer of at least the bytes asked and at most twice as many, the smallest such', () => {
    const p = new CopyPool();
    const big = p.take(4000); // 4544 bytes
    const small = p.take(1000); // 1152 bytes
    p.give([big, small]);
    expect(p.freeBytes).toBe(4544 + 1152);
    expect(p.take(900)).toBe(small); // both fit 900 <= c; only 1152 is within 2 x 900
    expect(p.take(2300)).toBe(big); // 4544 <= 4600
    expect(p.freeBytes).toBe(0);
    p.give([big]);
    const other = p.take(2200); // 4544 > 4400: a new buffer
    expect(other).not.toBe(big);
    expect(other.byteLength).toBe(2496); // 2200 + 275 = 2475 -> 39 x 64
    expect(p.freeBytes).toBe(4544);
  });

  it('keeps at most maxFreeBytes of free buffers, dropping the oldest', () => {
    const p = new CopyPool();
    const quarter = CopyPool.maxFreeBytes / 4;
    const bufs = [1, 2, 3, 4, 5].map(() => new ArrayBuffer(quarter));
    p.give(bufs);
    expect(p.freeBytes).toBe(CopyPool.maxFreeBytes);
    // the first one was dropped: taking five of that size returns the other four, then a new one
    const back = [1, 2, 3, 4, 5].map(() => p.take(quarter));
    expect(back.slice(0, 4).sort((a, b) => bufs.indexOf(a) - bufs.indexOf(b))).toEqual(bufs.slice(1));
    expect(bufs).not.toContain(back[4]);
    p.give([new ArrayBuffer(CopyPool.maxFreeBytes + 64)]); // too large to keep
    expect(p.freeBytes).toBe(0);
  });
});

/** One table of 64 rows of dim 1 holding 0..63 (sum combiner, SGD lr 1): an activation is the sum of its bag's ids. */
function model(backend: EmbeddingBackend, pipeline = false) {
  const table = new TableConfig({ vocabularySize: 64, dim: 1, name: 't', combiner: 'sum', initializer: () => Float32Array.from({ length: 64 }, (_, i) => i) });
  return new TPUEmbedding({ featureConfig: { f: new FeatureConfig({ table }) }, optimizer: new SGD({ learningRate: 1 }), pipelineExecutionWithTensorCore: pipeline, backend });
}

/** Bags of a batch of 4: bag r holds `sizes[r]` ids from `start` on (mod 64). */
function bags(start: number, sizes: readonly number[]): number[][] {
  let at = start;
  return sizes.map((n) => Array.from({ length: n }, () => at++ % 64));
}

/** The caller's arrays, refilled for each batch (the user's reused buffers): a RaggedTensor over their first entries. */
class Caller {
  readonly ids = new Int32Array(64);
  readonly splits = new Int32Array(5);
  fill(b: number[][]): RaggedTensor<Int32Array> {
    let n = 0;
    b.forEach((bag, r) => {
      this.splits[r] = n;
      for (const id of bag) this.ids[n++] = id;
    });
    this.splits[b.length] = n;
    return RaggedTensor.fromRowSplits(this.ids.subarray(0, n), this.splits.subarray(0, b.length + 1)) as RaggedTensor<Int32Array>;
  }
  scribble(): void {
    this.ids.fill(63);
  }
}

const sums = (b: number[][]) => b.map((bag) => bag.reduce((a, x) => a + x, 0));
const data = (acts: { f: Tensor<Float32Array> }) => Array.from(acts.f.data);

describe.each(cases.filter((c) => c.backend))('$name backend: copies reused', ({ backend }) => {
  it('batches queued three deep, from one refilled caller array, each of another size: every dequeue looks up its own ids', async () => {
    const e = model(backend!);
    const caller = new Caller();
    const sizes = [
      [3, 1, 2, 4],
      [2, 2, 2, 2],
      [4, 4, 3, 1],
      [1, 1, 1, 2],
      [5, 3, 2, 1],
    ];
    const batches = sizes.map((s, i) => bags(7 * i, s));
    for (let round = 0; round < 3; round++) {
      // one at a time (earlier batches spent, their buffers free), then three queued at once
      await e.enqueue({ f: caller.fill(batches[0]!) }, { training: false });
      caller.scribble();
      expect(data(await e.dequeue())).toEqual(sums(batches[0]!));
      for (const b of batches.slice(1, 4)) await e.enqueue({ f: caller.fill(b) }, { training: false });
      caller.scribble();
      for (const b of batches.slice(1, 4)) expect(data(await e.dequeue())).toEqual(sums(b));
      await e.enqueue({ f: caller.fill(batches[4]!) }, { training: false });
      caller.scribble();
      expect(data(await e.dequeue())).toEqual(sums(batches[4]!));
    }
  });

  for (const pipeline of [false, true]) {
    it(`${pipeline ? 'pipelined: ' : ''}applyGradients after the next batches were enqueued trains the dequeued batch's rows`, async () => {
      const e = model(backend!, pipeline);
      const caller = new Caller();
      const expected = Float32Array.from({ length: 64 }, (_, i) => i);
      let late: number[][] | null = null; // pipelined: the update that lands at the next dequeue
      const step = (b: number[][]) => {
        for (const bag of b) for (const id of bag) expected[id]! -= 1; // SGD lr 1, gradient 1 per bag
      };
      let prev = bags(0, [2, 3, 1, 2]);
      await e.enqueue({ f: caller.fill(prev) });
      for (let i = 1; i <= 6; i++) {
        const acts = await e.dequeue();
        // the lookups read the table before a pending (late) update lands
        expect(data(acts)).toEqual(prev.map((bag) => bag.reduce((a, id) => a + expected[id]!, 0)));
        if (late) step(late);
        late = null;
        // the next two batches enqueued before this one's gradients: their copies must not take its buffers
        const next = bags(11 * i, [1 + (i % 3), 2, 3, 1]);
        await e.enqueue({ f: caller.fill(next) });
        caller.scribble();
        await e.applyGradients({ f: Float32Array.of(1, 1, 1, 1) });
        if (pipeline) late = prev;
        else step(prev);
        prev = next;
      }
      if (late) step(late);
      const table = [...e.embeddingTables.values()][0]!; // applies the pending update
      expect(Array.from(table.data)).toEqual(Array.from(expected));
      expect(e.step).toBe(6);
    });
  }

  it('a rejected enqueue queues nothing, and the next batches look up their own ids', async () => {
    const e = model(backend!);
    const caller = new Caller();
    const ok = bags(5, [1, 2, 3, 1]);
    await e.enqueue({ f: caller.fill(ok) }, { training: false });
    // refused before any copy (an id outside [0, 64)), and after its copies (a batch of 3, not 4): nothing queued
    const bad = caller.fill(bags(1, [2, 2, 2, 2]));
    caller.ids[3] = 64;
    await expect(e.enqueue({ f: bad }, { training: false })).rejects.toMatchObject({ code: 'OUT_OF_RANGE' });
    await expect(e.enqueue({ f: caller.fill(bags(40, [2, 2, 2])) }, { training: false })).rejects.toThrow(/batch size/);
    const after = bags(20, [3, 3, 1, 1]);
    await e.enqueue({ f: caller.fill(after) }, { training: false });
    caller.scribble();
    expect(data(await e.dequeue())).toEqual(sums(ok));
    expect(data(await e.dequeue())).toEqual(sums(after));
    await expect(e.dequeue()).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
  });
});
