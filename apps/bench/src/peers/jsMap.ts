/**
 * The JS peer a Node developer reaches for: `Map<bigint, Float32Array>`, one
 * Float32Array per key, rows copied into one output buffer per batch (as our
 * `find` returns one buffer). Everything on the JS heap.
 */

export type JsMapTable = Map<bigint, Float32Array>;

/**
 * A map holding `keys` (row i gets row[0] = i). Rows are Float32Array views into
 * 64 MiB-ish slabs: building 4M separate ArrayBuffers takes ~2x longer here and
 * looks up no faster, so the slabs only shorten the untimed setup. Throws
 * RangeError past V8's Map size limit (2^24 entries).
 */
export function buildJsMap(keys: BigInt64Array, dim: number): JsMapTable {
  const map: JsMapTable = new Map();
  const slabRows = Math.max(1, Math.floor((64 << 20) / (dim * 4)));
  let slab = new Float32Array(0);
  for (let i = 0; i < keys.length; i++) {
    const j = i % slabRows;
    if (j === 0) slab = new Float32Array(Math.min(slabRows, keys.length - i) * dim);
    const row = slab.subarray(j * dim, (j + 1) * dim);
    row[0] = i;
    map.set(keys[i]!, row);
  }
  return map;
}

/** Reads rows of existing keys into a fresh [n*dim] buffer (missing keys stay zero). */
export function jsMapFind(map: JsMapTable, keys: BigInt64Array, dim: number): { values: Float32Array; exists: Uint8Array } {
  const n = keys.length;
  const values = new Float32Array(n * dim);
  const exists = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const row = map.get(keys[i]!);
    if (row !== undefined) {
      values.set(row, i * dim);
      exists[i] = 1;
    }
  }
  return { values, exists };
}

/** Reads rows, inserting a zero row for every missing key. */
export function jsMapFindOrInsert(map: JsMapTable, keys: BigInt64Array, dim: number): { values: Float32Array; exists: Uint8Array } {
  const n = keys.length;
  const values = new Float32Array(n * dim);
  const exists = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const k = keys[i]!;
    let row = map.get(k);
    if (row === undefined) {
      row = new Float32Array(dim);
      map.set(k, row);
    } else exists[i] = 1;
    values.set(row, i * dim);
  }
  return { values, exists };
}

/** Overwrites existing rows in place, inserts a copy of the row for new keys. */
export function jsMapUpsert(map: JsMapTable, keys: BigInt64Array, values: Float32Array, dim: number): void {
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    const src = values.subarray(i * dim, (i + 1) * dim);
    const row = map.get(k);
    if (row !== undefined) row.set(src);
    else map.set(k, src.slice());
  }
}
