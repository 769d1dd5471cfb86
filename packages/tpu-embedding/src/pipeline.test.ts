import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tensor } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import { Adagrad } from './optimizers.js';
import { lossGradient, type PlainFeature, plainForward, plainStep, plainTable, type PlainTable } from '../test/plainModel.js';
import { expectClose, FAVORITED, fixture, FRIENDS, iota, ragged, testBackends, WATCHED } from '../test/testUtil.js';

const cases = await testBackends();

const STEPS = [
  { watched: WATCHED, favorited: FAVORITED, friends: FRIENDS },
  { watched: [[2], [0], [1, 3], [0]], favorited: [[0], [0], [4], [1]], friends: [[3], [1], [0], [2]] },
  { watched: WATCHED, favorited: FAVORITED, friends: FRIENDS },
];

const tensorOf = (a: number[][]) => new Tensor(Float32Array.from(a.flat()), [a.length, a[0]!.length]);

function plainTables(): Record<string, PlainTable> {
  const opt = { kind: 'adagrad' as const, lr: 0.5, slots: [0.1] };
  return {
    video: plainTable(8, 4, 'sum', Float32Array.from(iota([8, 4]) as ArrayLike<number>), opt),
    user: plainTable(16, 2, 'mean', Float32Array.from(iota([16, 2]) as ArrayLike<number>), opt),
  };
}

describe.each(cases)('pipelineExecutionWithTensorCore on the $name backend', ({ backend, reason }) => {
  if (!backend) {
    it.skip(`skipped: ${reason}`, () => undefined);
    return;
  }

  for (const pipeline of [false, true]) {
    it(`${pipeline ? 'applies step t after the lookups of step t+1' : 'applies step t before the lookups of step t+1'}`, async () => {
      const { emb, video, user } = fixture({ backend, optimizer: new Adagrad({ learningRate: 0.5 }), pipeline });
      const plain = plainTables();
      let pending: { feats: PlainFeature[]; grads: number[][][] } | null = null;
      const seen: Float32Array[] = [];
      for (const s of STEPS) {
        const feats: PlainFeature[] = [
          { table: 'video', ids: s.favorited, weights: null },
          { table: 'user', ids: s.friends, weights: null },
          { table: 'video', ids: s.watched, weights: null },
        ];
        await emb.enqueue({ watched: ragged(s.watched), favorited: ragged(s.favorited), friends: ragged(s.friends) });
        const acts = await emb.dequeue();
        const expected = plainForward(plain, feats);
        if (pending) plainStep(plain, pending.feats, pending.grads); // the late update lands after this step's lookups
        expectClose(acts.favorited!.data as Float32Array, expected[0]!.flat());
        expectClose(acts.friends!.data as Float32Array, expected[1]!.flat());
        expectClose(acts.watched!.data as Float32Array, expected[2]!.flat());
        seen.push(acts.watched!.data as Float32Array);
        const grads = expected.map(lossGradient);
        await emb.applyGradients({ favorited: tensorOf(grads[0]!), friends: tensorOf(grads[1]!), watched: tensorOf(grads[2]!) });
        if (pipeline) pending = { feats, grads };
        else plainStep(plain, feats, grads);
      }
      // steps 1 and 3 share their inputs: step 3 saw updates 1 (pipelined) or 1 and 2 (not)
      expect(Array.from(seen[2]!)).not.toEqual(Array.from(seen[0]!));
      if (pending) plainStep(plain, pending.feats, pending.grads);
      const tables = emb.embeddingTables; // applies the pending update
      expectClose(tables.get(video)!.data as Float32Array, plain.video!.w.flat());
      expectClose(tables.get(user)!.data as Float32Array, plain.user!.w.flat());
    });
  }

  it('step 2 of a pipelined run sees the tables before update 1; save applies the pending update, restore drops it', async () => {
    const root = await mkdtemp(join(tmpdir(), 'tpu-pipeline-'));
    try {
      const { emb } = fixture({ backend, optimizer: new Adagrad({ learningRate: 0.5 }), pipeline: true });
      const inputs = () => ({ watched: ragged(WATCHED), favorited: ragged(FAVORITED), friends: ragged(FRIENDS) });
      await emb.enqueue(inputs());
      const a1 = await emb.dequeue();
      await emb.applyGradients(a1);
      await emb.enqueue(inputs());
      const a2 = await emb.dequeue();
      expect(Array.from(a2.watched!.data as Float32Array)).toEqual(Array.from(a1.watched!.data as Float32Array));
      await emb.applyGradients(a2); // pending
      await emb.save(join(root, 'ckpt')); // applies update 2 first
      const other = fixture({ backend, optimizer: new Adagrad({ learningRate: 0.5 }), pipeline: true });
      await other.emb.restore(join(root, 'ckpt'));
      const saved = [...other.emb.embeddingTables.values()].map((t) => Array.from(t.data as Float32Array));
      expect([...emb.embeddingTables.values()].map((t) => Array.from(t.data as Float32Array))).toEqual(saved);
      // a pending update is dropped by restore
      await emb.enqueue(inputs());
      const a3 = await emb.dequeue();
      await emb.applyGradients(a3);
      await emb.restore(join(root, 'ckpt'));
      expect([...emb.embeddingTables.values()].map((t) => Array.from(t.data as Float32Array))).toEqual(saved);
      expect(emb.step).toBe(2);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
