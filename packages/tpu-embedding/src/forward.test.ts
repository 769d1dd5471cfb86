import { Tensor } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import {
  expectClose,
  FAVORITED,
  fixture,
  FRIENDS,
  ragged,
  raggedWeights,
  rows,
  sparse,
  sparseWeights,
  testBackends,
  WATCHED,
} from '../test/testUtil.js';

const cases = await testBackends();

/** Plain combiner (core.md): sum = Σ w e; mean = sum / Σ w; sqrtn = sum / sqrt(Σ w²); 0 denominators give zeros. */
function plainCombine(dim: number, ids: number[][], weights: number[][] | null, combiner: string): number[][] {
  return ids.map((row, b) => {
    const acc = new Array<number>(dim).fill(0);
    let ws = 0;
    let wq = 0;
    row.forEach((id, j) => {
      const w = weights ? weights[b]![j]! : 1;
      ws += w;
      wq += w * w;
      for (let c = 0; c < dim; c++) acc[c]! += w * (id * dim + c); // iota table: row r = [r*dim .. r*dim+dim-1]
    });
    const div = combiner === 'sum' ? 1 : combiner === 'mean' ? ws : Math.sqrt(wq);
    return acc.map((v) => (div === 0 ? 0 : v / div));
  });
}

describe.each(cases)('forward on the $name backend', ({ backend, reason }) => {
  if (!backend) {
    it.skip(`skipped: ${reason}`, () => undefined);
    return;
  }

  it("reproduces the spec's worked example (ragged, sum and mean)", async () => {
    const { emb } = fixture({ backend });
    emb.build(4);
    await emb.enqueue({ watched: ragged(WATCHED), favorited: ragged(FAVORITED), friends: ragged(FRIENDS) }, { training: false });
    const acts = await emb.dequeue();
    expect(acts.watched!.shape).toEqual([4, 4]);
    expect(rows(acts.watched!)).toEqual([[0, 1, 2, 3], [4, 6, 8, 10], [4, 6, 8, 10], [4, 5, 6, 7]]);
    expect(rows(acts.favorited!)).toEqual([[4, 6, 8, 10], [4, 5, 6, 7], [0, 1, 2, 3], [4, 6, 8, 10]]);
    expect(acts.friends!.shape).toEqual([4, 2]);
    expectClose(acts.friends!.data as Float32Array, [6, 7, 2, 3, 6, 7, 2, 3], 1e-6);
  });

  it('reproduces the worked example weighted by the ids themselves (sparse)', async () => {
    const { emb } = fixture({ backend });
    const w = (r: number[][]) => sparseWeights(r);
    await emb.enqueue(
      { watched: sparse(WATCHED), favorited: sparse(FAVORITED), friends: sparse(FRIENDS) },
      { weights: { watched: w(WATCHED), favorited: w(FAVORITED), friends: w(FRIENDS) } },
    );
    const acts = await emb.dequeue();
    expect(rows(acts.watched!)).toEqual([[0, 0, 0, 0], [4, 5, 6, 7], [4, 5, 6, 7], [4, 5, 6, 7]]);
    expect(rows(acts.favorited!)).toEqual([[4, 5, 6, 7], [4, 5, 6, 7], [0, 0, 0, 0], [4, 5, 6, 7]]);
    expectClose(acts.friends!.data as Float32Array, [6, 7, 3.3333333, 4.3333333, 6, 7, 3.3333333, 4.3333333], 1e-6);
  });

  it('gathers dense ids (one id per example, no combiner)', async () => {
    const { emb } = fixture({ backend, userCombiner: 'sqrtn', videoCombiner: 'mean' });
    await emb.enqueue({
      watched: new Tensor(Int32Array.from([0, 1, 2, 3, 4, 5, 6, 7])),
      favorited: [7, 6, 5, 4, 3, 2, 1, 0],
      friends: new BigInt64Array([3n, 0n, 1n, 2n, 3n, 0n, 1n, 2n]),
    });
    const acts = await emb.dequeue();
    expect(rows(acts.friends!)).toEqual([[6, 7], [0, 1], [2, 3], [4, 5], [6, 7], [0, 1], [2, 3], [4, 5]]);
    expect(rows(acts.watched!)[5]).toEqual([20, 21, 22, 23]);
    expect(rows(acts.favorited!)[0]).toEqual([28, 29, 30, 31]);
  });

  it('keeps the shape of a rank-2 dense id tensor (ids.shape + [dim])', async () => {
    const { emb } = fixture({ backend });
    await emb.enqueue({ watched: [[0, 1], [2, 3]], favorited: [[1, 1], [0, 0]], friends: [[5, 6], [7, 8]] });
    const acts = await emb.dequeue();
    expect(acts.watched!.shape).toEqual([2, 2, 4]);
    expect(rows(acts.watched!)).toEqual([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]);
    expect(rows(acts.friends!)).toEqual([[10, 11], [12, 13], [14, 15], [16, 17]]);
  });

  for (const combiner of ['sum', 'mean', 'sqrtn'] as const) {
    for (const kind of ['sparse', 'ragged'] as const) {
      for (const weighted of [false, true]) {
        it(`combines with ${combiner}, ${kind}, ${weighted ? 'weighted' : 'unweighted'}`, async () => {
          const { emb } = fixture({ backend, videoCombiner: combiner, userCombiner: combiner });
          // weights: positive, zero and negative, so mean/sqrtn denominators are exercised (row 1 of friends sums to 0)
          const ww = [[0.5], [2, -1.5], [1, 3], [0]];
          const wf = [[1, 2], [4], [0.25], [-1, 1]];
          const wr = [[2], [1, -2, 1], [0.5], [3, 0, 1]];
          const make = kind === 'sparse' ? sparse : ragged;
          const makeW = kind === 'sparse' ? sparseWeights : raggedWeights;
          await emb.enqueue(
            { watched: make(WATCHED), favorited: make(FAVORITED), friends: make(FRIENDS) },
            { weights: weighted ? { watched: makeW(ww), favorited: makeW(wf), friends: makeW(wr) } : undefined },
          );
          const acts = await emb.dequeue();
          expectClose(acts.watched!.data as Float32Array, plainCombine(4, WATCHED, weighted ? ww : null, combiner).flat());
          expectClose(acts.favorited!.data as Float32Array, plainCombine(4, FAVORITED, weighted ? wf : null, combiner).flat());
          expectClose(acts.friends!.data as Float32Array, plainCombine(2, FRIENDS, weighted ? wr : null, combiner).flat());
        });
      }
    }
  }

  it('returns zeros for examples without ids', async () => {
    const { emb } = fixture({ backend, userCombiner: 'sqrtn' });
    await emb.enqueue({ watched: ragged([[], [1]]), favorited: ragged([[2], []]), friends: ragged([[], []]) });
    const acts = await emb.dequeue();
    expect(rows(acts.watched!)).toEqual([[0, 0, 0, 0], [4, 5, 6, 7]]);
    expect(rows(acts.favorited!)).toEqual([[8, 9, 10, 11], [0, 0, 0, 0]]);
    expect(rows(acts.friends!)).toEqual([[0, 0], [0, 0]]);
  });

  it('returns [batch, L, dim] for sequence features: ids past L dropped, short rows zero padded', async () => {
    const { emb } = fixture({ backend, friendsSequence: 2 });
    await emb.enqueue({ watched: ragged(WATCHED), favorited: ragged(FAVORITED), friends: ragged(FRIENDS) });
    const acts = await emb.dequeue();
    expect(acts.friends!.shape).toEqual([4, 2, 2]);
    expect(rows(acts.friends!)).toEqual([[6, 7], [0, 0], [0, 1], [2, 3], [6, 7], [0, 0], [0, 1], [2, 3]]);
    // sparse input: the position is the second index; dense [batch, T] ids too
    const b = fixture({ backend, friendsSequence: 3 });
    await b.emb.enqueue({ watched: sparse(WATCHED), favorited: sparse(FAVORITED), friends: sparse([[1, 2, 3, 4], [], [5], [6, 7]]) });
    const s = await b.emb.dequeue();
    expect(rows(s.friends!)).toEqual([[2, 3], [4, 5], [6, 7], [0, 0], [0, 0], [0, 0], [10, 11], [0, 0], [0, 0], [12, 13], [14, 15], [0, 0]]);
    await b.emb.enqueue({ watched: [1, 2, 3, 4], favorited: [0, 0, 0, 0], friends: [[1, 2], [3, 4], [5, 6], [7, 0]] });
    const d = await b.emb.dequeue();
    expect(d.friends!.shape).toEqual([4, 3, 2]);
    expect(rows(d.friends!).slice(0, 3)).toEqual([[2, 3], [4, 5], [0, 0]]);
    expect(rows(d.friends!).slice(9, 12)).toEqual([[14, 15], [0, 1], [0, 0]]);
  });

  it('follows any nesting of objects and arrays (keys sorted)', async () => {
    const { featureConfig } = fixture({ backend });
    const { TPUEmbedding } = await import('./tpuEmbedding.js');
    const { SGD } = await import('./optimizers.js');
    const nested = [featureConfig.friends, { z: featureConfig.watched, a: [featureConfig.favorited] }];
    const emb = new TPUEmbedding({ featureConfig: nested, optimizer: new SGD(), backend });
    expect(emb.tableNames).toEqual(['user', 'video']);
    await emb.enqueue([ragged([[1], [2]]), { z: ragged([[1], [0]]), a: [ragged([[2], [3]])] }]);
    const acts = (await emb.dequeue()) as [Tensor, { z: Tensor; a: [Tensor] }];
    expect(rows(acts[0])).toEqual([[2, 3], [4, 5]]);
    expect(rows(acts[1].z)).toEqual([[4, 5, 6, 7], [0, 1, 2, 3]]);
    expect(rows(acts[1].a[0])).toEqual([[8, 9, 10, 11], [12, 13, 14, 15]]);
  });
});
