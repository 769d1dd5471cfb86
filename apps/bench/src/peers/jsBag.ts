/**
 * The embedding bag a Node developer writes by hand: one Float32Array table
 * [rows * dim], a loop over the bag's ids adding rows, then the mean's division.
 */
export function jsGatherReduce(
  table: Float32Array,
  dim: number,
  splits: Int32Array,
  ids: Uint32Array,
  mean: boolean,
): Float32Array {
  const nrows = splits.length - 1;
  const out = new Float32Array(nrows * dim);
  for (let r = 0; r < nrows; r++) {
    const o = r * dim;
    const from = splits[r]!;
    const to = splits[r + 1]!;
    for (let j = from; j < to; j++) {
      const s = ids[j]! * dim;
      for (let d = 0; d < dim; d++) out[o + d]! += table[s + d]!;
    }
    if (mean && to > from) {
      const inv = 1 / (to - from);
      for (let d = 0; d < dim; d++) out[o + d]! *= inv;
    }
  }
  return out;
}
