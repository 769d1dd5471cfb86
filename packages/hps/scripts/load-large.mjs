// Loads a large HugeCTR model (default 10M rows, dim 8) into HPS with L3 RocksDB only
// (L2 disabled, L1 off) and prints the peak resident memory against the file sizes, to
// show the loader streams in bounded memory. Usage (after `pnpm build`):
//   node packages/hps/scripts/load-large.mjs [rows=10000000] [dim=8]
// Writes ~(8 + 4*dim) bytes per row to a temporary folder (removed at the end).
import { mkdirSync, mkdtempSync, openSync, rmSync, writeSync, closeSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HPS } from '@embedstack/hps';

const rows = Number(process.argv[2] ?? 10_000_000);
const dim = Number(process.argv[3] ?? 8);
const root = mkdtempSync(join(tmpdir(), 'hps-large-'));
const folder = join(root, 'm_table0');
mkdirSync(folder);
const CHUNK = 1 << 20;
const kf = openSync(join(folder, 'key'), 'w');
const vf = openSync(join(folder, 'emb_vector'), 'w');
for (let s = 0; s < rows; s += CHUNK) {
  const n = Math.min(CHUNK, rows - s);
  const k = new BigInt64Array(n);
  const v = new Float32Array(n * dim);
  for (let i = 0; i < n; i++) {
    k[i] = BigInt(s + i) * 7919n - 123456789n;
    for (let c = 0; c < dim; c++) v[i * dim + c] = ((s + i) % 1000) + c / 8;
  }
  writeSync(kf, new Uint8Array(k.buffer));
  writeSync(vf, new Uint8Array(v.buffer));
}
closeSync(kf);
closeSync(vf);
const fileBytes = statSync(join(folder, 'key')).size + statSync(join(folder, 'emb_vector')).size;
global.gc?.();
const rssBefore = process.memoryUsage().rss;
let peak = rssBefore;
const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
const t0 = performance.now();
let last = 0;
const server = await HPS.create({
  psConfig: {
    supportlonglong: true,
    volatile_db: { type: 'disabled' },
    persistent_db: { type: 'rocks_db', path: join(root, 'rocks') },
    models: [{ model: 'm', sparse_files: [folder], embedding_vecsize_per_table: [dim], maxnum_catfeature_query_per_table_per_sample: [1], default_value_for_each_table: [0], deployed_device_list: [0], max_batch_size: 1024, gpucache: false }],
  },
  onProgress: (p) => {
    if (p.rowsLoaded - last >= 2_000_000 || p.rowsLoaded === p.rows) {
      last = p.rowsLoaded;
      process.stdout.write(`  ${p.rowsLoaded} / ${p.rows} rows, rss ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB\n`);
    }
  },
});
const seconds = (performance.now() - t0) / 1000;
clearInterval(timer);
peak = Math.max(peak, process.memoryUsage().rss);
const probe = new BigInt64Array([0n * 7919n - 123456789n, BigInt(rows - 1) * 7919n - 123456789n]);
const got = await server.lookup(probe, 'm', 0);
const want = [0, ((rows - 1) % 1000)];
const ok = want.every((w, i) => got.data[i * dim] === w && got.data[i * dim + dim - 1] === w + (dim - 1) / 8);
await server.close();
rmSync(root, { recursive: true, force: true });
const mib = (b) => `${(b / 2 ** 20).toFixed(0)} MiB`;
console.log(`${rows} rows x dim ${dim}: files ${mib(fileBytes)}, loaded in ${seconds.toFixed(1)} s; rss before ${mib(rssBefore)}, peak ${mib(peak)} (+${mib(peak - rssBefore)}); first and last rows exact: ${ok}`);
process.exit(ok ? 0 : 1);
