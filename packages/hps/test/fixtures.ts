// Test fixtures: HugeCTR model folders written here byte by byte (independent of the code under test).
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Value of column c of key k in the test tables (exact in float32). */
export function cell(k: bigint, c: number, salt = 0): number {
  return Math.fround((Number(((k % 1000n) + 1000n) % 1000n) * 3 + c * 0.5 + salt) / 8);
}

/** The expected row of key k. */
export function rowOf(k: bigint, dim: number, salt = 0): number[] {
  return Array.from({ length: dim }, (_, c) => cell(k, c, salt));
}

/** Writes a HugeCTR table folder (`key` int64 or uint32 LE, `emb_vector` float32) for `keys`. */
export function writeTable(dir: string, keys: readonly bigint[], dim: number, opts: { uint32?: boolean; salt?: number } = {}): string {
  mkdirSync(dir, { recursive: true });
  const kb = Buffer.alloc(keys.length * (opts.uint32 ? 4 : 8));
  const vb = Buffer.alloc(keys.length * dim * 4);
  keys.forEach((k, i) => {
    if (opts.uint32) kb.writeUInt32LE(Number(k), i * 4);
    else kb.writeBigInt64LE(k, i * 8);
    rowOf(k, dim, opts.salt ?? 0).forEach((v, c) => vb.writeFloatLE(v, (i * dim + c) * 4));
  });
  writeFileSync(join(dir, 'key'), kb);
  writeFileSync(join(dir, 'emb_vector'), vb);
  return dir;
}

/** A temporary folder removed by the returned function. */
export function tempDir(prefix = 'hps-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Every file and folder under `dir` (paths relative to it), files with their bytes in hex: the state a failed or refused export must keep. */
export function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const path = join(e.parentPath ?? (e as { path?: string }).path ?? '', e.name);
    out[path.slice(dir.length)] = e.isFile() ? readFileSync(path).toString('hex') : 'dir';
  }
  return out;
}

/** Keys 0..n-1 scrambled into the int64 range (negative and large ones included). */
export function spreadKeys(n: number): bigint[] {
  return Array.from({ length: n }, (_, i) => (i % 3 === 0 ? BigInt(i) : i % 3 === 1 ? -BigInt(i) * 1000003n : BigInt(i) * 9007199254741n));
}

/** Deterministic Zipf(s) sampler over ranks 0..n-1 (a small LCG, inverse CDF). */
export function zipf(n: number, s: number, count: number, seed = 1): number[] {
  const cdf = new Float64Array(n);
  let acc = 0;
  for (let i = 0; i < n; i++) cdf[i] = acc += 1 / (i + 1) ** s;
  let x = seed >>> 0;
  const out: number[] = [];
  for (let j = 0; j < count; j++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    const u = (x / 2 ** 32) * acc;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    out.push(lo);
  }
  return out;
}

/** A ps config with one model `m` of the given tables (folders) and overrides. */
export function psConfig(folders: string[], dims: number[], model: Record<string, unknown> = {}, global: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    supportlonglong: true,
    models: [
      {
        model: 'm',
        sparse_files: folders,
        embedding_vecsize_per_table: dims,
        maxnum_catfeature_query_per_table_per_sample: dims.map(() => 16),
        default_value_for_each_table: dims.map((_, i) => -1 - i),
        deployed_device_list: [0],
        max_batch_size: 1024,
        ...model,
      },
    ],
    ...global,
  };
}

/** Expected rows of keys (the default row for keys not in `present`). */
export function expectedRows(keys: readonly bigint[], dim: number, present: Set<bigint>, dflt: number, salt = 0): number[] {
  return keys.flatMap((k) => (present.has(k) ? rowOf(k, dim, salt) : Array.from({ length: dim }, () => Math.fround(dflt))));
}

/** HPS's partition of a key among `parts` (written here: a multiplicative hash of the key's two 32-bit words). */
export function partOf(k: bigint, parts: number): number {
  const u = BigInt.asUintN(64, k);
  const lo = Number(u & 0xffffffffn);
  const hi = Number(u >> 32n);
  const h = Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) >>> 0;
  return (h >>> 16) % parts;
}

/** The workspace packages hps imports, resolved to their sources (bundleChild's alias: a child runs the code under test, not the last build). */
export function workspaceSources(): Record<string, string> {
  const src = (pkg: string) => fileURLToPath(new URL(`../../${pkg}/src/index.ts`, import.meta.url));
  return { '@embedstack/core': src('core'), '@embedstack/store-redis': src('store-redis'), '@embedstack/store-rocksdb': src('store-rocksdb') };
}
