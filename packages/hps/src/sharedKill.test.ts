// Servers killed (SIGKILL) while they use versions of a shared Redis L2: what they leave is deleted once
// their lease expires, and nothing a live server reads ever is. Children bundled from source (core/testing).
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { bundleChild, childExit, kill9, runChildUntil, type ChildRun } from '@embedstack/core/testing';
import { RedisStore } from '@embedstack/store-redis';
import { startRedisServer, type RedisServerHandle } from '@embedstack/store-redis/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HPS } from './index.js';
import { expectedRows, psConfig, spreadKeys, tempDir, workspaceSources, writeTable } from '../test/fixtures.js';
import { until } from '../test/servers.js';

const work = tempDir('hps-shared-kill-');
let childScript: string;
let server: RedisServerHandle;
let client: RedisStore;
const children: ChildRun[] = [];
const ks = spreadKeys(2000);

beforeAll(async () => {
  // the child runs from a temp folder: the workspace packages are bundled in from their sources, their npm dependencies linked
  const from = (pkg: string) => createRequire(import.meta.url).resolve(`../../${pkg}/package.json`);
  childScript = await bundleChild(new URL('../test/sharedChild.ts', import.meta.url), join(work.dir, 'bin'), {
    noExternal: [/^@embedstack\//],
    alias: workspaceSources(),
    links: { ioredis: from('store-redis'), 'rocksdb-native': from('store-rocksdb') },
  });
  for (const salt of [0, 1, 2, 3]) writeTable(join(work.dir, `ko-${salt}`), ks, 8, { salt });
  server = await startRedisServer();
  client = new RedisStore({ mode: 'standalone', hosts: [{ host: server.host, port: server.port }] });
}, 60_000);

afterAll(async () => {
  for (const c of children) c.child.kill('SIGKILL');
  await client?.close();
  await server?.stop();
  work.cleanup();
});

/** The table prefixes of model ko in Redis. */
async function tables(): Promise<string[]> {
  const [r] = await client.connection.exec([{ route: Buffer.from('k'), name: 'KEYS', args: ['hps:ko.*'] }], true);
  return [...new Set((r!.value as Buffer[]).map((b) => b.toString('latin1').replace(/\{.*$/s, '')))].sort();
}


const start = async (mode: string, line: RegExp, ...args: string[]): Promise<ChildRun> => {
  const run = await runChildUntil(childScript, [`${server.host}:${server.port}`, work.dir, mode, ...args], line);
  children.push(run);
  return run;
};

/** Sends "check" to a reader child; resolves with its answer. */
async function check(reader: ChildRun): Promise<string> {
  const n = reader.lines.length;
  reader.child.stdin!.write('check\n');
  await until(() => reader.lines.length > n, 1000);
  return reader.lines[n]!;
}

describe('servers killed while they use a shared Redis L2', () => {
  it("a killed server's half-loaded version is deleted once its lease expires; the version a live server reads stays until that one dies too", async () => {
    const v = (n: number) => [`hps:ko.sparse_embedding0.v${n}.p0`, `hps:ko.sparse_embedding0.v${n}.p1`];
    // a loader: stable tables (seq 1), a reload published as .v2 (the stable tables then go: no server reads
    // them), then a reload to .v3 it never finishes
    const loader = await start('loader', /^midload$/);
    expect(loader.lines).toContain('published 2');
    // a reader attached to .v2 (it keeps it: followReloads false)
    const reader = await start('reader', /^serving /);
    expect(reader.lines).toContain('serving 2');
    // the loader's lease is renewed while it waits halfway: its .v3 stays (the reader's polls collect)
    await new Promise((r) => setTimeout(r, 300));
    expect(await tables()).toEqual([...v(2), ...v(3)]);
    await kill9(loader.child);
    // a new loader: a version is published, so its startup load goes beside it (.v4, not the stable tables), then a reload published as .v5
    const p = await HPS.create({
      psConfig: { ...psConfig([], [8], {}, { volatile_db: { type: 'redis_cluster', address: `${server.host}:${server.port}`, num_partitions: 2 } }), models: [(psConfig([join(work.dir, 'ko-2')], [8], { model: 'ko', gpucache: false }).models as Record<string, unknown>[])[0]!] },
      sharedL2: { pollIntervalMs: 100, leaseMs: 1000 },
    });
    try {
      await p.loadModel((psConfig([join(work.dir, 'ko-2')], [8], { model: 'ko', gpucache: false }).models as Record<string, unknown>[])[0]!);
      expect(p.modelInfo('ko').sharedL2).toMatchObject({ seq: 5, suffix: '.v5', loadedHere: true });
      // the dead loader's lease expires (1 s): p's polls delete .v3; .v2 stays, the live reader reads it
      await until(async () => !(await tables()).includes(v(3)[0]!), 1000);
      expect(await tables()).toEqual([...v(2), ...v(5)]);
      expect(await check(reader)).toBe('ok');
      expect(Array.from((await p.lookup(ks, 'ko', 0)).data as Float32Array)).toEqual(expectedRows(ks, 8, new Set(ks), -1, 2));
      // the reader dies too: once its lease expires, .v2 goes (it is not the published version)
      await kill9(reader.child);
      await until(async () => (await tables()).length === 2, 1000);
      expect(await tables()).toEqual(v(5));
    } finally {
      await p.close();
    }
  }, 120_000);

  it('the one loading server crashes and starts again: the attached servers serve the version they have, all of it, until its new load is complete, then switch', async () => {
    await client.connection.exec([{ route: Buffer.from('k'), name: 'FLUSHALL', args: [] }], false);
    const stable = ['hps:ko.sparse_embedding0.p0', 'hps:ko.sparse_embedding0.p1'];
    const loader = await start('start', /^published /, '0');
    expect(loader.lines).toContain("published 1 ''"); // the first load: HugeCTR's stable names
    const entry = (psConfig([join(work.dir, 'ko-0')], [8], { model: 'ko', gpucache: false }).models as Record<string, unknown>[])[0]!;
    const b = await HPS.create({
      psConfig: { ...psConfig([], [8], {}, { volatile_db: { type: 'redis_cluster', address: `${server.host}:${server.port}`, num_partitions: 2, initial_cache_rate: 0 } }), models: [entry] },
      sharedL2: { pollIntervalMs: 50, leaseMs: 1000 },
    });
    try {
      const rows = async () => Array.from((await b.lookup(ks, 'ko', 0)).data as Float32Array);
      expect(b.modelInfo('ko').sharedL2).toEqual({ seq: 1, suffix: '', loadedHere: false, error: null });
      expect(await rows()).toEqual(expectedRows(ks, 8, new Set(ks), -1, 0));
      await kill9(loader.child);
      // the loader starts again with the next export; its load stops halfway (1000 of 2000 rows written)
      const again = await start('start', /^midload$/, '1', 'pause');
      await new Promise((r) => setTimeout(r, 300)); // several of b's polls
      // was: the restart emptied the stable tables b serves (half of b's rows the default value, a quarter the new export's)
      expect(await rows()).toEqual(expectedRows(ks, 8, new Set(ks), -1, 0));
      expect(b.modelInfo('ko').sharedL2).toEqual({ seq: 1, suffix: '', loadedHere: false, error: null });
      expect(await tables()).toEqual([...stable, 'hps:ko.sparse_embedding0.v2.p0', 'hps:ko.sparse_embedding0.v2.p1']);
      again.child.stdin!.write('go\n');
      await until(() => again.lines.some((l) => l.startsWith('published ')), 1000);
      expect(again.lines).toContain('published 2 .v2');
      await until(() => b.modelInfo('ko').sharedL2!.seq === 2, 1000);
      expect(b.modelInfo('ko').sharedL2).toEqual({ seq: 2, suffix: '.v2', loadedHere: false, error: null });
      expect(await rows()).toEqual(expectedRows(ks, 8, new Set(ks), -1, 1));
      // the stable tables go once the crashed loader's lease has expired and b has left them
      await until(async () => (await tables()).length === 2, 1000);
      expect(await tables()).toEqual(['hps:ko.sparse_embedding0.v2.p0', 'hps:ko.sparse_embedding0.v2.p1']);
      await kill9(again.child);
    } finally {
      await b.close();
    }
  }, 120_000);

  it('the shared-L2 timer never keeps the process alive (unref\'d): a running server adds no ref\'d timer; close ends the process', async () => {
    const run = await start('timers', /^timers /);
    const [before, after] = run.lines.find((l) => l.startsWith('timers '))!.split(' ').slice(1).map(Number);
    expect(after).toBe(before);
    expect(await childExit(run.child)).toEqual({ code: 0, signal: null });
  }, 60_000);
});
