import { type DataArray, type Dtype, dtypeOf, isDataArray, type TypedArrayFor } from './dtypes.js';
import { InvalidArgumentError, InvalidTypeError, invalidParameter, ShapeMismatchError } from './errors.js';
import { validateShape } from './shape.js';
import { Tensor, toTypedArray } from './tensor.js';
import { checkBoolean, checkOptions } from './validation.js';

/** One row of ids of a ragged nested array (`RaggedTensor.fromNestedArray`). */
export type Row = readonly (number | bigint)[];

/**
 * COO sparse tensor, TF layout: `indices` [nnz, rank] (row-major, sorted by row is
 * not required), `values` [nnz] (ids or float weights), `denseShape` [rank].
 */
export class SparseTensor<D extends DataArray = DataArray> {
  /**
   * Flat [nnz * rank] int indices. A flat Int32Array given to the constructor is kept
   * as it is (no copy) and checked there once, where the row splits of pooled lookups
   * are also found: do not change it afterwards (a lookup would still pool the rows
   * found at construction); build a new SparseTensor instead.
   */
  readonly indices: Int32Array;
  /** [nnz] values (ids or weights), one per entry. */
  readonly values: D;
  /** Shape of the dense tensor the entries belong to. */
  readonly denseShape: readonly number[];
  /** Element type of `values`. */
  readonly dtype: Dtype;

  /**
   * @param indices `number[][]` ([nnz][rank]) or a flat typed array [nnz * rank]
   * @param values  typed array of nnz ids or weights, or plain numbers (int64 ids by default)
   * @param denseShape the dense shape, rank >= 1
   */
  constructor(
    indices: readonly (readonly number[])[] | Int32Array | BigInt64Array | readonly number[],
    values: D | readonly (number | bigint)[],
    denseShape: readonly number[],
  ) {
    const shape = validateShape(denseShape, 'denseShape');
    if (shape.length < 1) throw invalidParameter('denseShape', 'rank >= 1', denseShape);
    const rank = shape.length;
    let vals: DataArray;
    if (isDataArray(values)) vals = values;
    else if (Array.isArray(values)) {
      const allInts = values.every((v) => typeof v === 'bigint' || Number.isInteger(v));
      vals = toTypedArray(values, allInts ? 'int64' : 'float32', 'values');
    } else throw invalidParameter('values', 'a typed array or an array of numbers', values, InvalidTypeError);
    const nnz = vals.length;
    const index = (v: unknown, at: string): number => {
      const n = typeof v === 'bigint' && v >= -2147483648n && v <= 2147483647n ? Number(v) : v;
      if (typeof n !== 'number' || !Number.isInteger(n) || n < -2147483648 || n > 2147483647) throw invalidParameter(at, 'an integer index', v, InvalidTypeError);
      return n;
    };
    let flat: Int32Array;
    if (indices instanceof Int32Array) flat = indices;
    else if (indices instanceof BigInt64Array) flat = Int32Array.from(indices, (v, i) => index(v, `indices[${i}]`));
    else if (Array.isArray(indices)) {
      if (indices.length > 0 && Array.isArray(indices[0])) {
        flat = new Int32Array(indices.length * rank);
        (indices as readonly unknown[]).forEach((idx, i) => {
          if (!Array.isArray(idx) || idx.length !== rank) {
            throw invalidParameter(`indices[${i}]`, `an index of rank ${rank}`, idx, ShapeMismatchError);
          }
          for (let d = 0; d < rank; d++) flat[i * rank + d] = index(idx[d], `indices[${i}][${d}]`);
        });
      } else flat = Int32Array.from(indices as readonly unknown[], (v, i) => index(v, `indices[${i}]`));
    } else throw invalidParameter('indices', 'number[][] or a flat Int32Array', indices, InvalidTypeError);
    if (flat.length !== nnz * rank) {
      throw new ShapeMismatchError(
        `Expected indices to hold nnz * rank = ${nnz} * ${rank} = ${nnz * rank} entries but received ${flat.length}`,
        { argument: 'indices' },
      );
    }
    const rowSplits = checkIndices(flat, shape, nnz);
    this.indices = flat;
    this.values = vals as D;
    this.denseShape = Object.freeze(shape);
    this.dtype = dtypeOf(vals);
    if (rowSplits) ORDERED.set(this, rowSplits);
  }

