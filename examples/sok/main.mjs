// A two-table model trained on 4 devices with a tiny logistic head, dumped, and
// reloaded on 2 devices: the same evaluation loss, then training goes on.
//   node main.mjs
// Table "users": a DynamicVariable of hashed int64 user ids (1-3 per sample, mean).
// Table "items": a static Variable of 1000 item rows (one per sample, sum).
// The dense head (logit = eu . wu + ei . wi + b) is plain JavaScript: SOK trains only the
// embeddings, from the gradients of the loss with respect to the lookup outputs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RaggedTensor, Tensor } from '@embedstack/core';
import * as sok from '@embedstack/sok';

const DIM = 8;
const BATCH = 256;
const STEPS = 60;
const USERS = 1000;
const ITEMS = 1000;

let seed = 12345;
const rand = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32);
const userKey = (u) => BigInt(u) * 1_000_000_007n + 2n ** 40n; // sparse int64 ids
const sigmoid = (x) => 1 / (1 + Math.exp(-x));

/** A batch: user ids (ragged), item ids, labels drawn from an additive rule the model can learn. */
function makeBatch() {
  const users = [];
  const items = [];
  const labels = [];
  for (let i = 0; i < BATCH; i++) {
    const n = 1 + Math.floor(rand() * 3);
    const us = Array.from({ length: n }, () => Math.floor(rand() * USERS));
    const item = Math.floor(rand() * ITEMS);
    const score = us.reduce((a, u) => a + (u % 2 === 0 ? 1.5 : -1.5), 0) / n + (item < ITEMS / 2 ? 1.5 : -1.5);
    users.push(us.map(userKey));
    items.push([item]);
    labels.push(rand() < sigmoid(score) ? 1 : 0);
  }
  return { users: RaggedTensor.fromNestedArray(users), items: RaggedTensor.fromNestedArray(items), labels };
}

function makeModel() {
  return {
    users: new sok.DynamicVariable({ dimension: DIM, initializer: 'normal', name: 'users' }),
    items: new sok.Variable({ shape: [ITEMS, DIM], initializer: 'normal', name: 'items' }),
  };
}

/**
 * Forward (and backward with a tape): the mean log loss; fills the head's gradients when asked.
 * Evaluation (no tape) passes `training: false`: unseen users read their initial row and are not inserted.
 */
async function step(model, head, batch, { tape = null, opt = null } = {}) {
  const [eu, ei] = await sok.lookupSparse([model.users, model.items], [batch.users, batch.items], { combiners: ['mean', 'sum'], tape, training: tape !== null });
  const dEu = new Float32Array(BATCH * DIM);
  const dEi = new Float32Array(BATCH * DIM);
  const gWu = new Float64Array(DIM);
  const gWi = new Float64Array(DIM);
  let gB = 0;
  let loss = 0;
  for (let r = 0; r < BATCH; r++) {
    let logit = head.b;
    for (let c = 0; c < DIM; c++) logit += eu.data[r * DIM + c] * head.wu[c] + ei.data[r * DIM + c] * head.wi[c];
    const p = sigmoid(logit);
    const y = batch.labels[r];
    loss -= y * Math.log(p + 1e-12) + (1 - y) * Math.log(1 - p + 1e-12);
    const d = (p - y) / BATCH;
    gB += d;
    for (let c = 0; c < DIM; c++) {
      gWu[c] += d * eu.data[r * DIM + c];
      gWi[c] += d * ei.data[r * DIM + c];
      dEu[r * DIM + c] = d * head.wu[c];
      dEi[r * DIM + c] = d * head.wi[c];
    }
  }
  if (tape) {
    await opt.applyGradients(tape.gradient([new Tensor(dEu, [BATCH, DIM]), new Tensor(dEi, [BATCH, DIM])]));
    for (let c = 0; c < DIM; c++) {
      head.wu[c] -= 0.5 * gWu[c];
      head.wi[c] -= 0.5 * gWi[c];
    }
    head.b -= 0.5 * gB;
  }
  return loss / BATCH;
}

const dir = mkdtempSync(join(tmpdir(), 'sok-example-'));
try {
  await sok.init({ numDevices: 4 });
  const model = makeModel();
  const head = { wu: Array.from({ length: DIM }, () => 0.5), wi: Array.from({ length: DIM }, () => 0.5), b: 0 };
  const opt = new sok.OptimizerWrapper(new sok.optimizers.Adam({ learningRate: 0.05 }));
  const evalBatch = makeBatch();
  const first = await step(model, head, evalBatch);
  for (let s = 1; s <= STEPS; s++) {
    const loss = await step(model, head, makeBatch(), { tape: new sok.GradientTape(), opt });
    if (s % 10 === 0) console.log(`step ${String(s).padStart(3)} loss ${loss.toFixed(4)}`);
  }
  const trained = await step(model, head, evalBatch);
  console.log(`eval loss on 4 devices: ${first.toFixed(4)} before training, ${trained.toFixed(4)} after; users rows ${await model.users.size()}`);
  if (!(trained < first - 0.05)) throw new Error('the loss did not fall');
  await sok.dump(dir, [model.users, model.items], opt);

  // A fresh start on 2 devices: the same variables (names), loaded from the dump.
  sok.shutdown();
  await sok.init({ numDevices: 2 });
  const reloaded = makeModel();
  const opt2 = new sok.OptimizerWrapper(new sok.optimizers.Adam({ learningRate: 0.05 }));
  await sok.load(dir, [reloaded.users, reloaded.items], opt2);
  const again = await step(reloaded, head, evalBatch);
  console.log(`eval loss after reloading on 2 devices: ${again.toFixed(4)} (optimizer step ${opt2.iterations})`);
  if (Math.abs(again - trained) > 1e-6 * Math.max(1, trained)) throw new Error(`the reloaded model differs: ${again} vs ${trained}`);
  const more = await step(reloaded, head, makeBatch(), { tape: new sok.GradientTape(), opt: opt2 });
  console.log(`one more step on 2 devices: loss ${more.toFixed(4)}`);
  console.log('sok example OK');
} finally {
  rmSync(dir, { recursive: true, force: true });
}
