// A small two-tower click model trained with @embedstack/tfra (TFRA dynamic_embedding):
// ids are not known in advance, so user and item embeddings live in dynamic hash-table
// Variables that grow as new ids show up. Adam via DynamicEmbeddingOptimizer, a
// dot-product logistic head in plain JS. Prints the falling loss, restricts the item
// table to its most recent ids, saves and reloads it. Exits non-zero when a check fails.
//
//   node main.mjs                               (CPU backend; needs `pnpm build`)
//   EMBEDSTACK_BACKEND=reference node main.mjs  (pure TypeScript reference backend)

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as de from '@embedstack/tfra';

const DIM = 8;
const BATCH = 128;
const STEPS = 80;

function fail(message) {
  console.error(`tfra example FAILED: ${message}`);
  process.exit(1);
}

// Synthetic traffic: sparse 64-bit ids hashed from (cluster, index); a user clicks an
// item of its own hidden cluster 90% of the time, others 10%.
let seed = 2024;
const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
const idOf = (kind, cluster, n) => (BigInt(kind) << 48n) | (BigInt(cluster) << 32n) | BigInt(n * 7919);
function makeBatch() {
  const users = new BigInt64Array(BATCH);
  const items = new BigInt64Array(BATCH);
  const labels = new Float32Array(BATCH);
  for (let b = 0; b < BATCH; b++) {
    const uc = Math.floor(rand() * 4);
    const ic = Math.floor(rand() * 4);
    users[b] = idOf(1, uc, Math.floor(rand() * 40));
    items[b] = idOf(2, ic, Math.floor(rand() * 25));
    labels[b] = rand() < (uc === ic ? 0.9 : 0.1) ? 1 : 0;
  }
  return { users, items, labels };
}

const users = de.getVariable('user_emb', { dim: DIM, devices: ['cpu:0', 'cpu:1'], initializer: de.initializers.normal(0, 0.1) });
const items = de.getVariable('item_emb', {
  dim: DIM,
  initializer: de.initializers.normal(0, 0.1),
  restrictPolicy: de.TimestampRestrictPolicy,
});
const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.Adam({ learningRate: 0.1 }));

const losses = [];
for (let step = 1; step <= STEPS; step++) {
  const { users: u, items: i, labels } = makeBatch();
  const [ue, ut] = await de.embeddingLookup(users, u, { name: 'user', returnTrainable: true });
  const [ie, it] = await de.embeddingLookup(items, i, { name: 'item', returnTrainable: true });
  const gu = new Float32Array(BATCH * DIM);
  const gi = new Float32Array(BATCH * DIM);
  let loss = 0;
  for (let b = 0; b < BATCH; b++) {
    let logit = 0;
    for (let c = 0; c < DIM; c++) logit += ue.data[b * DIM + c] * ie.data[b * DIM + c];
    const p = 1 / (1 + Math.exp(-logit));
    loss -= labels[b] ? Math.log(p + 1e-7) : Math.log(1 - p + 1e-7);
    const d = (p - labels[b]) / BATCH;
    for (let c = 0; c < DIM; c++) {
      gu[b * DIM + c] = d * ie.data[b * DIM + c];
      gi[b * DIM + c] = d * ue.data[b * DIM + c];
    }
  }
  await opt.applyGradients([
    [gu, ut],
    [gi, it],
  ]);
  losses.push(loss / BATCH);
  if (step % 10 === 0) console.log(`step ${String(step).padStart(3)}  loss ${(loss / BATCH).toFixed(4)}  users ${await users.size()}  items ${await items.size()}`);
}

const mean = (a) => a.reduce((x, y) => x + y, 0) / a.length;
const first = mean(losses.slice(0, 10));
const last = mean(losses.slice(-10));
if (!(last < first * 0.8)) fail(`loss did not fall: first 10 steps ${first.toFixed(4)}, last 10 ${last.toFixed(4)}`);
if (opt.getSlotNames().join() !== 'm,v' || users.getSlotVariables(opt).length !== 2) fail('Adam slots missing');

// Keep the 60 most recently trained items.
const removed = await items.restrict(60);
if ((await items.size()) !== 60) fail(`restrict left ${await items.size()} items`);
console.log(`restricted item_emb: removed ${removed}, kept ${await items.size()}`);

// Save with 2 shards, reload into 3 shards: same embeddings.
const dir = await mkdtemp(join(tmpdir(), 'tfra-example-'));
try {
  await users.saveToFileSystem(dir);
  const reloaded = new de.Variable({ name: 'user_emb', dim: DIM, devices: ['a', 'b', 'c'] });
  await reloaded.loadFromFileSystem(dir);
  const [keys, values] = await users.export();
  const again = await reloaded.lookup(keys);
  if (again.data.some((x, j) => x !== values.data[j])) fail('reloaded embeddings differ');
  console.log(`saved and reloaded ${keys.length} user embeddings (2 -> 3 shards)`);
} finally {
  await rm(dir, { recursive: true, force: true });
}
console.log(`tfra example OK: loss ${first.toFixed(4)} -> ${last.toFixed(4)}`);
