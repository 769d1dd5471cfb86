import { redisConformance } from './test/conformance.js';
import { startRedisServer } from './testing/index.js';

// core's conformance suite on a real redis-server: 3 buckets per table and 4 keys per
// command, so that every call spans several buckets and chunks.
redisConformance('redis', () => startRedisServer(), {}, { storageSlice: 3, keysSendingSize: 4 });
