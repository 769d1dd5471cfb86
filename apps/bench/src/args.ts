/**
 * Command-line arguments of embedstack-bench. Pure: no I/O, so it is unit tested.
 */

export interface SuiteInfo {
  name: string;
  what: string;
  /** False for suites listed in the spec but not built yet. */
  available: boolean;
}

/** Every suite of the spec, in run order. */
export const SUITES: readonly SuiteInfo[] = [
  { name: 'limit', what: 'native memcpy GB/s and random row gather rows/s (the physical ceiling)', available: true },
  { name: 'find', what: 'dynamic-table find of existing keys vs JS Map and the static gather', available: true },
  { name: 'insert', what: 'findOrInsert / upsert of new keys with growth vs JS Map', available: true },
  { name: 'bag', what: 'lookupCombined (embedding bag) vs JS loop, tfjs-core and a native loop', available: true },
  { name: 'train', what: 'fused applyGradients (SGD, Adagrad, Adam) vs tfjs dense update and find', available: true },
  { name: 'memory', what: 'bytes per key (RSS delta, memoryUsage()) vs JS Map and the value bytes', available: true },
  { name: 'scale', what: 'find keys/s as the table grows and as the batch grows', available: true },
  { name: 'cuda', what: 'CUDA backend: find kernel rate vs HierarchicalKV (with --backend cuda / cuda-host)', available: true },
  { name: 'hps', what: 'HPS L1/L2/L3 lookups, hit rate, latency, event-loop lag', available: true },
  { name: 'redis', what: 'L2 on a 3-node Redis Cluster vs 1 node vs in-process', available: true },
];

export interface BenchArgs {
  /** Suites to run, in SUITES order, without duplicates. */
  suites: string[];
  full: boolean;
  json: boolean;
  /** Directory for SVG charts, or null. */
  plot: string | null;
  /** Backend to measure: 'cpu' (default) or another registered name such as 'reference'. */
  backend: string;
  help: boolean;
}

export class ArgumentError extends Error {
  override name = 'ArgumentError';
}

const DEFAULTS: Omit<BenchArgs, 'suites'> = { full: false, json: false, plot: null, backend: 'cpu', help: false };

/**
 * Parses argv (without node and the script). `--suite` is repeatable and takes
 * comma lists; `--opt=value` and `--opt value` are both accepted.
 * @throws ArgumentError naming the argument, the expected and the received value
 */
export function parseArgs(argv: readonly string[]): BenchArgs {
  const out: BenchArgs = { ...DEFAULTS, suites: [] };
  const wanted: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const raw = argv[i]!;
    const eq = raw.startsWith('--') ? raw.indexOf('=') : -1;
    const flag = eq > 0 ? raw.slice(0, eq) : raw;
    const inline = eq > 0 ? raw.slice(eq + 1) : undefined;
    const value = (): string => {
      if (inline !== undefined) return inline;
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) throw new ArgumentError(`Expected a value after ${flag} but received nothing`);
      i++;
      return next;
    };
    const noValue = (): void => {
      if (inline !== undefined) throw new ArgumentError(`Expected ${flag} to take no value but received "${inline}"`);
    };
    switch (flag) {
      case '--suite':
      case '-s':
        for (const s of value().split(',')) if (s.trim() !== '') wanted.push(s.trim());
        break;
      case '--full':
        noValue();
        out.full = true;
        break;
      case '--json':
        noValue();
        out.json = true;
        break;
      case '--plot':
        out.plot = value();
        if (out.plot === '') throw new ArgumentError('Expected --plot to be a directory but received ""');
        break;
      case '--backend':
        out.backend = value();
        if (out.backend === '') throw new ArgumentError('Expected --backend to be a backend name but received ""');
        break;
      case '--help':
      case '-h':
        noValue();
        out.help = true;
        break;
      default:
        throw new ArgumentError(`Expected one of --suite, --full, --json, --plot, --backend, --help but received "${raw}"`);
    }
  }
  const known = new Map(SUITES.map((s) => [s.name, s]));
  for (const w of wanted) {
    const s = known.get(w);
    if (!s) throw new ArgumentError(`Expected --suite to be one of ${SUITES.map((x) => x.name).join(', ')} but received "${w}"`);
    if (!s.available) throw new ArgumentError(`Expected --suite to be an available suite but received "${w}" (not yet available)`);
  }
  const chosen = wanted.length === 0 ? SUITES.filter((s) => s.available).map((s) => s.name) : wanted;
  out.suites = SUITES.map((s) => s.name).filter((n) => chosen.includes(n));
  return out;
}

export function helpText(): string {
  const lines = [
    'embedstack-bench: embedstack measured against what you would use instead, in one run',
    '',
    'Usage: pnpm bench [--suite NAME[,NAME...]]... [--full] [--json] [--plot DIR] [--backend NAME]',
    '',
    'Options:',
    '  --suite, -s NAME  run only these suites (repeatable, or a comma list); default: all available',
    '  --full            the large sizes (find 1M-16M keys, scale up to 64M, memory 10M JS Map); slow',
    '  --json            machine output: one JSON object per suite per line (tables are not printed)',
    '  --plot DIR        write SVG charts (throughput vs table size, vs batch, vs threads) to DIR',
    '  --backend NAME    backend to measure (default cpu; "reference" is the pure TS oracle; "cuda" the GPU, or',
    '                    without one the CUDA host mode, labelled as such; "cuda-host" that host mode)',
    '  --help, -h        this text',
    '',
    'Suites:',
    ...SUITES.map((s) => `  ${s.name.padEnd(8)} ${s.what}${s.available ? '' : ' (not yet available)'}`),
    '',
    'Figures are medians over repeated runs after a warm-up; ratios compare figures of the same run.',
  ];
  return lines.join('\n');
}
