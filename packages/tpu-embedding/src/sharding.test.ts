import { type EmbeddingBackend, type ResolvedTableOptions, referenceBackend, Tensor } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import { FeatureConfig, TableConfig } from './config.js';
import { Adagrad, Adam } from './optimizers.js';
import { ReplicaStrategy, shardOf, shardRanges } from './strategy.js';
import { expectError, ragged, raggedWeights, testBackends } from '../test/testUtil.js';
import { TPUEmbedding } from './tpuEmbedding.js';

const cases = await testBackends();

describe('row sharding (TF layout)', () => {
  it('gives the first rows % H shards one extra row and skips empty shards; refuses bad counts', async () => {
    expect(shardRanges(8, 3)).toEqual([
      { start: 0, size: 3 },
      { start: 3, size: 3 },
      { start: 6, size: 2 },
    ]);
    expect(shardRanges(16, 3)).toEqual([
      { start: 0, size: 6 },
      { start: 6, size: 5 },
      { start: 11, size: 5 },
    ]);
    expect(shardRanges(2, 4)).toEqual([
      { start: 0, size: 1 },
      { start: 1, size: 1 },
    ]);
    expect(shardRanges(5, 1)).toEqual([{ start: 0, size: 5 }]);
    expect(shardRanges(0, 2)).toEqual([]);
    // more hosts than rows: one row per shard, no entries for the empty hosts
    expect(shardRanges(3, 65_536)).toEqual([
      { start: 0, size: 1 },
      { start: 1, size: 1 },
      { start: 2, size: 1 },
    ]);
    expect(shardRanges(2 ** 40, 65_536).slice(0, 2)).toEqual([
      { start: 0, size: 2 ** 24 },
      { start: 2 ** 24, size: 2 ** 24 },
    ]);
    // a stray huge count is refused (it used to loop 2^53 times)
    await expectError(() => shardRanges(10, 2 ** 53), 'INVALID_ARGUMENT', 'Expected hosts to be an integer in [1, 65536] but received 9007199254740992');
    await expectError(() => shardRanges(10, 65_537), 'INVALID_ARGUMENT', 'Expected hosts to be an integer in [1, 65536]');
    await expectError(() => shardRanges(8, 0), 'INVALID_ARGUMENT', 'Expected hosts to be an integer in [1, 65536] but received 0');
    await expectError(() => shardRanges(-1, 2), 'INVALID_ARGUMENT', 'Expected rows to be an integer >= 0 but received -1');
    await expectError(() => shardRanges('8' as unknown as number, 3), 'INVALID_ARGUMENT', 'received "8"');
    for (const [rows, hosts] of [
      [8, 3],
      [16, 3],
      [2, 4],
      [7, 7],
      [100, 9],
    ] as const) {
      const ranges = shardRanges(rows, hosts);
      for (let r = 0; r < rows; r++) {
        const s = ranges[shardOf(r, rows, hosts)]!;
        expect(r >= s.start && r < s.start + s.size).toBe(true);
      }
    }
  });

  it('stores each table as numHosts static shard tables on the backend', async () => {
    const created: [string, number][] = [];
    const counting: EmbeddingBackend = {
      name: 'counting-reference',
      priority: 0,
      isUsable: () => true,
      capabilities: () => referenceBackend.capabilities(),
      devices: () => referenceBackend.devices(),
      createTable: (o: ResolvedTableOptions) => {
        created.push([o.name, o.vocabularySize]);
        expect(o.kind).toBe('static');
        return referenceBackend.createTable(o);
      },
    };
    const t = new TableConfig({ vocabularySize: 8, dim: 2, name: 't' });
    const emb = new TPUEmbedding({ featureConfig: [new FeatureConfig({ table: t })], strategy: new ReplicaStrategy({ numHosts: 3 }), backend: counting });
    emb.build();
    expect(created).toEqual([
      ['t/shard_0_of_3', 3],
      ['t/shard_1_of_3', 3],
      ['t/shard_2_of_3', 2],
    ]);
  });
});

