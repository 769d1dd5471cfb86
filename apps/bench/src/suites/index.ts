/**
 * The suites, in run order: to add one, write src/suites/<name>.ts exporting a Suite
 * (see types.ts) and list it here. Planned suites (in the spec, not built yet) are
 * listed in --help; remove a suite's entry from PLANNED when you add it.
 */
import type { PlannedSuite } from '../options.js';
import { bagSuite } from './bag.js';
import { cudaSuite } from './cuda.js';
import { findSuite } from './find.js';
import { hpsSuite } from './hps.js';
import { redisSuite } from './redis.js';
import { insertSuite } from './insert.js';
import { limitSuite } from './limit.js';
import { memorySuite } from './memory.js';
import { scaleSuite } from './scale.js';
import { trainSuite } from './train.js';
import type { Suite } from './types.js';

<<<<<<< HEAD
export const SUITES: readonly Suite[] = [limitSuite, findSuite, insertSuite, bagSuite, trainSuite, memorySuite, scaleSuite, cudaSuite];
=======
/** The runnable suites by name (args.ts lists every suite of the spec, available or not). */
export const SUITE_RUNNERS: ReadonlyMap<string, Suite> = new Map(
  [limitSuite, findSuite, insertSuite, bagSuite, trainSuite, memorySuite, scaleSuite, cudaSuite, hpsSuite, redisSuite].map((s) => [s.name, s]),
);
>>>>>>> main

export const PLANNED: readonly PlannedSuite[] = [
  { name: 'facades', description: "each facade's hot path (tpu-embedding, tfra, sok, hps) vs the core op" },
  { name: 'hps', description: 'HPS L1/L2/L3 lookups, hit rate, latency, event-loop lag' },
  { name: 'redis', description: 'L2 on a 3-node Redis Cluster vs 1 node vs in-process' },
];

export type { BenchArgs, Suite, SuiteContext, SuiteOption } from './types.js';
