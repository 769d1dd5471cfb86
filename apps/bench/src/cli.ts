/**
 * embedstack-bench: `pnpm bench [--suite NAME] [--full] [--json] [--plot DIR]`.
 * Runs the suites in one process (re-executed once with --expose-gc and a large
 * heap for the JS peers), prints a table per suite, or one JSON line per suite.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ArgumentError, helpText, parseArgs } from './args.js';
import { loadBackend } from './backend.js';
import { Fixtures } from './fixtures.js';
import { machineInfo, versions } from './machine.js';
import { loadNative } from './native.js';
import { progress } from './progress.js';
import { formatSuite, type SuiteResult, suiteJson } from './report.js';
import { formatBytes } from './stats.js';
import { lineChart } from './svg.js';
import { memoryChild, type MemoryChildSpec } from './suites/memory.js';
import { SUITE_RUNNERS, type SuiteContext } from './suites/index.js';

const cliPath = fileURLToPath(import.meta.url);

/** Re-runs this script with --expose-gc and a heap big enough for the JS Map peers. */
function reexecIfNeeded(): void {
  if ((globalThis as { gc?: unknown }).gc || process.env.EMBEDSTACK_BENCH_CHILD) return;
  const heapMb = Math.floor((os.totalmem() / 2 ** 20) * 0.75);
  const r = spawnSync(process.execPath, ['--expose-gc', `--max-old-space-size=${heapMb}`, ...process.execArgv, cliPath, ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, EMBEDSTACK_BENCH_CHILD: '1' },
  });
  process.exit(r.status ?? 1);
}

function writeCharts(dir: string, r: SuiteResult): string[] {
  mkdirSync(dir, { recursive: true });
  return r.charts.map((c) => {
    const file = path.join(dir, c.file);
    writeFileSync(file, lineChart(c));
    return file;
  });
}

async function main(argv: string[]): Promise<number> {
  if (argv[0] === '--memory-child') {
    const res = await memoryChild(JSON.parse(argv[1] ?? '{}') as MemoryChildSpec);
    process.stdout.write(JSON.stringify(res) + '\n');
    return 0;
  }
  if (argv[0] === 'demo') {
    process.stderr.write('The demo is not part of this build of embedstack-bench yet.\n');
    return 1;
  }
  let args;
  try {
    args = parseArgs(argv);
  } catch (e) {
    if (!(e instanceof ArgumentError)) throw e;
    process.stderr.write(`${e.message}\n\n${helpText()}\n`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(helpText() + '\n');
    return 0;
  }
  reexecIfNeeded();
  const native = loadNative();
  const { backend, threads, note } = await loadBackend(args.backend);
  const machine = machineInfo();
  const vers = versions();
  const hwThreads = native.hardwareThreads();
  const ctx: SuiteContext = {
    args,
    backend,
    threads,
    hwThreads,
    native,
    fixtures: new Fixtures(backend, native, threads),
    cliPath,
    log: (line) => progress.log(line),
  };
  const out = (s: string): void => void process.stdout.write(s);
  if (!args.json) {
    out(`embedstack-bench — backend '${backend.name}' (${threads} thread${threads === 1 ? '' : 's'}), ${args.full ? 'full' : 'default'} sizes\n`);
    if (note) out(`note: ${note}\n`);
    out(`machine: ${machine.cpuModel}, ${machine.cores} cores, ${formatBytes(machine.memoryBytes)}, ${machine.platform}; node ${vers.node}\n`);
    const load = machine.loadAverage[0] ?? 0;
    out(`load average: ${machine.loadAverage.join(' ')}${load > machine.cores / 2 ? ' (busy machine: absolute figures are noisy; peers are interleaved so ratios hold up better)' : ''}\n`);
    out(`suites: ${args.suites.join(', ')}\n\n`);
  }
  const t0 = performance.now();
  for (const name of args.suites) {
    const suite = SUITE_RUNNERS.get(name)!;
    progress.start(name, suite.steps(ctx));
    const s0 = performance.now();
    const r = await suite.run(ctx);
    r.seconds = (performance.now() - s0) / 1000;
    progress.done();
    ctx.fixtures.releaseAll();
    if (args.json) out(suiteJson(r, { machine, versions: vers, backend: backend.name, ...(note ? { backendNote: note } : {}), full: args.full }) + '\n');
    else out(formatSuite(r) + '\n');
    if (args.plot && r.charts.length) for (const f of writeCharts(args.plot, r)) progress.log(`wrote ${f}`);
  }
  if (!args.json) out(`total: ${((performance.now() - t0) / 1000).toFixed(1)} s; load average now ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    progress.done();
    process.stderr.write(`embedstack-bench: ${(e as Error)?.stack ?? String(e)}\n`);
    process.exit(1);
  },
);
