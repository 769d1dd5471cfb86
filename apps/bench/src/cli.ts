/**
 * embedstack-bench: `pnpm bench [--suite NAME] [--full] [--json] [--plot DIR] [--backend NAME]`.
 * Runs the suites in one process (re-executed once with --expose-gc and a large
 * heap for the JS peers), prints a table per suite, or one JSON line per suite.
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { backendUsageError, loadBackend } from './backend.js';
import { writeChart } from './charts.js';
import { Fixtures } from './fixtures.js';
import { formatBytes } from './format.js';
import { machineInfo, versions } from './machine.js';
import { loadNative } from './native.js';
import { benchProgram, defaultBackendName, ignoredSuiteOptions, parseBenchArgs, preparePlotDir, type ProgramSpec } from './options.js';
import { progress, progressMode } from './progress.js';
import { formatSuite, suiteJson } from './report.js';
import { memoryChild, type MemoryChildSpec } from './suites/memory.js';
import { handsFixtures, PLANNED, SUITES, type SuiteContext } from './suites/index.js';

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

async function main(argv: string[]): Promise<number> {
  if (argv[0] === '--memory-child') {
    const res = await memoryChild(JSON.parse(argv[1] ?? '{}') as MemoryChildSpec);
    process.stdout.write(JSON.stringify(res) + '\n');
    return 0;
  }
  if (argv[0] === 'demo') {
    // `embedstack-bench demo [options]` is the demo's own command (embedstack-demo, built beside this file)
    const r = spawnSync(process.execPath, [join(dirname(cliPath), 'demo.js'), ...argv.slice(1)], { stdio: 'inherit' });
    return r.status ?? 1;
  }
  const spec: ProgramSpec = { suites: SUITES, planned: PLANNED, defaultBackend: defaultBackendName() };
  const program = benchProgram(spec);
  const args = parseBenchArgs(program, spec, argv); // commander prints --help and errors, and exits
  const usage = (message: string): number => {
    process.stderr.write(`${message}\n(run with --help for the options)\n`);
    return 1;
  };
  const plotError = args.plot === null ? null : preparePlotDir(args.plot);
  if (plotError !== null) return usage(`error: option '--plot <dir>' argument '${args.plot}' is invalid. ${plotError}`);
  reexecIfNeeded();
  // (after the re-run, so the note prints once)
  for (const flag of ignoredSuiteOptions(program, spec, args)) process.stderr.write(`note: ${flag} has no effect: that suite is not in this run\n`);
  progress.configure(progressMode(args.json));
  const native = loadNative();
  let loadedBackend;
  try {
    loadedBackend = await loadBackend(args.backend);
  } catch (e) {
    const source = program.getOptionValueSource('backend') === 'cli' ? 'cli' : process.env.EMBEDSTACK_BACKEND ? 'env' : 'default';
    const message = backendUsageError(args.backend, e, source);
    if (message === null) throw e;
    return usage(message);
  }
  const { backend, threads, label, note } = loadedBackend;
  const machine = machineInfo();
  const vers = versions();
  const hwThreads = native.hardwareThreads();
  const ctx: SuiteContext = {
    args,
    backend,
    backendLabel: label,
    threads,
    hwThreads,
    native,
    fixtures: new Fixtures(backend, native, threads),
    cliPath,
    log: (line) => progress.log(line),
  };
  const out = (s: string): void => void process.stdout.write(s);
  if (!args.json) {
    out(`embedstack-bench — backend ${label}; ${args.full ? 'full' : 'default'} sizes\n`);
    if (note) out(`note: ${note}\n`);
    out(`machine: ${machine.cpuModel}, ${machine.cores} cores, ${formatBytes(machine.memoryBytes)}, ${machine.platform}; node ${vers.node}\n`);
    const load = machine.loadAverage[0] ?? 0;
    out(`load average: ${machine.loadAverage.join(' ')}${load > machine.cores / 2 ? ' (busy machine: absolute figures are noisy; peers are interleaved so ratios hold up better)' : ''}\n`);
    out(`suites: ${args.suites.join(', ')}\n\n`);
  }
  const suites = args.suites.map((n) => SUITES.find((s) => s.name === n)!);
  const steps = suites.map((s) => s.steps(ctx));
  progress.startRun(steps);
  const context = { machine, versions: vers, backend: backend.name, backendLabel: label, ...(note ? { backendNote: note } : {}), full: args.full };
  const t0 = performance.now();
  for (const [i, suite] of suites.entries()) {
    progress.startSuite(suite.name, steps[i]!);
    const s0 = performance.now();
    const r = await suite.run(ctx);
    r.seconds = (performance.now() - s0) / 1000;
    progress.endSuite();
    if (!handsFixtures(suite, suites[i + 1])) ctx.fixtures.releaseAll();
    out(args.json ? suiteJson(r, context) + '\n' : formatSuite(r, process.stdout.isTTY ? process.stdout.columns : undefined) + '\n');
    if (args.plot) for (const c of r.charts) for (const f of await writeChart(args.plot, c)) progress.log(`wrote ${f}`);
  }
  if (!args.json) out(`total: ${((performance.now() - t0) / 1000).toFixed(1)} s; load average now ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    progress.stopBars();
    process.stderr.write(`embedstack-bench: ${(e as Error)?.stack ?? String(e)}\n`);
    process.exit(1);
  },
);
