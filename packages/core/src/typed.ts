// Typed-array checks that run no user code and cannot be fooled: `instanceof` accepts a
// Proxy of a typed array and an object that only inherits from a typed array's prototype
// (whose `length` getter then throws a raw TypeError), and a subclass may override
// `length`. These read the engine's own TypedArray getters, captured at load time.
import { InvalidArgumentError } from './errors.js';

type Getter = (this: unknown) => unknown;
const TYPED_ARRAY_PROTOTYPE = Object.getPrototypeOf(Uint8Array.prototype) as object;
const getter = (owner: object, name: PropertyKey): Getter => Object.getOwnPropertyDescriptor(owner, name)!.get as Getter;
const tagOf = getter(TYPED_ARRAY_PROTOTYPE, Symbol.toStringTag);
const lengthOf = getter(TYPED_ARRAY_PROTOTYPE, 'length');
const bufferOf = getter(TYPED_ARRAY_PROTOTYPE, 'buffer');
const byteOffsetOf = getter(TYPED_ARRAY_PROTOTYPE, 'byteOffset');
const byteLengthOf = getter(ArrayBuffer.prototype, 'byteLength');
const detachedOf = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'detached')?.get as Getter | undefined;

/** The typed arrays core takes from callers. */
export type TypedArrayConstructor =
  | Float32ArrayConstructor
  | Float64ArrayConstructor
  | Uint8ArrayConstructor
  | Int32ArrayConstructor
  | BigInt64ArrayConstructor
  | BigUint64ArrayConstructor;

/** Whether `v` is a real typed array made by `ctor` (or a subclass of it); false for a Proxy, a look-alike or a DataView. */
export function isTypedArrayOf<C extends TypedArrayConstructor>(v: unknown, ctor: C): v is InstanceType<C> {
  return ArrayBuffer.isView(v) && tagOf.call(v) === ctor.name;
}

/** The engine's length of a typed array (0 once its buffer is detached); no getter of the caller runs. */
export function typedLength(v: ArrayBufferView): number {
  return lengthOf.call(v) as number;
}

/** Whether a typed array's (intrinsic) buffer is a detached ArrayBuffer. */
function isDetached(buffer: ArrayBufferLike): boolean {
  if (!(buffer instanceof ArrayBuffer)) return false; // a SharedArrayBuffer cannot be detached
  if (detachedOf) return detachedOf.call(buffer) as boolean;
  if (byteLengthOf.call(buffer) !== 0) return false;
  try {
    new Uint8Array(buffer);
    return false;
  } catch {
    return true;
  }
}

/**
 * `v` (a real `ctor` typed array, see isTypedArrayOf) as a plain `ctor` whose `length`,
 * `buffer` and `byteOffset` are the engine's: `v` itself when it is a plain instance, else a
 * view of the same memory (a subclass, or own properties shadowing those getters).
 * @throws InvalidArgumentError naming `argument` when its buffer is detached (transferred)
 */
export function plainTypedArray<C extends TypedArrayConstructor>(v: ArrayBufferView, ctor: C, argument: string): InstanceType<C> {
  const length = typedLength(v);
  const buffer = bufferOf.call(v) as ArrayBufferLike;
  if (length === 0 && isDetached(buffer)) {
    throw new InvalidArgumentError(`Expected ${argument} to be a ${ctor.name} on a live buffer but its buffer was detached (transferred)`, { argument });
  }
  const plain =
    Object.getPrototypeOf(v) === ctor.prototype && !Object.hasOwn(v, 'length') && !Object.hasOwn(v, 'buffer') && !Object.hasOwn(v, 'byteOffset');
  if (plain) return v as InstanceType<C>;
  return new ctor(buffer as ArrayBuffer, byteOffsetOf.call(v) as number, length) as InstanceType<C>;
}

/** isTypedArrayOf then plainTypedArray: the plain typed array, or undefined when `v` is not a real `ctor` typed array. */
export function asTypedArray<C extends TypedArrayConstructor>(v: unknown, ctor: C, argument: string): InstanceType<C> | undefined {
  return isTypedArrayOf(v, ctor) ? plainTypedArray(v, ctor, argument) : undefined;
}
