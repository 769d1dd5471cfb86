// Junk input at the public functions and constructors of store-redis (no server needed:
// connections are lazy, and every junk call must be refused before one is opened).
import { describeJunkSuite } from '@embedstack/core/testing';
import * as redis from './index.js';

describeJunkSuite({
  name: '@embedstack/store-redis',
  exports: redis,
  runs: Number(process.env.JUNK_RUNS ?? 40),
  // RedisRawTable checks its init (and every raw call: rawFuzz.test.ts)
});
