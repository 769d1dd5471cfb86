/**
 * The suites, in run order: to add one, write src/suites/<name>.ts exporting a Suite
 * (see types.ts) and list it here. Planned suites (in the spec, not built yet) are
 * listed in --help; remove a suite's entry from PLANNED when you add it.
 */
import type { PlannedSuite } from '../options.js';
import { bagSuite } from './bag.js';
import { cudaSuite } from './cuda.js';
import { facadesSuite } from './facades.js';
import { findSuite } from './find.js';
import { hpsSuite } from './hps.js';
import { redisSuite } from './redis.js';
import { insertSuite } from './insert.js';
import { levelsSuite } from './levels.js';
import { limitSuite } from './limit.js';
import { memorySuite } from './memory.js';
import { scaleSuite } from './scale.js';
import { sokSuite } from './sok.js';
import { trainSuite } from './train.js';
import type { Suite } from './types.js';

export const SUITES: readonly Suite[] = [limitSuite, findSuite, insertSuite, bagSuite, trainSuite, levelsSuite, facadesSuite, sokSuite, memorySuite, scaleSuite, cudaSuite, hpsSuite, redisSuite];

export const PLANNED: readonly PlannedSuite[] = [];

export type { BenchArgs, Suite, SuiteContext, SuiteOption } from './types.js';

/** True when `suite`'s fixtures go to `next` as they are (Suite.fixturesFor) instead of being released after it. */
export function handsFixtures(suite: Suite, next: Suite | undefined): boolean {
  return next !== undefined && (suite.fixturesFor ?? []).includes(next.name);
}
