import { InvalidTypeError, invalidParameter } from './errors.js';
import { checkInteger, errorClassFor } from './validation.js';

/**
 * How a table stores its values (`TableOptions.storageDtype`). Values are always
 * computed and returned as float32; a narrow table keeps each value in 16 bits:
 *  - 'float32': 4 bytes per value, stored as given (default);
 *  - 'bfloat16': 2 bytes (8-bit exponent, 7 stored mantissa bits: float32's range, ~3 significant digits);
 *  - 'float16': 2 bytes (IEEE binary16: 5-bit exponent, 10 stored mantissa bits, finite range ±65504,
 *    subnormals below 2^-14).
 * Every value written to a narrow table (upsert, assign, accum's sum, an initial value, an optimizer
 * update, an imported or checkpointed row) is rounded to the storage type once, to nearest with ties to
 * even; NaN stays NaN, ±Infinity and ±0 are kept, float16 overflows (|x| >= 65520) become ±Infinity.
 * Reads widen exactly. Optimizer slots always stay float32.
 */
export type StorageDtype = 'float32' | 'float16' | 'bfloat16';

/** Every {@link StorageDtype}: `['float32', 'float16', 'bfloat16']`. */
export const STORAGE_DTYPES: readonly StorageDtype[] = ['float32', 'float16', 'bfloat16'];

/** Bytes one stored value takes. */
export const STORAGE_BYTES: Readonly<Record<StorageDtype, number>> = { float32: 4, float16: 2, bfloat16: 2 };

/** Whether `value` is 'float32', 'float16' or 'bfloat16'. */
export function isStorageDtype(value: unknown): value is StorageDtype {
  return value === 'float32' || value === 'float16' || value === 'bfloat16';
}

/** @throws InvalidTypeError (not a string) / InvalidArgumentError (another name) naming `argument` unless `value` is a StorageDtype. */
export function checkStorageDtype(value: unknown, argument = 'storageDtype'): StorageDtype {
  if (!isStorageDtype(value)) throw invalidParameter(argument, "'float32', 'float16' or 'bfloat16'", value, errorClassFor(value, 'string'));
  return value;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function checkNumberArg(x: unknown): number {
  if (typeof x !== 'number') throw invalidParameter('x', 'a number', x, InvalidTypeError);
  return x;
}

/** x rounded to float32, then to bfloat16 (to nearest, ties to even); NaN stays NaN. @throws InvalidTypeError */
export function roundBfloat16(x: number): number {
  return bf16(checkNumberArg(x));
}

/** x rounded to float32, then to IEEE float16 (to nearest, ties to even; overflow -> ±Infinity). @throws InvalidTypeError */
export function roundFloat16(x: number): number {
  return f16(checkNumberArg(x));
}

function bf16(x: number): number {
  f32[0] = x;
  const u = u32[0]!;
  if ((u & 0x7fffffff) > 0x7f800000) return NaN;
  u32[0] = (((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) << 16) >>> 0;
  return f32[0]!;
}

function f16(x: number): number {
  f32[0] = x;
  const u = u32[0]!;
  const sign = u & 0x80000000;
  const abs = u & 0x7fffffff;
  if (abs >= 0x7f800000) return x; // ±Infinity, NaN
  if (abs >= 0x477ff000) return sign ? -Infinity : Infinity; // >= 65520: past the largest float16 + half an ulp
  // Keep 10 mantissa bits for normals (exponent >= -14), fewer for subnormals: drop `shift` low bits.
  const exp = abs >>> 23;
  const shift = exp >= 113 ? 13 : 126 - exp;
  if (shift > 24) return sign ? -0 : 0; // below 2^-25: rounds to 0
  const mant = exp === 0 ? abs & 0x7fffff : (abs & 0x7fffff) | 0x800000; // with the implicit bit
  const half = 2 ** (shift - 1);
  const low = mant % (2 ** shift);
  let kept = mant - low;
  if (low > half || (low === half && (kept / 2 ** shift) % 2 === 1)) kept += 2 ** shift;
  // Rebuild: kept * 2^(exp - 150) (exp 0 is subnormal float32: scale 2^-149).
  const value = kept * 2 ** ((exp === 0 ? 1 : exp) - 150);
  return sign ? -value : value;
}

/**
 * Rounds `values[begin..end)` in place to `dtype` (a no-op for 'float32'): what a table of that
 * storage type keeps of them. @throws InvalidArgumentError / InvalidTypeError naming the argument
 */
export function roundToStorage(dtype: StorageDtype, values: Float32Array, begin = 0, end?: number): void {
  checkStorageDtype(dtype, 'dtype');
  if (!(values instanceof Float32Array)) throw invalidParameter('values', 'a Float32Array', values, InvalidTypeError);
  const b = checkInteger(begin, 'begin', { min: 0, max: values.length });
  const e = end === undefined ? values.length : checkInteger(end, 'end', { min: b, max: values.length });
  roundStored(dtype, values, b, e);
}

/** roundToStorage without argument checks (core's own hot paths). */
export function roundStored(dtype: StorageDtype, values: Float32Array, begin = 0, end = values.length): void {
  if (dtype === 'float32') return;
  if (dtype === 'bfloat16') {
    const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
    for (let i = begin; i < end; i++) {
      const u = bits[i]!;
      if ((u & 0x7fffffff) > 0x7f800000) continue; // NaN stays as it is
      bits[i] = (((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) << 16) >>> 0;
    }
    return;
  }
  for (let i = begin; i < end; i++) values[i] = f16(values[i]!);
}
