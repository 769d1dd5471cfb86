import { Tensor } from '@embedstack/core';
import { afterEach, describe, expect, it } from 'vitest';
import { Adagrad, AdagradMomentum, Adam, type EmbeddingOptimizer, FTRL, SGD } from './optimizers.js';
import { lossGradient, type PlainFeature, type PlainOptimizer, plainForward, plainStep, plainTable, type PlainTable } from '../test/plainModel.js';
import { expectClose, FAVORITED, fixture, FRIENDS, ragged, raggedWeights, rows, testBackends, WATCHED } from '../test/testUtil.js';
import type { TableInitializer } from './config.js';
import { TPUEmbedding } from './tpuEmbedding.js';
import { FeatureConfig, TableConfig } from './config.js';

const cases = await testBackends();

const small: TableInitializer = (shape) => Float32Array.from({ length: shape[0] * shape[1] }, (_, i) => (i % 7) * 0.25 - 0.5);

/** Three steps of inputs (ids and weights per feature); step 2 touches other rows so lazy and non-lazy Adam differ. */
const STEPS = [
  { watched: WATCHED, favorited: FAVORITED, friends: FRIENDS, ww: [[0.5], [2, -1.5], [1, 3], [1]], wf: [[1, 2], [4], [0.25], [-1, 1]], wr: [[2], [1, -2, 1], [0.5], [3, 0, 1]] },
  { watched: [[2], [3, 4], [5], [2, 6]], favorited: [[7], [7, 7], [], [6]], friends: [[9, 10], [11], [12, 13, 14], [15]], ww: [[1], [1, 2], [3], [0.5, 0.5]], wf: [[2], [1, 1], [], [1]], wr: [[1, 1], [2], [1, 2, 3], [1]] },
  { watched: WATCHED, favorited: FAVORITED, friends: FRIENDS, ww: [[1], [1, 1], [2, 1], [1]], wf: [[1, 1], [1], [1], [1, 1]], wr: [[1], [1, 1, 1], [1], [1, 2, 3]] },
];

interface OptCase {
  name: string;
  make: () => EmbeddingOptimizer;
  plain: PlainOptimizer;
}

const OPTIMIZERS: OptCase[] = [
  { name: 'SGD', make: () => new SGD({ learningRate: 0.1 }), plain: { kind: 'sgd', lr: 0.1, slots: [] } },
  { name: 'Adagrad', make: () => new Adagrad({ learningRate: 0.1 }), plain: { kind: 'adagrad', lr: 0.1, slots: [0.1] } },
  {
    name: 'Adagrad (initialAccumulatorValue 0.5)',
    make: () => new Adagrad({ learningRate: 0.2, initialAccumulatorValue: 0.5 }),
    plain: { kind: 'adagrad', lr: 0.2, slots: [0.5] },
  },
  { name: 'AdagradMomentum (defaults)', make: () => new AdagradMomentum({ learningRate: 0.1 }), plain: { kind: 'adagradMomentum', lr: 0.1, slots: [0, 0] } },
  {
    name: 'AdagradMomentum (nesterov, exponent 3, beta2 0.9)',
    make: () => new AdagradMomentum({ learningRate: 0.1, momentum: 0.9, useNesterov: true, exponent: 3, beta2: 0.9, epsilon: 1e-6 }),
    plain: { kind: 'adagradMomentum', lr: 0.1, slots: [0, 0], momentum: 0.9, nesterov: true, exponent: 3, beta2: 0.9, epsilon: 1e-6 },
  },
  { name: 'Adam (lazy)', make: () => new Adam({ learningRate: 0.1 }), plain: { kind: 'adam', lr: 0.1, slots: [0, 0] } },
  {
    name: 'Adam (sumInsideSqrt false, betas 0.5/0.8)',
    make: () => new Adam({ learningRate: 0.05, beta1: 0.5, beta2: 0.8, epsilon: 1e-3, sumInsideSqrt: false }),
    plain: { kind: 'adam', lr: 0.05, slots: [0, 0], beta1: 0.5, beta2: 0.8, epsilon: 1e-3, sumInsideSqrt: false },
  },
  {
    name: 'Adam (non-lazy: every row every step)',
    make: () => new Adam({ learningRate: 0.1, lazyAdam: false }),
    plain: { kind: 'adam', lr: 0.1, slots: [0, 0], nonLazy: true },
  },
  { name: 'FTRL', make: () => new FTRL({ learningRate: 0.5 }), plain: { kind: 'ftrl', lr: 0.5, slots: [0.1, 0] } },
  {
    name: 'FTRL (l1, l2, beta, power, accumulator)',
    make: () => new FTRL({ learningRate: 0.5, l1RegularizationStrength: 0.05, l2: 0.2, beta: 0.3, learningRatePower: -0.7, initialAccumulatorValue: 0.2 }),
    plain: { kind: 'ftrl', lr: 0.5, slots: [0.2, 0], l1: 0.05, l2: 0.2, beta: 0.3, lrPower: -0.7 },
  },
  {
    name: 'SGD clipvalue 0.3',
    make: () => new SGD({ learningRate: 0.1, clipvalue: 0.3 }),
    plain: { kind: 'sgd', lr: 0.1, slots: [], clip: [-0.3, 0.3] },
  },
  {
    name: 'SGD clipvalue [-0.1, null]',
    make: () => new SGD({ learningRate: 0.1, clipvalue: [-0.1, null] }),
    plain: { kind: 'sgd', lr: 0.1, slots: [], clip: [-0.1, Infinity] },
  },
  {
    name: 'SGD weight decay',
    make: () => new SGD({ learningRate: 0.1, weightDecayFactor: 0.5 }),
    plain: { kind: 'sgd', lr: 0.1, slots: [], weightDecay: 0.5 },
  },
  {
    name: 'Adagrad weight decay x lr, clipWeight [-0.2, 0.3], clipvalue 1',
    make: () =>
      new Adagrad({ learningRate: 0.3, weightDecayFactor: 2, multiplyWeightDecayFactorByLearningRate: true, clipWeightMin: -0.2, clipWeightMax: 0.3, clipvalue: 1 }),
    plain: { kind: 'adagrad', lr: 0.3, slots: [0.1], weightDecay: 2, multiplyWeightDecayByLr: true, clipWeight: [-0.2, 0.3], clip: [-1, 1] },
  },
  {
    name: 'SGD clipWeightMax only',
    make: () => new SGD({ learningRate: 0.5, clipWeightMax: 0.1 }),
    plain: { kind: 'sgd', lr: 0.5, slots: [], clipWeight: [-Infinity, 0.1] },
  },
];

