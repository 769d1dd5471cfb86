// Seeded random configurations against the plain re-implementation: combiners, weights,
// sparse/ragged inputs, replicas and hosts, two Adagrad steps.
import { Tensor } from '@embedstack/core';
import { describe, it } from 'vitest';
import { FeatureConfig, TableConfig } from './config.js';
import type { FeatureInput, FeatureWeight } from './tpuEmbedding.js';
import { Adagrad } from './optimizers.js';
import { lossGradient, type PlainFeature, plainForward, plainStep, plainTable, type PlainTable } from '../test/plainModel.js';
import { ReplicaStrategy } from './strategy.js';
import { expectClose, ragged, raggedWeights, sparse, sparseWeights, testBackends } from '../test/testUtil.js';
import { TPUEmbedding } from './tpuEmbedding.js';

const cases = await testBackends();
const COMBINERS = ['sum', 'mean', 'sqrtn'] as const;

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

describe.each(cases)('random configurations on the $name backend', ({ backend, reason }) => {
  if (!backend) {
    it.skip(`skipped: ${reason}`, () => undefined);
    return;
  }
  for (let trial = 0; trial < 12; trial++) {
    it(`trial ${trial}`, async () => {
      const rnd = lcg(1000 + trial);
      const int = (n: number) => Math.floor(rnd() * n);
      const R = [1, 2, 3][int(3)]!;
      const H = 1 + int(5);
      const batch = R * (1 + int(3));
      const nTables = 1 + int(3);
      const tables = Array.from({ length: nTables }, (_, t) => {
        const vocab = 1 + int(12);
        const dim = 1 + int(5);
        const init = Float32Array.from({ length: vocab * dim }, () => rnd() * 2 - 1);
        const combiner = COMBINERS[int(3)]!;
        return { name: `t${t}`, vocab, dim, init, combiner, config: new TableConfig({ vocabularySize: vocab, dim, combiner, name: `t${t}`, initializer: () => init }) };
      });
      const nFeatures = nTables + int(3);
      const features = Array.from({ length: nFeatures }, (_, f) => ({ key: `f${f}`, table: tables[f < nTables ? f : int(nTables)]! }));
      const featureConfig = Object.fromEntries(features.map((f) => [f.key, new FeatureConfig({ table: f.table.config })]));
      const emb = new TPUEmbedding({ featureConfig, optimizer: new Adagrad({ learningRate: 0.2 }), strategy: new ReplicaStrategy({ numReplicas: R, numHosts: H }), backend });
      const opt = { kind: 'adagrad' as const, lr: 0.2, slots: [0.1] };
      const plain: Record<string, PlainTable> = Object.fromEntries(tables.map((t) => [t.name, plainTable(t.vocab, t.dim, t.combiner, t.init, opt)]));
      const useSparse = rnd() < 0.5;
      for (let step = 0; step < 2; step++) {
        const inputs: Record<string, FeatureInput> = {};
        const weights: Record<string, FeatureWeight> = {};
        const feats: PlainFeature[] = [];
        for (const f of [...features].sort((a, b) => (a.key < b.key ? -1 : 1))) {
          const ids = Array.from({ length: batch }, () => Array.from({ length: int(4) }, () => int(f.table.vocab)));
          const w = rnd() < 0.5 ? ids.map((r) => r.map(() => Math.round((rnd() * 4 - 1) * 4) / 4)) : null;
          inputs[f.key] = useSparse ? sparse(ids) : ragged(ids);
          weights[f.key] = w ? (useSparse ? sparseWeights(w) : raggedWeights(w)) : null;
          feats.push({ table: f.table.name, ids, weights: w });
        }
        await emb.enqueue(inputs, { weights });
        const acts = await emb.dequeue();
        const expected = plainForward(plain, feats);
        const keys = Object.keys(inputs);
        keys.forEach((k, i) => expectClose(acts[k]!.data as Float32Array, expected[i]!.flat(), 1e-5));
        const grads = expected.map(lossGradient);
        await emb.applyGradients(Object.fromEntries(keys.map((k, i) => [k, new Tensor(Float32Array.from(grads[i]!.flat()), acts[k]!.shape)])));
        plainStep(plain, feats, grads);
      }
      const snap = emb.embeddingTables;
      for (const t of tables) expectClose(snap.get(t.config)!.data as Float32Array, plain[t.name]!.w.flat(), 1e-5);
    });
  }
});
