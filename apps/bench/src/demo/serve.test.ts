// Why the demo's served AUC equals its trained AUC: serving returns the exported rows, bit for bit,
// in the layer's feature order. Checked here against the rows written by hand, not against training.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import '@embedstack/cpu-backend';
import { FeatureConfig, SGD, TableConfig, TPUEmbedding } from '@embedstack/tpu-embedding';
import { describe, expect, it } from 'vitest';
import { demoFailures } from './run.js';
import { exportForServing, serve } from './serve.js';

const VOCAB = 40;
const DIM = 3;

/** Row r of table f: [1000 f + 10 r, 1000 f + 10 r + 1, 1000 f + 10 r + 2]. */
const value = (f: number, r: number, j: number) => 1000 * f + 10 * r + j;

describe('the demo serving path', () => {
  it('HPS (L1 cache of 25%, L2, RocksDB L3) serves the exported rows, features side by side per example, in requests of 3', async () => {
    const configs = ['C01', 'C02'].map(
      (name, f) => new TableConfig({ vocabularySize: VOCAB, dim: DIM, name, initializer: (s) => Float32Array.from({ length: s[0] * s[1] }, (_, i) => value(f, Math.floor(i / DIM), i % DIM)) }),
    );
    const emb = new TPUEmbedding({ featureConfig: Object.fromEntries(configs.map((t) => [t.name, new FeatureConfig({ table: t })])), optimizer: new SGD({ learningRate: 1 }) });
    const dir = mkdtempSync(join(tmpdir(), 'embedstack-demo-serve-'));
    try {
      const o = { dir, cacheFraction: 0.25, requestSize: 3 };
      const ps = await exportForServing(emb, configs, o, o.requestSize);
      const ids = [Int32Array.of(0, 39, 7, 7, 12, 39, 1), Int32Array.of(5, 5, 0, 38, 21, 2, 39)];
      const n = ids[0]!.length;
      const served = await serve(ps, { ids, labels: new Float32Array(n), truth: new Float64Array(n) }, DIM, o);
      const expected = new Float32Array(n * 2 * DIM);
      for (let i = 0; i < n; i++) for (let f = 0; f < 2; f++) for (let j = 0; j < DIM; j++) expected[(i * 2 + f) * DIM + j] = value(f, ids[f]![i]!, j);
      expect(Array.from(served.activations)).toEqual(Array.from(expected));
      expect(served.latencies).toHaveLength(3); // 7 examples: 3 + 3 + 1
    } finally {
      emb.dispose();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the demo verdict', () => {
  const epochs = [
    { epoch: 1, trainLoss: 0.6, testLoss: 0.58, testAuc: 0.7, seconds: 1 },
    { epoch: 2, trainLoss: 0.55, testLoss: 0.56, testAuc: 0.74, seconds: 1 },
  ];
  it('passes when serving gives the trained predictions and training learned', () => {
    expect(demoFailures({ epochs, trainedAuc: 0.74, servedAuc: 0.74, maxPredictionGap: 0 })).toEqual([]);
  });
  it('fails a serving gap or another AUC', () => {
    expect(demoFailures({ epochs, trainedAuc: 0.74, servedAuc: 0.74, maxPredictionGap: 1e-3 })).toEqual([
      'serving did not return the trained rows (served AUC 0.74, trained 0.74, largest prediction gap 0.001)',
    ]);
    expect(demoFailures({ epochs, trainedAuc: 0.74, servedAuc: 0.5, maxPredictionGap: 0 })).toHaveLength(1);
    expect(demoFailures({ epochs, trainedAuc: 0.74, servedAuc: 0.74, maxPredictionGap: NaN })).toHaveLength(1);
  });
  it('says a test set of one class has no AUC, instead of blaming serving', () => {
    const nan = epochs.map((e) => ({ ...e, testAuc: NaN }));
    expect(demoFailures({ epochs: nan, trainedAuc: NaN, servedAuc: NaN, maxPredictionGap: 0 })).toEqual(['the test set holds one class only, so it has no AUC: raise --test']);
  });
  it('fails a final AUC near 0.5 and a test loss that did not fall', () => {
    const flat = [epochs[0]!, { ...epochs[1]!, testLoss: 0.59, testAuc: 0.52 }];
    expect(demoFailures({ epochs: flat, trainedAuc: 0.52, servedAuc: 0.52, maxPredictionGap: 0 })).toEqual(['the final AUC 0.5200 is not well above 0.5', 'the test log-loss did not fall']);
  });
});
