// Child process of the shared-L2 kill test (bundled to plain .mjs by the test, run by `node`).
// Usage: node sharedChild.mjs <redis host:port> <folder> <mode>
// Model "ko" (one table, 2000 keys of dim 8) on the Redis L2, tables <folder>/ko-<salt> written by the parent.
// - loader: starts (writes the stable tables), reloads salt 1 and prints "published <seq>", then reloads
//   salt 3 and, halfway, prints "midload" and waits for good (its lease is renewed until the parent kills it).
// - reader: attaches (followReloads false) and prints "serving <seq>"; on each "check" line on stdin it
//   looks every key up and prints "ok" when every row is salt 1's, else "bad <detail>".
// - start <salt> [pause]: a loading server (a first start, or a restart) of ko-<salt>; it prints "published <seq>
//   <suffix>" once it serves. With pause, its L2 writes stop after 1000 rows (its event loop runs on: the lease is
//   renewed) until a "go" line on stdin; it prints "midload" then.
// - timers: prints "timers <before> <after>": the ref'd timers (process.getActiveResourcesInfo) before a
//   loading server starts and the fewest seen while it runs (its shared-L2 timer must not be one: it never
//   keeps the process alive).
import { writeSync } from 'node:fs';
import { join } from 'node:path';
import { referenceBackend } from '@embedstack/core';
import { HPS } from '../src/index.js';
import { PartitionedDb } from '../src/volatileDb.js';
import { psConfig, rowOf, spreadKeys } from './fixtures.js';

const [address, folder, mode] = process.argv.slice(2) as [string, string, string];
const keys = spreadKeys(2000);
const entry = (salt: number) => (psConfig([join(folder, `ko-${salt}`)], [8], { model: 'ko', gpucache: false }).models as Record<string, unknown>[])[0]!;
const say = (line: string): void => void writeSync(1, `${line}\n`);
const volatile = { type: 'redis_cluster', address, num_partitions: 2 };
const sharedL2 = { pollIntervalMs: 100, leaseMs: 2000 }; // a child starved for 2 s on a loaded machine would be taken for dead

if (mode === 'timers') {
  const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const before = timers();
  const s = await HPS.create({ psConfig: { ...psConfig([], [8], {}, { volatile_db: volatile }), models: [entry(0)] }, backend: referenceBackend, sharedL2 });
  // the fewest over 40 samples 10 ms apart (a few polls): a command in flight has a timer of its own
  // (ioredis's), but between polls only the poll timer is pending, and it must not count
  let fewest = Infinity;
  for (let i = 0; i < 40; i++) {
    await new Promise((r) => setTimeout(r, 10));
    fewest = Math.min(fewest, timers());
  }
  say(`timers ${before} ${fewest}`);
  await s.close();
} else {
  process.stdin.on('end', () => process.exit(2));
  setTimeout(() => process.exit(3), 120_000).unref();
  // L2 writes stop (asynchronously: the event loop runs on, the lease is renewed) once `pauseAt` rows have been
  // written, printing "midload", until a "go" line on stdin
  let pauseAt = Infinity;
  let written = 0;
  let go = (): void => undefined;
  const resume = new Promise<void>((r) => (go = r));
  process.stdin.on('data', (d: Buffer) => {
    if (d.toString().includes('go')) go();
  });
  const insert = PartitionedDb.prototype.insert;
  PartitionedDb.prototype.insert = async function (this: PartitionedDb, name, k, v) {
    if (written >= pauseAt) {
      pauseAt = Infinity;
      say('midload');
      await resume;
    }
    written += k.length;
    return insert.call(this, name, k, v);
  };
  if (mode === 'start') {
    if (process.argv[6] === 'pause') pauseAt = 1000;
    const s = await HPS.create({ psConfig: { ...psConfig([], [8], {}, { volatile_db: volatile }), models: [entry(Number(process.argv[5]))] }, backend: referenceBackend, sharedL2, loadBatchSize: 500 });
    const info = s.modelInfo('ko').sharedL2!;
    say(`published ${info.seq} ${info.suffix || "''"}`);
  } else if (mode === 'loader') {
    const s = await HPS.create({ psConfig: { ...psConfig([], [8], {}, { volatile_db: volatile }), models: [entry(0)] }, backend: referenceBackend, sharedL2, loadBatchSize: 500 });
    await s.loadModel(entry(1));
    say(`published ${s.modelInfo('ko').sharedL2!.seq}`);
    written = 0;
    pauseAt = 1000; // the reload never finishes: its .v<N> tables are half written, registered, never published
    await s.loadModel(entry(3));
  } else {
    const s = await HPS.create({ psConfig: { ...psConfig([], [8], {}, { volatile_db: { ...volatile, initial_cache_rate: 0 } }), models: [entry(0)] }, backend: referenceBackend, sharedL2: { ...sharedL2, followReloads: false } });
    say(`serving ${s.modelInfo('ko').sharedL2!.seq}`);
    let buf = '';
    process.stdin.on('data', (d: Buffer) => {
      buf += d.toString();
      const lines = buf.split('\n');
      buf = lines.pop()!;
      for (const l of lines) {
        if (l !== 'check') continue;
        void s.lookup(keys, 'ko', 0).then(
          (r) => {
            const got = Array.from(r.data as Float32Array);
            const want = keys.flatMap((k) => rowOf(k, 8, 1));
            const bad = got.findIndex((v, i) => v !== want[i]);
            say(bad < 0 ? 'ok' : `bad row ${Math.floor(bad / 8)}: ${got[bad]} != ${want[bad]}`);
          },
          (e: unknown) => say(`bad ${(e as Error).message}`),
        );
      }
    });
  }
}
