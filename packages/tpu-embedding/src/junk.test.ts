// Junk input at every public function, constructor and method of tpu-embedding.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll } from 'vitest';
import { referenceBackend, Tensor } from '@embedstack/core';
import { describeJunkSuite, junkTarget } from '@embedstack/core/testing';
import { iota } from '../test/testUtil.js';
import * as tpu from './index.js';

const cwd = process.cwd();
process.chdir(mkdtempSync(`${tmpdir()}/tpu-junk-`));
afterAll(() => process.chdir(cwd)); // the worker runs other files after this one

function model() {
  const t = new tpu.TableConfig({ vocabularySize: 6, dim: 2, combiner: 'sum', name: 't', initializer: iota });
  const featureConfig = { f: new tpu.FeatureConfig({ table: t }), g: new tpu.FeatureConfig({ table: t, maxSequenceLength: 2 }) };
  return { t, featureConfig, emb: new tpu.TPUEmbedding({ featureConfig, optimizer: new tpu.Adagrad({ learningRate: 0.1 }), backend: referenceBackend }) };
}

const ex = model();
const tables = new Map([[ex.t, new Tensor(Float32Array.from({ length: 12 }, (_, i) => i), [6, 2])]]);

describeJunkSuite({
  name: '@embedstack/tpu-embedding',
  examples: {
    TableConfig: [[{ vocabularySize: 4, dim: 2, combiner: 'sqrtn', name: 'x' }]],
    FeatureConfig: [[{ table: ex.t, maxSequenceLength: 2, outputShape: [2] }]],
    TPUEmbedding: [[{ featureConfig: ex.featureConfig, backend: referenceBackend }]],
    servingEmbeddingLookup: [[{ f: [1, 2], g: [[3, 4], [5, 0]] }, null, tables, ex.featureConfig]],
    cpuEmbeddingLookup: [[{ f: [1, 2], g: [[3, 4], [5, 0]] }, null, tables, ex.featureConfig]],
    shardRanges: [[10, 3]],
    ReplicaStrategy: [[{ numReplicas: 2, numHosts: 3 }]],
    Adam: [[{ learningRate: 0.1, lazyAdam: false, useGradientAccumulation: true }]],
    FTRL: [[{ l1: 0.1 }]],
  },
  exports: tpu,
  runs: Number(process.env.JUNK_RUNS ?? 40),
  targets: [
    junkTarget({
      name: 'TPUEmbedding',
      make: async () => {
        const { emb } = model();
        await emb.enqueue({ f: [1, 2], g: [[3, 4], [5, 0]] });
        return emb;
      },
      state: (emb) => ({ step: emb.step, tables: [...emb.embeddingTables.values()].map((t) => Array.from(t.data)) }),
      examples: {
        enqueue: [[{ f: [1, 2], g: [[3, 4], [5, 0]] }, { training: true }]],
        dequeue: [[{ out: { f: new Float32Array(4), g: new Float32Array(8) } }]],
        build: [[2]],
      },
      // dispose takes no arguments; save / restore are tested with real directories elsewhere
      skip: ['dispose', 'save', 'restore'],
      dispose: (emb) => emb.dispose(),
    }),
  ],
});
