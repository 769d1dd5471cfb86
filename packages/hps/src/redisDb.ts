import { UnsupportedError } from '@embedstack/core';
import type { VolatileDbConfig } from './config.js';
import type { VolatileDb } from './volatileDb.js';

/** L2 on Redis Cluster (milestone 3). @throws UnsupportedError for now */
export async function createRedisVolatileDb(config: VolatileDbConfig): Promise<VolatileDb> {
  throw new UnsupportedError(`volatile_db.type 'redis_cluster' (${config.address.join(',')}) is not available in this build yet: use 'hash_map'`);
}
