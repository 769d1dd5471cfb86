import { redisConformance } from './test/conformance.js';
import { startRedisCluster } from './testing/index.js';

// core's conformance suite on a 3-master Redis Cluster: 6 buckets per table spread
// over the masters and 4 keys per command, so every call runs one pipeline per node.
redisConformance('redis-cluster', () => startRedisCluster({ masters: 3 }), { mode: 'cluster' }, { storageSlice: 6, keysSendingSize: 4 }, 25);
