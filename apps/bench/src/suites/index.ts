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

/** The runnable suites by name (args.ts lists every suite of the spec, available or not). */
export const SUITE_RUNNERS: ReadonlyMap<string, Suite> = new Map(
  [limitSuite, findSuite, insertSuite, bagSuite, trainSuite, memorySuite, scaleSuite, cudaSuite, hpsSuite, redisSuite].map((s) => [s.name, s]),
);

export type { Suite, SuiteContext } from './types.js';
