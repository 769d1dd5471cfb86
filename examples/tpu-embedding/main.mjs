// A small two-tower click model trained with @embedstack/tpu-embedding:
// synthetic data, Adagrad on the embeddings, a dot-product logistic head in plain JS.
// Trains a few steps (printing the falling loss), saves, restores into a fresh
// TPUEmbedding, then serves with servingEmbeddingLookup. Exits non-zero when a check fails.
//
//   node main.mjs                               (CPU backend; needs `pnpm build`)
//   EMBEDSTACK_BACKEND=reference node main.mjs  (pure TypeScript reference backend)

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RaggedTensor, Tensor } from '@embedstack/core';
import {
  Adagrad,
  FeatureConfig,
  ReplicaStrategy,
  servingEmbeddingLookup,
  TableConfig,
  TPUEmbedding,
} from '@embedstack/tpu-embedding';

const USERS = 50;
const ITEMS = 40;
const DIM = 8;
const BATCH = 64;
const STEPS = 80;

function fail(message) {
  console.error(`tpu-embedding example FAILED: ${message}`);
  process.exit(1);
}

// Deterministic synthetic data: users and items belong to one of 4 hidden clusters;
// a user clicks an item of its own cluster 90% of the time, others 10%.
let seed = 12345;
const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
const cluster = (id) => id % 4;
function makeBatch() {
  const user = new Int32Array(BATCH);
  const item = new Int32Array(BATCH);
  const history = [];
  const label = new Float32Array(BATCH);
  for (let b = 0; b < BATCH; b++) {
    user[b] = Math.floor(rand() * USERS);
    item[b] = Math.floor(rand() * ITEMS);
    const n = 1 + Math.floor(rand() * 4); // items clicked before: of the user's cluster
    history.push(Array.from({ length: n }, () => Math.floor(rand() * (ITEMS / 4)) * 4 + cluster(user[b])));
    const same = cluster(user[b]) === cluster(item[b]);
    label[b] = rand() < (same ? 0.9 : 0.1) ? 1 : 0;
  }
  return { features: { user: new Tensor(user), history: RaggedTensor.fromNestedArray(history), item: new Tensor(item) }, label };
}

const userTable = new TableConfig({ vocabularySize: USERS, dim: DIM, name: 'user' });
const itemTable = new TableConfig({ vocabularySize: ITEMS, dim: DIM, name: 'item', combiner: 'mean' });
const featureConfig = {
  user: new FeatureConfig({ table: userTable }),
  history: new FeatureConfig({ table: itemTable }), // mean of the clicked items
  item: new FeatureConfig({ table: itemTable }), // the candidate
};
const make = () =>
  new TPUEmbedding({
    featureConfig,
    optimizer: new Adagrad({ learningRate: 1.0 }),
    strategy: new ReplicaStrategy({ numReplicas: 2, numHosts: 2 }),
  });

/** logit_b = bias + (user_b + history_b) . item_b ; returns losses and the gradients of the mean BCE. */
function head(acts, label, bias) {
  const u = acts.user.data;
  const h = acts.history.data;
  const it = acts.item.data;
  const gu = new Float32Array(u.length);
  const gh = new Float32Array(h.length);
  const gi = new Float32Array(it.length);
  let loss = 0;
  let gbias = 0;
  let correct = 0;
  for (let b = 0; b < BATCH; b++) {
    let z = bias;
    for (let c = 0; c < DIM; c++) z += (u[b * DIM + c] + h[b * DIM + c]) * it[b * DIM + c];
    const p = 1 / (1 + Math.exp(-z));
    const y = label[b];
    loss -= y * Math.log(p + 1e-7) + (1 - y) * Math.log(1 - p + 1e-7);
    if ((p > 0.5) === (y === 1)) correct++;
    const d = (p - y) / BATCH;
    gbias += d;
    for (let c = 0; c < DIM; c++) {
      gu[b * DIM + c] = d * it[b * DIM + c];
      gh[b * DIM + c] = d * it[b * DIM + c];
      gi[b * DIM + c] = d * (u[b * DIM + c] + h[b * DIM + c]);
    }
  }
  const shape = [BATCH, DIM];
  return {
    loss: loss / BATCH,
    accuracy: correct / BATCH,
    gbias,
    grads: { user: new Tensor(gu, shape), history: new Tensor(gh, shape), item: new Tensor(gi, shape) },
  };
}

const emb = make();
emb.build(BATCH / 2); // per-replica batch: 2 replicas x 32 = 64 examples per step
let bias = 0;
const losses = [];
for (let step = 1; step <= STEPS; step++) {
  const { features, label } = makeBatch();
  await emb.enqueue(features, { training: true });
  const acts = await emb.dequeue();
  const h = head(acts, label, bias);
  bias -= 0.5 * h.gbias;
  await emb.applyGradients(h.grads);
  losses.push(h.loss);
  if (step % 10 === 0) {
    const avg = losses.slice(-10).reduce((a, b) => a + b, 0) / 10;
    console.log(`step ${String(step).padStart(3)}  loss ${avg.toFixed(4)}  accuracy ${h.accuracy.toFixed(2)}`);
  }
}
const first = losses.slice(0, 10).reduce((a, b) => a + b, 0) / 10;
const last = losses.slice(-10).reduce((a, b) => a + b, 0) / 10;
if (!(last < first * 0.9)) fail(`the loss did not fall enough (${first.toFixed(4)} -> ${last.toFixed(4)})`);

// Save, restore into a fresh TPUEmbedding, and check every parameter came back.
const dir = await mkdtemp(join(tmpdir(), 'tpu-embedding-example-'));
try {
  await emb.save(join(dir, 'checkpoint'));
  const restored = make();
  await restored.restore(join(dir, 'checkpoint'));
  const a = emb.embeddingTables;
  const b = restored.embeddingTables;
  for (const [config, t] of a) {
    const u = b.get(config);
    if (!u || u.data.length !== t.data.length || u.data.some((v, i) => v !== t.data[i])) fail(`table ${config.name} differs after restore`);
  }
  console.log(`saved and restored ${a.size} tables (step ${restored.step})`);

  // Serve a held-out batch on the host from the restored tables.
  const { features, label } = makeBatch();
  const served = await servingEmbeddingLookup(features, null, b, featureConfig);
  const h = head(served, label, bias);
  // the same batch through the training path must give the same activations
  await restored.enqueue(features, { training: false });
  const acts = await restored.dequeue();
  for (const k of ['user', 'history', 'item']) {
    if (acts[k].data.some((v, i) => Math.abs(v - served[k].data[i]) > 1e-5)) fail(`serving and dequeue differ for ${k}`);
  }
  console.log(`served a held-out batch: loss ${h.loss.toFixed(4)}  accuracy ${h.accuracy.toFixed(2)}`);
  if (!(h.accuracy > 0.6)) fail(`held-out accuracy too low (${h.accuracy})`);
  emb.dispose();
  restored.dispose();
} finally {
  await rm(dir, { recursive: true, force: true });
}
console.log(`tpu-embedding example OK: loss ${first.toFixed(4)} -> ${last.toFixed(4)}`);
