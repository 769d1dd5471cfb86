// @embedstack/store-redis/testing: real redis-server processes for tests.
export {
  startRedisServer,
  startRedisCluster,
  checkRedisInstalled,
  redisAvailable,
  freePort,
  rawCommand,
  waitUntil,
} from './servers.js';
export type { RedisServerHandle, RedisClusterHandle, StartRedisServerOptions, StartRedisClusterOptions } from './servers.js';