  /** Number of entries. */
  get nnz(): number {
    return this.values.length;
  }

  /** Rank of the dense shape (indices per entry). */
  get rank(): number {
    return this.denseShape.length;
  }

  /** True when `other` has the same dense shape and the same indices (entry by entry): weights fit these ids. */
  sameLayout(other: SparseTensor): boolean {
    if (other.denseShape.length !== this.denseShape.length || other.denseShape.some((d, i) => d !== this.denseShape[i])) return false;
    const a = this.indices;
    const b = other.indices;
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }

  /** Row (first index) of entry i. */
  row(i: number): number {
    return this.indices[i * this.denseShape.length]!;
  }

  /** Every element of a dense tensor becomes an entry; `dropZeros` drops zero values as TF's `from_dense` does. */
  static fromDense<D extends DataArray>(dense: Tensor<D>, options: { dropZeros?: boolean } = {}): SparseTensor<D> {
    return sparseFromDense(dense, options);
  }

  /**
   * From ragged nested rows: `[[1, 2], [], [3]]` -> denseShape [3, 2].
   * dtype default 'int64' (ids); use 'float32' for weights.
   */
  static fromNestedArray(rows: readonly Row[], options?: { dtype?: 'int64' | null }): SparseTensor<BigInt64Array>;
  static fromNestedArray<T extends Dtype>(rows: readonly Row[], options: { dtype: T }): SparseTensor<TypedArrayFor<T>>;
  static fromNestedArray(rows: readonly Row[], options: { dtype?: Dtype | null } | null = {}): SparseTensor {
    if (!Array.isArray(rows)) throw invalidParameter('rows', 'an array of rows', rows, InvalidTypeError);
    const dtype = checkOptions<{ dtype?: Dtype | null }>(options, ['dtype']).dtype ?? 'int64';
    const idx: number[] = [];
    const flat: (number | bigint)[] = [];
    let width = 0;
    rows.forEach((row, r) => {
      if (!Array.isArray(row)) throw invalidParameter(`rows[${r}]`, 'an array', row, InvalidTypeError);
      width = Math.max(width, row.length);
      row.forEach((v, c) => {
        idx.push(r, c);
        flat.push(v);
      });
    });
    return new SparseTensor(Int32Array.from(idx), toTypedArray(flat, dtype, 'rows'), [rows.length, width]);
  }
}

/**
 * Row splits of the SparseTensors whose rows (first index) never decrease, found by
 * the constructor's validation pass: a pooled lookup then needs no pass over the
 * entries of its own. The constructor reads `indices` once; an entry's row changed
 * afterwards is not seen here (build a new SparseTensor).
 */
const ORDERED = new WeakMap<SparseTensor, Int32Array>();

/**
 * Checks every index of `flat` ([nnz * rank]) against `shape` and returns the row
 * splits [shape[0] + 1] when the rows (first index) never decrease, rank >= 2 and the
 * splits are no larger than twice the entries (else null): one read of each index.
 * @throws InvalidArgumentError naming an index out of range
 */
function checkIndices(flat: Int32Array, shape: readonly number[], nnz: number): Int32Array | null {
  const rank = shape.length;
  const nrows = shape[0]!;
  if (nnz > 0 && nrows === 0) throw invalidParameter('indices[0][0]', 'in [0, 0)', flat[0]);
  const splits = rank >= 2 && nrows <= 2 * nnz + 64 ? new Int32Array(nrows + 1) : null;
  const last = scanRows(flat, rank, nrows, nnz, splits);
  for (let d = 1; d < rank; d++) checkColumn(flat, rank, d, shape[d]!, nnz);
  if (last < 0 || splits === null) return null;
  splits.fill(nnz, last + 1);
  return splits;
}

// Each loop below is a function of its own that ends with the loop: V8 compiles a
// long first call's loop while it runs (on-stack replacement) and keeps that code;
// code after the loop would have had no type feedback then and deoptimise every call.

