#!/usr/bin/env node
// examples/hps-server: HPS behind a KServe v2 / Triton HTTP endpoint.
//   node main.mjs            demo: export a small trained table, serve it on 127.0.0.1, fire 200 concurrent
//                            clients at it, check bad requests get protocol errors, print the figures, exit
//   node main.mjs serve --ps ps.json [--host 127.0.0.1] [--port 8000]
//   node main.mjs load --url http://127.0.0.1:8000 --model naive_dnn
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { createTable, loadDefaultBackend } from '@embedstack/core';
import * as hps from '@embedstack/hps';
import { buildServer, DEFAULTS } from './server.mjs';
import { runLoad } from './load.mjs';

const program = new Command('hps-server').description('HPS lookups over the KServe v2 / Triton inference protocol');

function printLoad(r) {
  console.log(`requests ${r.requests} (failed ${r.failed}) in ${r.seconds.toFixed(2)} s: ${r.rps.toFixed(0)} req/s, ${r.keysPerSecond.toFixed(0)} keys/s`);
  console.log(`latency p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms; event-loop delay p99 ${r.loopP99.toFixed(2)} ms (max ${r.loopMax.toFixed(2)} ms)`);
}

program
  .command('demo', { isDefault: true })
  .description('self-contained run: export, serve, load, check errors, exit')
  .option('--requests <n>', 'requests in total', (v) => Number(v), 2000)
  .option('--concurrency <n>', 'concurrent clients', (v) => Number(v), 200)
  .action(async (opts) => {
    const dir = mkdtempSync(join(tmpdir(), 'hps-server-'));
    const rows = 10000;
    const dim = 16;
    const table = createTable({ kind: 'dynamic', dim, initializer: { kind: 'zeros' } }, { backend: loadDefaultBackend({ from: import.meta.url }) });
    const keys = BigInt64Array.from({ length: rows }, (_, i) => BigInt(i));
    const values = Float32Array.from({ length: rows * dim }, (_, j) => Math.floor(j / dim) + (j % dim) / 100);
    await table.upsert(keys, values);
    const psConfig = await hps.exportModel({
      model: 'demo', dir, tables: [{ table, name: 'emb' }],
      modelOptions: { gpucacheper: 0.2, hit_rate_threshold: 1.1, max_batch_size: 1024, maxnum_catfeature_query_per_table_per_sample: [64] },
      globalOptions: { persistent_db: { type: 'rocks_db', path: join(dir, 'rocksdb') } },
    });
    table.dispose();
    const server = await hps.HPS.create({ psConfig });
    const app = buildServer(server, { maxKeys: 4096 });
    const url = await app.listen({ host: DEFAULTS.host, port: 0 });
    console.log(`serving model "demo" (${rows} rows, dim ${dim}) at ${url}`);
    let ok = true;
    try {
      const meta = await (await fetch(`${url}/v2/models/demo`)).json();
      console.log(`GET /v2/models/demo -> inputs ${meta.inputs.map((i) => i.name).join(', ')}, outputs ${meta.outputs.map((i) => i.name).join(', ')}`);
      const one = await (await fetch(`${url}/v2/models/demo/infer`, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: [{ name: 'KEYS', datatype: 'INT64', shape: [2], data: [7, 123456] }, { name: 'NUMKEYS', datatype: 'INT32', shape: [1], data: [2] }] }) })).json();
      const out = one.outputs[0].data;
      const exact = out[0] === 7 && Math.abs(out[15] - 7.15) < 1e-5 && out.slice(16).every((v) => v === 0);
      console.log(`infer [7, 123456] -> row 7 starts ${out[0]}, unknown key -> default 0: ${exact ? 'exact' : 'WRONG'}`);
      ok &&= exact;
      const bad = [
        ['not JSON', { body: '{nope', type: 'application/json' }, 400],
        ['float keys', { body: JSON.stringify({ inputs: [{ name: 'KEYS', datatype: 'INT64', data: [1.5] }] }) }, 400],
        ['key outside INT64', { body: JSON.stringify({ inputs: [{ name: 'KEYS', datatype: 'INT64', data: ['9223372036854775808'] }] }) }, 400],
        ['unknown model', { body: JSON.stringify({ inputs: [] }), model: 'nope' }, 404],
        ['too many keys', { body: JSON.stringify({ inputs: [{ name: 'KEYS', datatype: 'INT64', data: Array(5000).fill(1) }] }) }, 400],
        ['body over the cap', { body: JSON.stringify({ inputs: [{ name: 'KEYS', datatype: 'INT64', data: Array(700000).fill(1) }] }) }, 413],
      ];
      for (const [what, b, want] of bad) {
        const r = await fetch(`${url}/v2/models/${b.model ?? 'demo'}/infer`, { method: 'POST', headers: { 'content-type': b.type ?? 'application/json' }, body: b.body });
        const j = await r.json().catch(() => ({}));
        const pass = r.status === want && typeof j.error === 'string';
        ok &&= pass;
        console.log(`bad request (${what}) -> ${r.status} ${pass ? 'ok' : 'WRONG'}: ${String(j.error).slice(0, 80)}`);
      }
      const r = await runLoad({ url, model: 'demo', concurrency: opts.concurrency, requests: opts.requests, keysPerRequest: 64, keyRange: rows });
      printLoad(r);
      ok &&= r.failed === 0;
      const st = server.stats('demo', 0);
      console.log(`L1 hit rate ${st.l1.hitRate.toFixed(3)}; lookup latency p50 ${st.latencyMs.p50.toFixed(3)} ms, p99 ${st.latencyMs.p99.toFixed(3)} ms`);
      console.log((await fetch(`${url}/v2/health/ready`)).status === 200 ? 'ready' : 'not ready');
    } finally {
      await app.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
    if (!ok) {
      console.log('hps-server example FAILED');
      process.exitCode = 1;
    } else console.log('hps-server example OK');
  });

program
  .command('serve')
  .description('serve the models of a ps.json until interrupted')
  .requiredOption('--ps <file>', "HugeCTR's ps.json")
  .option('--host <host>', 'address to bind (loopback unless told otherwise)', DEFAULTS.host)
  .option('--port <port>', 'port', (v) => Number(v), 8000)
  .option('--max-keys <n>', 'keys per request at most', (v) => Number(v), DEFAULTS.maxKeys)
  .action(async (opts) => {
    const server = await hps.HPS.create({ psConfigFile: opts.ps, onProgress: (p) => process.stdout.write(`\rloading ${p.model}.${p.table}: ${p.rowsLoaded}/${p.rows}`) });
    const app = buildServer(server, { maxKeys: opts.maxKeys });
    console.log(`\nserving ${server.models().join(', ')} at ${await app.listen({ host: opts.host, port: opts.port })}`);
    const stop = async () => {
      await app.close();
      await server.close();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });

program
  .command('load')
  .description('fire a bounded load at a loopback server')
  .requiredOption('--url <url>', 'server URL (loopback)')
  .requiredOption('--model <name>', 'model name')
  .option('--requests <n>', 'requests in total', (v) => Number(v), 2000)
  .option('--concurrency <n>', 'concurrent clients', (v) => Number(v), 200)
  .option('--keys <n>', 'keys per request', (v) => Number(v), 64)
  .option('--key-range <n>', 'keys drawn from [0, n)', (v) => Number(v), 10000)
  .action(async (opts) => {
    printLoad(await runLoad({ url: opts.url, model: opts.model, requests: opts.requests, concurrency: opts.concurrency, keysPerRequest: opts.keys, keyRange: opts.keyRange }));
  });

await program.parseAsync();
