/**
 * redis: HPS with its L2 on a 3-master Redis Cluster on loopback, against one Redis
 * node and against the in-process hash map, through `HPS.lookup` with the L1 off (so
 * every key goes to L2). Real redis-server processes (store-redis's test servers).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { redisAvailable, startRedisCluster, startRedisServer } from '@embedstack/store-redis/testing';
import { measure } from '../harness.js';
import type { Group, SuiteResult } from '../report.js';
import { drawIndices, pickKeys } from '../rng.js';
import { formatCount } from '../format.js';
import { figure, rotating, settle } from './common.js';
import { hpsFixture } from './hps.js';
import type { Suite } from './types.js';

const BATCH = 8192;

export const redisSuite: Suite = {
  name: 'redis',
  description: 'L2 on a 3-node Redis Cluster vs 1 node vs in-process',
  steps: () => 3,
  async run(ctx) {
    const result: SuiteResult = { suite: 'redis', path: 'HPS.lookup with gpucache off (L2 only)', groups: [], targets: [], notes: [], charts: [] };
    if (!redisAvailable()) {
      result.notes.push('skipped: redis-server is not installed (apt-get install -y redis-server)');
      return result;
    }
    const rows = ctx.args.full ? 1 << 20 : 1 << 16;
    const cluster = await startRedisCluster({ masters: 3 });
    const single = await startRedisServer();
    const dirs: string[] = [];
    const rates: number[] = [];
    try {
      const l2s: [string, Record<string, unknown>][] = [
        ['3-master Redis Cluster', { type: 'redis_cluster', address: cluster.hosts.map((h) => `${h.host}:${h.port}`).join(',') }],
        ['1 Redis node', { type: 'redis_cluster', address: `${single.host}:${single.port}` }],
        ['in-process hash map', { type: 'hash_map' }],
      ];
      for (const [name, l2] of l2s) {
        const dir = mkdtempSync(join(tmpdir(), 'bench-redis-'));
        dirs.push(dir);
        const { server, table, keys } = await hpsFixture(ctx, rows, dir, l2, false);
        try {
          const next = rotating(pickKeys(keys, drawIndices(8 * BATCH, rows, { zipf: 1.2 }, 101)), BATCH);
          rates.push((await measure(`L2 ${name}`, async (i) => void (await server.lookup(next(i), 'bench', 0)), BATCH, { async: true })).rate);
        } finally {
          await server.close();
          table.dispose();
        }
      }
      const group: Group = {
        title: `HPS L2 lookups, ${formatCount(rows)} rows, dim 32, batch ${formatCount(BATCH)}, zipf(1.2), no L1`,
        params: { rows, batch: BATCH },
        figures: [
          figure('L2 on a 3-master Redis Cluster', 'ours', rates[0]!, 'keys/s'),
          figure('L2 on 1 Redis node', 'peer', rates[1]!, 'keys/s'),
          figure('L2 in-process hash map', 'peer', rates[2]!, 'keys/s'),
        ],
      };
      result.groups.push(group);
      result.notes.push('all Redis processes share this machine\'s cores with the client, so the cluster cannot show its scale-out here; it shows the cost of the network hop');
    } finally {
      await cluster.stop();
      await single.stop();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
      await settle();
    }
    return result;
  },
};