/** Batch of 8 over video (vocab 8, sqrtn) and user (vocab 13, mean), weighted, three different steps. */
const STEPS = [
  {
    v: [[0], [1, 2], [3], [4, 5, 6], [7], [0, 7], [], [2, 2]],
    vw: [[1], [2, 0.5], [1], [1, 1, 3], [2], [1, -1], [], [1, 2]],
    u: [[12], [0, 1], [5], [6, 7, 8], [11], [], [3, 4], [9, 10]],
  },
  {
    v: [[5], [5, 5], [1], [0], [6, 7], [2], [3], [4]],
    vw: [[1], [1, 1], [2], [0.5], [1, 1], [1], [3], [1]],
    u: [[1], [2], [3], [4], [5], [6], [7], [8, 12, 0]],
  },
  {
    v: [[0, 1, 2, 3, 4, 5, 6, 7], [1], [2], [3], [4], [5], [6], [7]],
    vw: [[1, 1, 1, 1, 1, 1, 1, 1], [1], [1], [1], [1], [1], [1], [1]],
    u: [[0], [0], [0], [0], [12], [12], [12], [12]],
  },
];

async function run(backend: EmbeddingBackend, numReplicas: number, numHosts: number, optimizer: 'adagrad' | 'adam') {
  const video = new TableConfig({ vocabularySize: 8, dim: 4, combiner: 'sqrtn', name: 'video' }); // default truncated normal
  const user = new TableConfig({ vocabularySize: 13, dim: 3, combiner: 'mean', name: 'user' });
  const emb = new TPUEmbedding({
    featureConfig: { v: new FeatureConfig({ table: video }), u: new FeatureConfig({ table: user }), seq: new FeatureConfig({ table: user, maxSequenceLength: 2 }) },
    optimizer: optimizer === 'adagrad' ? new Adagrad({ learningRate: 0.3 }) : new Adam({ learningRate: 0.05, lazyAdam: false }),
    strategy: new ReplicaStrategy({ numReplicas, numHosts }),
    backend,
  });
  const trace: Float32Array[] = [];
  const before = emb.embeddingTables;
  const initial = [before.get(video)!.data as Float32Array, before.get(user)!.data as Float32Array];
  for (const s of STEPS) {
    await emb.enqueue({ v: ragged(s.v), u: ragged(s.u), seq: ragged(s.u) }, { weights: { v: raggedWeights(s.vw), u: null, seq: null } });
    const acts = await emb.dequeue();
    for (const k of ['seq', 'u', 'v'] as const) trace.push(acts[k].data);
    const g = (t: Tensor) => new Tensor(Float32Array.from(t.data as Float32Array, (x, i) => (2 * x) / 8 + 0.01 * (i % 5)), t.shape);
    await emb.applyGradients({ v: g(acts.v!), u: g(acts.u!), seq: g(acts.seq!) });
  }
  const tables = emb.embeddingTables;
  trace.push(tables.get(video)!.data as Float32Array, tables.get(user)!.data as Float32Array);
  return { trace, initial };
}

describe.each(cases)('results do not depend on numReplicas or numHosts ($name backend)', ({ backend, reason }) => {
  if (!backend) {
    it.skip(`skipped: ${reason}`, () => undefined);
    return;
  }
  for (const optimizer of ['adagrad', 'adam'] as const) {
    it(`${optimizer}: numReplicas 1, 2, 4 x numHosts 1, 3 (and 20 > vocabulary) agree exactly`, async () => {
      const { trace: base, initial } = await run(backend, 1, 1, optimizer);
      expect(base.length).toBe(STEPS.length * 3 + 2);
      // Training moved every row of both tables (every row is looked up, and non-lazy Adam updates all rows):
      // layouts that agree must agree on trained parameters, not on untouched initial values.
      for (const [t, dim] of [[0, 4], [1, 3]] as const) {
        const now = base[base.length - 2 + t]!;
        const rows = now.length / dim;
        for (let r = 0; r < rows; r++) {
          const moved = Array.from({ length: dim }, (_, c) => now[r * dim + c] !== initial[t]![r * dim + c]).some(Boolean);
          expect(moved, `table ${t} row ${r} moved`).toBe(true);
        }
      }
      for (const [R, H] of [
        [2, 1],
        [4, 1],
        [1, 3],
        [2, 3],
        [4, 3],
        [4, 20],
      ] as const) {
        const { trace: other } = await run(backend, R, H, optimizer);
        // bit for bit: activations and parameters must not depend on the layout
        other.forEach((arr, i) => expect(Array.from(arr), `R=${R} H=${H} output ${i}`).toEqual(Array.from(base[i]!)));
      }
    });
  }
});