/**
 * Checks the rows column (index 0 of each entry) where the row changes (the row
 * before was checked; the first is 0 or checked) and fills `splits` (when given) up
 * to the last row seen. Returns that row, or -1 once a row decreases.
 */
function scanRows(flat: Int32Array, rank: number, nrows: number, nnz: number, splits: Int32Array | null): number {
  let prev = 0;
  let ordered = splits !== null;
  for (let i = 0; i < nnz; i++) {
    const r = flat[i * rank]!;
    if (r === prev) continue;
    if (r < 0 || r >= nrows) throw invalidParameter(`indices[${i}][0]`, `in [0, ${nrows})`, r);
    if (r < prev) ordered = false;
    else if (ordered) for (let q = prev + 1; q <= r; q++) splits![q] = i;
    prev = r;
  }
  return ordered ? prev : -1;
}

/** Checks index `d` of every entry against [0, n). */
function checkColumn(flat: Int32Array, rank: number, d: number, n: number, nnz: number): void {
  for (let i = 0, j = d; i < nnz; i++, j += rank) {
    const v = flat[j]!;
    if (v < 0 || v >= n) throw invalidParameter(`indices[${i}][${d}]`, `in [0, ${n})`, v);
  }
}

/**
 * A copy of the row splits [denseShape[0] + 1] of `t` when its rows never decrease
 * (found at construction), else null. Internal to core (bag.ts): not exported by the package.
 */
export function orderedRowSplits(t: SparseTensor): Int32Array | null {
  const s = ORDERED.get(t);
  // a values buffer detached since (transferred) leaves nnz other than the splits' end
  return s !== undefined && s[s.length - 1] === t.nnz ? s.slice() : null;
}

/** A ragged 2-D tensor: `values` split into rows by `rowSplits` (length nrows + 1). */
export class RaggedTensor<D extends DataArray = DataArray> {
  /** The values of every row, concatenated. */
  readonly values: D;
  /** [nrows + 1] offsets into values: row r is values[rowSplits[r], rowSplits[r + 1]). */
  readonly rowSplits: Int32Array;
  /** Element type of `values`. */
  readonly dtype: Dtype;

  private constructor(values: D, rowSplits: Int32Array) {
    this.values = values;
    this.rowSplits = rowSplits;
    this.dtype = dtypeOf(values);
  }

  /** Number of rows (rowSplits.length - 1). */
  get nrows(): number {
    return this.rowSplits.length - 1;
  }

  /** Number of values in row r (not checked: r must be in [0, nrows)). */
  rowLength(r: number): number {
    return this.rowSplits[r + 1]! - this.rowSplits[r]!;
  }