function tensorOf(acts: number[][]): Tensor<Float32Array> {
  return new Tensor(Float32Array.from(acts.flat()), [acts.length, acts[0]!.length]);
}

describe.each(cases)('training on the $name backend', ({ backend, reason }) => {
  if (!backend) {
    it.skip(`skipped: ${reason}`, () => undefined);
    return;
  }

  it("applies one SGD step with the spec's numbers", async () => {
    const { emb, video, user } = fixture({ backend, optimizer: new SGD({ learningRate: 0.1 }), numReplicas: 2, numHosts: 2 });
    emb.build(2);
    await emb.enqueue({ watched: ragged(WATCHED), favorited: ragged(FAVORITED), friends: ragged(FRIENDS) }, { weights: undefined, training: true });
    const acts = await emb.dequeue();
    const grad = (t: Tensor) => new Tensor(Float32Array.from(t.data as Float32Array, (v) => (2 * v) / 4), t.shape);
    await emb.applyGradients({ watched: grad(acts.watched!), favorited: grad(acts.favorited!), friends: grad(acts.friends!) });
    expect(emb.step).toBe(1);
    const tables = emb.embeddingTables;
    const v = rows(tables.get(video)!);
    expectClose(v[0]!, [-0.8, -0.3, 0.2, 0.7], 1e-6);
    expectClose(v[1]!, [2.8, 3.3, 3.8, 4.3], 1e-6);
    for (let r = 2; r < 8; r++) expect(v[r]).toEqual([4 * r, 4 * r + 1, 4 * r + 2, 4 * r + 3]);
    const u = rows(tables.get(user)!);
    expectClose(u[3]!, [5.4, 6.3], 1e-6);
    // friends rows 0..2 are touched too: mean over 3 ids of [2,3] -> grad 2*[2,3]/4 / 3 per id, twice
    for (let r = 0; r < 3; r++) expectClose(u[r]!, [2 * r - (0.1 * 2 * 2 * 2) / 4 / 3, 2 * r + 1 - (0.1 * 2 * 2 * 3) / 4 / 3], 1e-6);
    for (let r = 4; r < 16; r++) expect(u[r]).toEqual([2 * r, 2 * r + 1]);
  });

  for (const oc of OPTIMIZERS) {
    it(`matches a plain re-implementation over 3 steps: ${oc.name}`, async () => {
      const { emb, video, user } = fixture({ backend, optimizer: oc.make(), videoCombiner: 'sqrtn', userCombiner: 'mean', initializer: small });
      const init = (rowsN: number, dim: number) => Float32Array.from(small([rowsN, dim]) as ArrayLike<number>);
      const plain: Record<string, PlainTable> = {
        video: plainTable(8, 4, 'sqrtn', init(8, 4), oc.plain),
        user: plainTable(16, 2, 'mean', init(16, 2), oc.plain),
      };
      for (const s of STEPS) {
        const feats: PlainFeature[] = [
          { table: 'video', ids: s.favorited, weights: s.wf },
          { table: 'user', ids: s.friends, weights: s.wr },
          { table: 'video', ids: s.watched, weights: s.ww },
        ]; // flatten order: favorited, friends, watched
        await emb.enqueue(
          { watched: ragged(s.watched), favorited: ragged(s.favorited), friends: ragged(s.friends) },
          { weights: { watched: raggedWeights(s.ww), favorited: raggedWeights(s.wf), friends: raggedWeights(s.wr) } },
        );
        const acts = await emb.dequeue();
        const expected = plainForward(plain, feats);
        expectClose(acts.favorited!.data as Float32Array, expected[0]!.flat());
        expectClose(acts.friends!.data as Float32Array, expected[1]!.flat());
        expectClose(acts.watched!.data as Float32Array, expected[2]!.flat());
        const grads = expected.map(lossGradient);
        await emb.applyGradients({ favorited: tensorOf(grads[0]!), friends: tensorOf(grads[1]!), watched: tensorOf(grads[2]!) });
        plainStep(plain, feats, grads);
        const tables = emb.embeddingTables;
        expectClose(tables.get(video)!.data as Float32Array, plain.video!.w.flat());
        expectClose(tables.get(user)!.data as Float32Array, plain.user!.w.flat());
      }
      expect(emb.step).toBe(3);
    });
  }

  it('runs calls in call order even when they are not awaited one by one', async () => {
    const run = async (awaitEach: boolean) => {
      const { emb } = fixture({ backend, optimizer: new Adagrad({ learningRate: 0.1 }) });
      const grads = { watched: tensorOf([[1, 2, 3, 4], [0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2]]), favorited: tensorOf([[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1]]), friends: tensorOf([[1, 1], [2, 2], [3, 3], [4, 4]]) };
      const calls: Promise<unknown>[] = [];
      for (let i = 0; i < 3; i++) {
        calls.push(emb.enqueue({ watched: ragged(WATCHED), favorited: ragged(FAVORITED), friends: ragged(FRIENDS) }));
        calls.push(emb.dequeue());
        calls.push(emb.applyGradients(grads));
        if (awaitEach) await Promise.all(calls);
      }
      const results = await Promise.all(calls);
      return { acts: results.filter((_, i) => i % 3 === 1), tables: [...emb.embeddingTables.values()].map((t) => Array.from(t.data as Float32Array)) };
    };
    const sequential = await run(true);
    const queued = await run(false);
    expect(queued.tables).toEqual(sequential.tables);
    expect(queued.acts).toEqual(sequential.acts);
  });

  it('treats a null gradient as zero, with a warning', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      // feature names unique to this test: warnings of other tests may arrive late
      const { featureConfig: fc, video, user } = fixture({ backend });
      const featureConfig = {
        watched: new FeatureConfig({ table: video, name: `watched_${backend.name}_null` }),
        favorited: new FeatureConfig({ table: video, name: `favorited_${backend.name}_null` }),
        friends: fc.friends,
      };
      const emb = new TPUEmbedding({ featureConfig, optimizer: new SGD({ learningRate: 0.1 }), backend });
      await emb.enqueue({ watched: ragged(WATCHED), favorited: ragged(FAVORITED), friends: ragged(FRIENDS) });
      const acts = await emb.dequeue();
      await emb.applyGradients({ watched: null, favorited: null, friends: acts.friends! });
      await new Promise((r) => setImmediate(r));
      const mine = new RegExp(`No gradient passed for feature (watched|favorited)_${backend.name}_null,`);
      expect(warnings.filter((m) => mine.test(m))).toHaveLength(2);
      const tables = emb.embeddingTables;
      expect(Array.from(tables.get(video)!.data as Float32Array)).toEqual(Array.from({ length: 32 }, (_, i) => i));
      // friends: grad = act (not 2*act/4): row 3 <- [6,7] - 0.1*2*[6,7]
      expectClose(rows(tables.get(user)!)[3]!, [6 - 1.2, 7 - 1.4], 1e-6);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('accepts Float32Array gradients and trains sequence features position by position', async () => {
    const { emb, user } = fixture({ backend, optimizer: new SGD({ learningRate: 1 }), friendsSequence: 2 });
    await emb.enqueue({ watched: ragged(WATCHED), favorited: ragged(FAVORITED), friends: ragged(FRIENDS) });
    const acts = await emb.dequeue();
    expect(acts.friends!.shape).toEqual([4, 2, 2]);
    // gradient 1 at (b=1, t=0) -> id 0, (b=1, t=1) -> id 1, (b=3, t=1) -> id 1; id 2 (position 2) is dropped
    const g = new Float32Array(16);
    g.set([1, 1], (1 * 2 + 0) * 2);
    g.set([1, 1], (1 * 2 + 1) * 2);
    g.set([1, 1], (3 * 2 + 1) * 2);
    await emb.applyGradients({ watched: null, favorited: null, friends: g });
    const u = rows(emb.embeddingTables.get(user)!);
    expect(u.slice(0, 4)).toEqual([[-1, 0], [0, 1], [4, 5], [6, 7]]);
  });

  it('uses a table-level optimizer before the global one, and calls a learning-rate function once per step', async () => {
    let calls = 0;
    const lr = () => {
      calls++;
      return 0.5;
    };
    const video = new TableConfig({ vocabularySize: 8, dim: 4, combiner: 'sum', initializer: small, optimizer: new Adagrad({ learningRate: lr }) });
    const user = new TableConfig({ vocabularySize: 16, dim: 2, initializer: small });
    const featureConfig = { watched: new FeatureConfig({ table: video }), favorited: new FeatureConfig({ table: video }), friends: new FeatureConfig({ table: user }) };
    const { ReplicaStrategy } = await import('./strategy.js');
    const emb = new TPUEmbedding({ featureConfig, optimizer: new SGD({ learningRate: 0.1 }), backend, strategy: new ReplicaStrategy({ numHosts: 3 }) });
    expect(emb.tableNames).toEqual(['table_0', 'table_1']);
    const plain: Record<string, PlainTable> = {
      video: plainTable(8, 4, 'sum', Float32Array.from(small([8, 4]) as ArrayLike<number>), { kind: 'adagrad', lr: 0.5, slots: [0.1] }),
      user: plainTable(16, 2, 'mean', Float32Array.from(small([16, 2]) as ArrayLike<number>), { kind: 'sgd', lr: 0.1, slots: [] }),
    };
    for (let step = 1; step <= 2; step++) {
      await emb.enqueue({ watched: ragged(WATCHED), favorited: ragged(FAVORITED), friends: ragged(FRIENDS) });
      const acts = await emb.dequeue();
      const feats: PlainFeature[] = [
        { table: 'video', ids: FAVORITED, weights: null },
        { table: 'user', ids: FRIENDS, weights: null },
        { table: 'video', ids: WATCHED, weights: null },
      ];
      const grads = plainForward(plain, feats).map(lossGradient);
      await emb.applyGradients({ favorited: tensorOf(grads[0]!), friends: tensorOf(grads[1]!), watched: tensorOf(grads[2]!) });
      plainStep(plain, feats, grads);
      expect(acts.watched!.shape).toEqual([4, 4]);
      expect(calls).toBe(step);
    }
    const tables = emb.embeddingTables;
    expectClose(tables.get(video)!.data as Float32Array, plain.video!.w.flat());
    expectClose(tables.get(user)!.data as Float32Array, plain.user!.w.flat());
  });

  it('creates slots with slotVariableCreationFn (constants and whole slot tables)', async () => {
    const seen: unknown[] = [];
    const accum = Float32Array.from({ length: 32 }, (_, i) => 1 + (i % 4)); // video accumulators
    const opt = new Adagrad({
      learningRate: 1,
      slotVariableCreationFn: (table, names, initial) => {
        seen.push([table.name, table.vocabularySize, table.dim, [...names], [...initial]]);
        return { accumulators: table.name === 'video' ? accum : 3 };
      },
    });
    const { emb, video, user } = fixture({ backend, optimizer: opt, numHosts: 3 });
    emb.build();
    expect(seen).toEqual([
      ['video', 8, 4, ['accumulators'], [0.1]],
      ['user', 16, 2, ['accumulators'], [0.1]],
    ]);
    await emb.enqueue({ watched: ragged([[5]]), favorited: ragged([[]]), friends: ragged([[7]]) });
    await emb.dequeue();
    await emb.applyGradients({ watched: tensorOf([[1, 1, 1, 1]]), favorited: null, friends: tensorOf([[1, 2]]) });
    const t = emb.embeddingTables;
    // video row 5: acc = accum[20..23] + 1 = [2,3,4,5]; w -= 1/sqrt(acc)
    expectClose(rows(t.get(video)!)[5]!, [20, 21, 22, 23].map((w, c) => w - 1 / Math.sqrt(accum[20 + c]! + 1)));
    // user row 7: acc = 3 + g²
    expectClose(rows(t.get(user)!)[7]!, [14 - 1 / Math.sqrt(4), 15 - 2 / Math.sqrt(7)]);
  });
});

afterEach(() => undefined);
