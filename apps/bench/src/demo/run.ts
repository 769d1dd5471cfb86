/**
 * `pnpm demo`, end to end: a synthetic click log with a planted signal; embeddings
 * trained with the TPU-embedding API and Adagrad under a TensorFlow.js logistic head;
 * a checkpoint, restored; an export in HugeCTR's layout; HPS serving it (L1 cache,
 * in-process L2, RocksDB L3) through its LookupLayer; the head's predictions on the
 * served rows, which must give the trained model's AUC.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { SingleBar } from 'cli-progress';
import { lineChart, writeChart, type Chart } from '../charts.js';
import { ClickLog, sliceBatch } from './data.js';
import { auc, logLoss, quantile } from './metrics.js';
import { exportForServing, serve } from './serve.js';
import { ClickModel, createEmbedding } from './train.js';
import { DEMO_FEATURES } from './limits.js';

export interface DemoOptions {
  seed: number;
  epochs: number;
  trainExamples: number;
  testExamples: number;
  batchSize: number;
  vocab: number;
  dim: number;
  /** L1 cache as a fraction of each table's rows. */
  cacheFraction: number;
  requestSize: number;
  /** Adagrad learning rate of the embeddings. */
  embeddingRate: number;
  /** Adam learning rate of the head. */
  headRate: number;
  /** Folder for the charts, or null. */
  plot: string | null;
  /** Folder to keep the checkpoint, model files and RocksDB in (a temporary one, removed, when null). */
  out: string | null;
  /** Show a progress bar (a terminal). */
  bars: boolean;
}

export interface EpochFigures {
  epoch: number;
  trainLoss: number;
  testLoss: number;
  testAuc: number;
  seconds: number;
}

export interface DemoResult {
  epochs: EpochFigures[];
  /** The hidden model's own AUC on the test set: the best any model can reach. */
  ceilingAuc: number;
  trainedAuc: number;
  servedAuc: number;
  /** Largest |served - trained| click probability over the test examples. */
  maxPredictionGap: number;
  l1HitRate: number;
  keysPerSecond: number;
  latencyMs: { p50: number; p99: number };
  charts: string[];
}

const fmt = (x: number, d = 4) => x.toFixed(d);

/**
 * What the run's figures say went wrong (none: the demo passed): serving must return the trained rows
 * (the same predictions, so the same AUC), and training must have learned (final AUC well above 0.5, a
 * falling test log-loss). A test set of one class has no AUC: said as such, not as a serving failure.
 */
export function demoFailures(r: Pick<DemoResult, 'epochs' | 'trainedAuc' | 'servedAuc' | 'maxPredictionGap'>): string[] {
  const failures: string[] = [];
  if (Number.isNaN(r.trainedAuc)) {
    failures.push('the test set holds one class only, so it has no AUC: raise --test');
  }
  if (!(r.maxPredictionGap <= 1e-6) || !Object.is(r.servedAuc, r.trainedAuc)) {
    failures.push(`serving did not return the trained rows (served AUC ${r.servedAuc}, trained ${r.trainedAuc}, largest prediction gap ${r.maxPredictionGap})`);
  }
  const last = r.epochs.at(-1)!;
  if (!Number.isNaN(r.trainedAuc) && !(last.testAuc > 0.6)) failures.push(`the final AUC ${last.testAuc.toFixed(4)} is not well above 0.5`);
  if (r.epochs.length > 1 && !(last.testLoss < r.epochs[0]!.testLoss)) failures.push('the test log-loss did not fall');
  return failures;
}