  /**
   * A ragged tensor from flat values and row offsets (validated; typed arrays are not copied).
   * @throws InvalidTypeError / InvalidArgumentError naming `values` or `rowSplits`
   * @param values typed array of ids or weights (plain arrays become int64 ids, or float32 if non-integer)
   * @param rowSplits non-decreasing, starts at 0, ends at values.length
   */
  static fromRowSplits<D extends DataArray>(
    values: D | readonly (number | bigint)[],
    rowSplits: Int32Array | readonly number[] | BigInt64Array,
  ): RaggedTensor<D> {
    let vals: DataArray;
    if (isDataArray(values)) vals = values;
    else if (Array.isArray(values)) {
      const allInts = values.every((v) => typeof v === 'bigint' || Number.isInteger(v));
      vals = toTypedArray(values, allInts ? 'int64' : 'float32', 'values');
    } else throw invalidParameter('values', 'a typed array or an array of numbers', values, InvalidTypeError);
    let splits: Int32Array;
    if (rowSplits instanceof Int32Array) splits = rowSplits;
    else if (rowSplits instanceof BigInt64Array || Array.isArray(rowSplits)) {
      splits = Int32Array.from(rowSplits as ArrayLike<unknown>, (v, i) => {
        const n = typeof v === 'bigint' && v >= 0n && v <= 2147483647n ? Number(v) : v;
        if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 2147483647) {
          // a negative offset is a bad value (as an Int32Array's is below); a fraction, a string or past int32 is the wrong type
          const negative = (typeof v === 'number' && Number.isInteger(v) && v < 0) || (typeof v === 'bigint' && v < 0n);
          throw invalidParameter(`rowSplits[${i}]`, 'an offset (integer >= 0)', v, negative ? InvalidArgumentError : InvalidTypeError);
        }
        return n;
      });
    }
    else throw invalidParameter('rowSplits', 'an Int32Array or number[]', rowSplits, InvalidTypeError);
    if (splits.length < 1 || splits[0] !== 0 || splits[splits.length - 1] !== vals.length) {
      throw invalidParameter('rowSplits', `to start at 0 and end at values.length (${vals.length})`, Array.from(splits));
    }
    for (let i = 1; i < splits.length; i++) {
      if (splits[i]! < splits[i - 1]!) throw invalidParameter('rowSplits', 'non-decreasing', Array.from(splits));
    }
    return new RaggedTensor(vals as D, splits);
  }

  /** `[[0], [0, 1], []]` -> values [0, 0, 1], rowSplits [0, 1, 3, 3]. dtype default 'int64'. */
  static fromNestedArray(rows: readonly Row[], options?: { dtype?: 'int64' | null }): RaggedTensor<BigInt64Array>;
  static fromNestedArray<T extends Dtype>(rows: readonly Row[], options: { dtype: T }): RaggedTensor<TypedArrayFor<T>>;
  static fromNestedArray(rows: readonly Row[], options: { dtype?: Dtype | null } | null = {}): RaggedTensor {
    if (!Array.isArray(rows)) throw invalidParameter('rows', 'an array of rows', rows, InvalidTypeError);
    const dtype = checkOptions<{ dtype?: Dtype | null }>(options, ['dtype']).dtype ?? 'int64';
    const splits = new Int32Array(rows.length + 1);
    const flat: (number | bigint)[] = [];
    rows.forEach((row, r) => {
      if (!Array.isArray(row)) throw invalidParameter(`rows[${r}]`, 'an array', row, InvalidTypeError);
      flat.push(...row);
      splits[r + 1] = flat.length;
    });
    return new RaggedTensor(toTypedArray(flat, dtype, 'rows'), splits);
  }

  /** Dense [n, m] tensor -> ragged with every row of length m. */
  static fromDense<D extends DataArray>(dense: Tensor<D>): RaggedTensor<D> {
    if (!(dense instanceof Tensor) || dense.rank !== 2) {
      throw invalidParameter('dense', 'a rank-2 Tensor', dense, InvalidTypeError);
    }
    const [n, m] = dense.shape as [number, number];
    const splits = new Int32Array(n + 1);
    for (let r = 0; r <= n; r++) splits[r] = r * m;
    return new RaggedTensor(dense.data, splits);
  }
}

/** SparseTensor.fromDense: every element of a rank-2 tensor becomes an entry (TF's from_dense drops zeros; pass `dropZeros`). */
export function sparseFromDense<D extends DataArray>(dense: Tensor<D>, options: { dropZeros?: boolean } = {}): SparseTensor<D> {
  if (!(dense instanceof Tensor) || dense.rank < 1) {
    throw invalidParameter('dense', 'a Tensor of rank >= 1', dense, InvalidTypeError);
  }
  const o = checkOptions<{ dropZeros?: boolean }>(options, ['dropZeros'], 'options', { expected: 'an options object ({ dropZeros })' });
  const dropZeros = checkBoolean(o.dropZeros, 'options.dropZeros', false);
  const rank = dense.rank;
  const idx: number[] = [];
  const keep: number[] = [];
  const strides = dense.shape.map((_, d) => dense.shape.slice(d + 1).reduce((a, b) => a * b, 1));
  for (let i = 0; i < dense.size; i++) {
    const v = dense.data[i]!;
    if (dropZeros && (v === 0 || v === 0n)) continue;
    keep.push(i);
    let rem = i;
    for (let d = 0; d < rank; d++) {
      idx.push(Math.floor(rem / strides[d]!));
      rem %= strides[d]!;
    }
  }
  const vals = toTypedArray(keep.map((src) => dense.data[src]!), dense.dtype, 'dense') as D;
  return new SparseTensor(Int32Array.from(idx), vals, dense.shape);
}
