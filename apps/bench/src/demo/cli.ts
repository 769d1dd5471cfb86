/**
 * embedstack-demo (`pnpm demo`): the main job, end to end on an embedded default
 * (no server to start). See run.ts for what it does.
 */
import os from 'node:os';
import { Command, Option } from 'commander';
import '@embedstack/cpu-backend';
import { machineInfo } from '../machine.js';
import { fraction, positiveInt, positiveNumber, preparePlotDir } from '../options.js';
import { DEMO_FEATURES, demoBatchError, demoSizeError, prepareOutDir } from './limits.js';
import { demoFailures, runDemo } from './run.js';

const program = new Command('embedstack-demo')
  .description('Train embeddings (TPU embedding API + a TensorFlow.js head), checkpoint, export to HugeCTR\'s layout, serve with HPS')
  .showHelpAfterError('(run with --help for the options)')
  .option('--seed <n>', 'seed of the click log (the run is deterministic)', positiveInt, 1)
  .option('--quick', 'a small run for CI (a few seconds)', false)
  .option('--epochs <n>', 'training epochs', positiveInt)
  .option('--train <n>', 'training examples', positiveInt)
  .option('--test <n>', 'test examples (evaluated per epoch, then served)', positiveInt)
  .option('--vocab <n>', 'ids per feature (rows per table)', positiveInt)
  .option('--dim <n>', 'embedding width', positiveInt, 8)
  .option('--batch <n>', 'training batch size', positiveInt, 1024)
  .addOption(new Option('--cache-fraction <x>', 'L1 cache per table, as a fraction of its rows').argParser(fraction).default(0.2))
  .addOption(new Option('--embedding-rate <x>', 'Adagrad learning rate of the embeddings').argParser(positiveNumber).default(0.5))
  .addOption(new Option('--head-rate <x>', 'Adam learning rate of the head').argParser(positiveNumber).default(0.05))
  .option('--request <n>', 'examples per served request', positiveInt, 256)
  .option('--plot <dir>', 'write SVG charts (loss, AUC, served latency) and their Vega-Lite specs')
  .option('--out <dir>', 'keep the checkpoint, model files and RocksDB there: a new or empty folder (default: a temporary folder, removed)')
  .addHelpText('after', '\nDefaults: 4 epochs, 262144 training and 16384 test examples, 10000 ids per feature (--quick: 2, 16384, 4096, 1000).');

program.parse();
const a = program.opts<{ seed: number; quick: boolean; epochs?: number; train?: number; test?: number; vocab?: number; dim: number; batch: number; cacheFraction: number; embeddingRate: number; headRate: number; request: number; plot?: string; out?: string }>();
const sizes = {
  features: DEMO_FEATURES,
  vocab: a.vocab ?? (a.quick ? 1000 : 10_000),
  dim: a.dim,
  trainExamples: a.train ?? (a.quick ? 16_384 : 262_144),
  testExamples: a.test ?? (a.quick ? 4096 : 16_384),
};
const usage = (message: string): never => {
  process.stderr.write(`${message}\n(run with --help for the options)\n`);
  process.exit(1);
};
const sizeError = demoSizeError(sizes, os.totalmem()) ?? demoBatchError(sizes.trainExamples, a.batch);
if (sizeError !== null) usage(sizeError);
// folders before any work: a run must not end on a bad --out or --plot
const outError = a.out === undefined ? null : prepareOutDir(a.out);
if (outError !== null) usage(`error: option '--out <dir>' argument '${a.out}' is invalid. ${outError}`);
const plotError = a.plot === undefined ? null : preparePlotDir(a.plot);
if (plotError !== null) usage(`error: option '--plot <dir>' argument '${a.plot}' is invalid. ${plotError}`);
const m = machineInfo();
console.log(`embedstack demo: ${m.cores} cores (${m.cpuModel}), load average ${m.loadAverage.join(' ')}, seed ${a.seed}${a.quick ? ', --quick' : ''}`);
const started = performance.now();
const result = await runDemo({
  seed: a.seed,
  epochs: a.epochs ?? (a.quick ? 2 : 4),
  trainExamples: sizes.trainExamples,
  testExamples: sizes.testExamples,
  vocab: sizes.vocab,
  batchSize: a.batch,
  dim: a.dim,
  cacheFraction: a.cacheFraction,
  requestSize: a.request,
  embeddingRate: a.embeddingRate,
  headRate: a.headRate,
  plot: a.plot ?? null,
  out: a.out ?? null,
  bars: Boolean(process.stderr.isTTY) && !process.env.CI,
});
const failures = demoFailures(result);
const last = result.epochs.at(-1)!;
console.log(`done in ${((performance.now() - started) / 1000).toFixed(1)} s: final test AUC ${last.testAuc.toFixed(4)} (the hidden model's ${result.ceilingAuc.toFixed(4)})`);
if (failures.length > 0) {
  for (const f of failures) console.error(`demo FAILED: ${f}`);
  process.exitCode = 1;
}