export async function runDemo(o: DemoOptions, log: (line: string) => void = console.log): Promise<DemoResult> {
  const features = DEMO_FEATURES;
  const t0 = performance.now();
  const data = new ClickLog({ features, vocab: o.vocab, seed: o.seed });
  const train = data.next(o.trainExamples);
  const test = data.next(o.testExamples);
  const ceilingAuc = auc(test.truth, test.labels);
  log(`click log: ${o.trainExamples} training + ${o.testExamples} test examples, ${features} features x ${o.vocab} ids (Zipf 1.1), ` +
    `click rate ${fmt(train.labels.reduce((s, y) => s + y, 0) / o.trainExamples, 3)}; the hidden model's AUC ${fmt(ceilingAuc)} ` +
    `(${((performance.now() - t0) / 1000).toFixed(1)} s)`);

  const model = new ClickModel({ features, vocab: o.vocab, dim: o.dim, embeddingRate: o.embeddingRate, headRate: o.headRate, batchSize: o.batchSize, seed: o.seed });
  const work = o.out ?? mkdtempSync(join(os.tmpdir(), 'embedstack-demo-'));
  mkdirSync(work, { recursive: true });
  try {
    const epochs: EpochFigures[] = [];
    const steps = Math.floor(o.trainExamples / o.batchSize); // whole batches (drop_remainder)
    if (steps < 1) throw new Error(`--train ${o.trainExamples} is less than one batch of ${o.batchSize}`);
    const used = steps * o.batchSize;
    log(`training: ${features} tables of ${o.vocab} x ${o.dim} (TPU embedding, Adagrad, native) + a logistic head (tfjs, Adam), batch ${o.batchSize}`);
    for (let e = 1; e <= o.epochs; e++) {
      const started = performance.now();
      const bar = o.bars ? new SingleBar({ format: `epoch ${e}/${o.epochs} [{bar}] {value}/{total} steps | loss {loss} | ETA {eta}s`, hideCursor: true, clearOnComplete: true, stream: process.stderr }) : null;
      bar?.start(steps, 0, { loss: '-' });
      let lossSum = 0;
      for (let s = 0; s < steps; s++) {
        const batch = sliceBatch(train, s * o.batchSize, (s + 1) * o.batchSize);
        lossSum += (await model.step(batch)) * batch.labels.length;
        bar?.update(s + 1, { loss: fmt(lossSum / ((s + 1) * o.batchSize)) });
      }
      bar?.stop();
      const ev = await model.evaluate(test);
      const fig = { epoch: e, trainLoss: lossSum / used, testLoss: ev.loss, testAuc: ev.auc, seconds: (performance.now() - started) / 1000 };
      epochs.push(fig);
      log(`epoch ${e}/${o.epochs}: train log-loss ${fmt(fig.trainLoss)}, test log-loss ${fmt(fig.testLoss)}, test AUC ${fmt(fig.testAuc)} (${fig.seconds.toFixed(1)} s)`);
    }
    const trained = await model.evaluate(test);

    // Checkpoint, then restore into a fresh TPUEmbedding: serving reads the restored tables.
    const checkpoint = join(work, 'checkpoint');
    await model.embedding.save(checkpoint);
    const restored = createEmbedding(model.configs, o.embeddingRate);
    await restored.restore(checkpoint);
    log(`checkpoint: step ${model.embedding.step} saved to ${checkpoint} and restored (step ${restored.step})`);

    const serveOptions = { dir: join(work, 'serving'), cacheFraction: o.cacheFraction, requestSize: o.requestSize };
    const psConfigFile = await exportForServing(restored, model.configs, serveOptions, o.requestSize);
    restored.dispose();
    log(`export: HugeCTR key/emb_vector files + ${psConfigFile} (L1 ${Math.round(o.cacheFraction * 100)}% of rows per table, in-process L2, RocksDB L3)`);

    const served = await serve(psConfigFile, test, o.dim, serveOptions);
    const p = model.predictFromActivations(served.activations, o.testExamples);
    let gap = 0;
    for (let i = 0; i < p.length; i++) gap = Math.max(gap, Math.abs(p[i]! - trained.predictions[i]!));
    const servedAuc = auc(p, test.labels);
    const lat = { p50: quantile(served.latencies, 0.5), p99: quantile(served.latencies, 0.99) };
    const keys = o.testExamples * features;
    log(`serving: ${served.latencies.length} requests of ${Math.min(o.requestSize, o.testExamples)} examples (${keys} lookups) through hps.LookupLayer: ` +
      `${(served.keysPerSecond / 1e6).toFixed(2)} M keys/s, request latency p50 ${lat.p50.toFixed(2)} ms p99 ${lat.p99.toFixed(2)} ms`);
    log(`  L1 hit rate ${fmt(served.l1HitRate, 3)} (${served.levels.l1Hits} hits; misses found in L2 ${served.levels.l2Hits}, in RocksDB ${served.levels.l3Hits})`);
    log(`  served AUC ${fmt(servedAuc)} = trained AUC ${fmt(trained.auc)} (log-loss ${fmt(logLoss(p, test.labels))}; largest prediction gap ${gap.toExponential(1)})`);

    const charts = o.plot ? await plotDemo(o.plot, epochs, served.latencies) : [];
    if (charts.length > 0) log(`charts: ${charts.filter((c) => c.endsWith('.svg')).join(', ')}`);
    return { epochs, ceilingAuc, trainedAuc: trained.auc, servedAuc, maxPredictionGap: gap, l1HitRate: served.l1HitRate, keysPerSecond: served.keysPerSecond, latencyMs: lat, charts };
  } finally {
    model.dispose();
    if (!o.out) rmSync(work, { recursive: true, force: true });
  }
}

async function plotDemo(dir: string, epochs: EpochFigures[], latencies: number[]): Promise<string[]> {
  const loss = lineChart({
    name: 'demo-loss', title: 'Log-loss per epoch', xLabel: 'epoch', yLabel: 'log-loss',
    series: [
      { name: 'train', points: epochs.map((e) => [e.epoch, e.trainLoss]) },
      { name: 'test', points: epochs.map((e) => [e.epoch, e.testLoss]) },
    ],
  });
  const aucChart = lineChart({ name: 'demo-auc', title: 'Test AUC per epoch', xLabel: 'epoch', yLabel: 'AUC', series: [{ name: 'test AUC', points: epochs.map((e) => [e.epoch, e.testAuc]) }] });
  const latency = latencyChart(latencies);
  const files: string[] = [];
  for (const c of [loss, aucChart, latency]) files.push(...(await writeChart(dir, c)));
  return files;
}

/** Served request latencies as a histogram: requests per 0.1 x (p99.9 - fastest) bucket. */
function latencyChart(latencies: number[]): Chart {
  const lo = Math.min(...latencies);
  const hi = Math.max(lo + 1e-3, quantile(latencies, 0.999));
  const buckets = 20;
  const width = (hi - lo) / buckets;
  const counts = new Array<number>(buckets).fill(0);
  for (const l of latencies) counts[Math.min(buckets - 1, Math.floor((Math.min(l, hi) - lo) / width))]!++;
  return lineChart({
    name: 'demo-latency',
    title: `Served request latency (${latencies.length} requests; the last bucket holds the slowest 0.1%)`,
    xLabel: 'latency (ms), bucket middle',
    yLabel: 'requests',
    series: [{ name: 'requests', points: counts.map((c, i) => [lo + (i + 0.5) * width, c] as const) }],
  });
}
