import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EmbeddingError, ErrorCodes } from '../errors.js';
import { RaggedTensor, SparseTensor } from '../sparse.js';
import { Tensor } from '../tensor.js';

/**
 * The junk-input property test: random junk thrown at every public function,
 * constructor and method of a package must either be accepted or rejected with a
 * coded EmbeddingError (never a raw TypeError, never a crash), and a rejected call on
 * an object must leave it unchanged.
 */

const CODES = new Set<string>(Object.values(ErrorCodes));

/** Values a careless caller passes: primitives, wrong arrays, typed arrays of every kind, tensors of the wrong dtype, odd objects. */
export function junkArbitrary(): fc.Arbitrary<unknown> {
  const small = fc.integer({ min: -3, max: 5 });
  const typed = fc.oneof(
    fc.array(small, { maxLength: 6 }).map((a) => Int32Array.from(a)),
    fc.array(small, { maxLength: 6 }).map((a) => BigInt64Array.from(a, BigInt)),
    fc.array(fc.float(), { maxLength: 6 }).map((a) => Float32Array.from(a)),
    fc.array(fc.double(), { maxLength: 6 }).map((a) => Float64Array.from(a)),
    fc.array(small, { maxLength: 6 }).map((a) => Uint8Array.from(a, (x) => x & 255)),
    fc.array(small, { maxLength: 6 }).map((a) => BigUint64Array.from(a, (x) => BigInt(Math.abs(x)))),
  );
  const tensors = fc.oneof(
    typed.filter((t) => t instanceof Int32Array || t instanceof BigInt64Array || t instanceof Float32Array).map((t) => new Tensor(t as Int32Array, [t.length])),
    fc.constant(RaggedTensor.fromNestedArray([[1n, 2n], []])),
    fc.constant(SparseTensor.fromNestedArray([[1n], [2n, 3n]])),
    fc.constant(RaggedTensor.fromNestedArray([[0.5, 2]], { dtype: 'float32' })),
  );
  return fc.oneof(
    { weight: 4, arbitrary: fc.anything({ maxDepth: 2, withBigInt: true, withTypedArray: true, withNullPrototype: true, withMap: true, withSet: true }) },
    { weight: 2, arbitrary: fc.constantFrom(undefined, null, NaN, Infinity, -Infinity, -0, 0, -1, 1.5, 2 ** 53, 2 ** 31, -(2 ** 31) - 1, '', 'x', '0', true, false, 1n, -1n, 2n ** 70n, Symbol('junk'), () => 1, [], {}, [[]], [1n, 'a'], [1, 'a'], ['a']) },
    { weight: 2, arbitrary: typed },
    { weight: 1, arbitrary: tensors },
    { weight: 1, arbitrary: fc.array(fc.oneof(small, fc.bigInt({ min: -3n, max: 5n }), fc.string({ maxLength: 2 })), { maxLength: 4 }) },
  );
}

/** Calls `fn` (awaiting a promise, with a time limit); 'ok' when it returned, 'rejected' for a coded EmbeddingError; fails otherwise. */
export async function codedOrOk(fn: () => unknown, label: string): Promise<'ok' | 'rejected'> {
  let error: unknown;
  try {
    const r = fn();
    if (r && typeof (r as Promise<unknown>).then === 'function') {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        r,
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`${label}: did not settle within 10 s`)), 10_000);
        }),
      ]).finally(() => clearTimeout(timer));
    }
    return 'ok';
  } catch (e) {
    error = e;
  }
  const ok = error instanceof EmbeddingError && CODES.has(error.code) && error.message.length > 0;
  expect(ok, `${label} threw an uncoded ${describeError(error)}`).toBe(true);
  return 'rejected';
}

function describeError(e: unknown): string {
  if (e instanceof Error) return `${e.name}: ${e.message}\n${e.stack?.split('\n').slice(1, 4).join('\n') ?? ''}`;
  return String(e);
}

/** A live object of a package and how to read its observable state (compared before and after a rejected call). */
export interface JunkTarget<T extends object = object> {
  /** The class or object, for test names. */
  name: string;
  /** Makes a fresh object to throw junk at. */
  make: () => T | Promise<T>;
  /** A comparable view of the object's state (contents, sizes, ...). */
  state: (o: T) => unknown | Promise<unknown>;
  /** Methods not to call (they touch the file system, never settle by design, ...). */
  skip?: readonly string[];
  /** Valid argument lists per method, mutated with junk as JunkSuiteOptions.examples. */
  examples?: Readonly<Record<string, readonly (readonly unknown[])[]>>;
  /** Frees an object `make` returned. */
  dispose?: (o: T) => void;
}

/** A target of any object type, for JunkSuiteOptions.targets (keeps `make`, `state` and `dispose` typed together). */
export function junkTarget<T extends object>(t: JunkTarget<T>): JunkTarget {
  const { state, dispose } = t;
  // the suite passes `state` and `dispose` only objects `make` returned: they are Ts
  return {
    name: t.name,
    make: t.make,
    state: (o) => state(o as T),
    ...(t.skip ? { skip: t.skip } : {}),
    ...(t.examples ? { examples: t.examples } : {}),
    ...(dispose ? { dispose: (o: object) => dispose(o as T) } : {}),
  };
}

/** Options of the junk-input property test of a package. */
export interface JunkSuiteOptions {
  /** The package, for test names. */
  name: string;
  /** The package's exports (`import * as pkg`). */
  exports: Record<string, unknown>;
  /** Exported functions / classes not to call with junk (with the reason in a comment at the call site). */
  skip?: readonly string[];
  /** Objects whose methods get junk arguments. */
  targets?: readonly JunkTarget[];
  /**
   * Valid argument lists per export (`'SparseTensor'`, `'RaggedTensor.fromRowSplits'`, ...): besides pure junk,
   * each property run also takes one example and replaces 1 to all of its arguments with junk, so that checks
   * behind the first argument's are reached too.
   */
  examples?: Readonly<Record<string, readonly (readonly unknown[])[]>>;
  /** Exported objects whose function properties are called with junk too (`initializers`, `optimizers`). */
  namespaces?: readonly string[];
  /** Runs per function. Default 25. */
  runs?: number;
}

/** An example argument list with 1 to all positions replaced by junk. */
function mutate(examples: readonly (readonly unknown[])[]): fc.Arbitrary<unknown[]> {
  return fc
    .tuple(fc.constantFrom(...examples), fc.array(fc.tuple(fc.nat(8), junkArbitrary()), { minLength: 1, maxLength: 4 }))
    .map(([ex, subs]) => {
      const a = ex.slice();
      for (const [pos, v] of subs) if (a.length > 0) a[pos % a.length] = v;
      return a;
    });
}

/** Own and inherited method names of an object (up to Object.prototype), public only. */
function methodNames(o: object): string[] {
  const names = new Set<string>();
  for (let p = Object.getPrototypeOf(o) as object | null; p && p !== Object.prototype; p = Object.getPrototypeOf(p) as object | null) {
    for (const n of Object.getOwnPropertyNames(p)) {
      if (n === 'constructor' || n.startsWith('_')) continue;
      const d = Object.getOwnPropertyDescriptor(p, n);
      if (d && typeof d.value === 'function') names.add(n);
    }
  }
  return [...names];
}

/**
 * Declares the junk-input property tests of a package (vitest): every exported
 * function and class gets random junk arguments (0-4 of them); every method of
 * every target object too, on a fresh object, whose state must not change when the
 * call is rejected.
 */
export function describeJunkSuite(o: JunkSuiteOptions): void {
  const runs = o.runs ?? 25;
  const skip = new Set(o.skip ?? []);
  const args = fc.array(junkArbitrary(), { maxLength: 4 });
  describe(`junk input: ${o.name}`, () => {
    const entries = Object.entries(o.exports).filter(([n, v]) => typeof v === 'function' && !skip.has(n));
    // static methods of exported classes (Tensor.fromNestedArray, RaggedTensor.fromRowSplits, ...)
    for (const [n, v] of [...entries]) {
      if (!/^class\b/.test(Function.prototype.toString.call(v))) continue;
      for (const m of Object.getOwnPropertyNames(v)) {
        const f: unknown = Reflect.get(v as object, m);
        if (typeof f === 'function' && !['length', 'name', 'prototype'].includes(m) && !skip.has(`${n}.${m}`)) entries.push([`${n}.${m}`, f.bind(v)]);
      }
    }
    for (const ns of o.namespaces ?? []) {
      const obj = o.exports[ns] as Record<string, unknown>;
      for (const [n, v] of Object.entries(obj)) if (typeof v === 'function' && !skip.has(`${ns}.${n}`)) entries.push([`${ns}.${n}`, v]);
    }
    it(`every exported function and constructor of ${o.name} accepts junk or rejects it with a coded error (${entries.length} exports)`, async () => {
      const failures: string[] = [];
      for (const [n, f] of entries) {
        const isClass = /^class\b/.test(Function.prototype.toString.call(f));
        const examples = o.examples?.[n] ?? [];
        const mutated = examples.length === 0 ? args : fc.oneof(args, mutate(examples));
        const r = await fc.check(
          fc.asyncProperty(mutated, async (a) => {
            await codedOrOk(() => (isClass ? new (f as new (...x: unknown[]) => unknown)(...a) : (f as (...x: unknown[]) => unknown)(...a)), `${o.name}.${n}(${a.length} args)`);
          }),
          { numRuns: runs },
        );
        if (r.failed) failures.push(`${n}: ${String((r.errorInstance as Error | undefined)?.message ?? r.errorInstance).split('\n')[0]} (args ${fc.stringify(r.counterexample)})`);
      }
      expect(failures).toEqual([]);
    });
    for (const t of o.targets ?? []) {
      it(`every method of ${t.name} accepts junk or rejects it with a coded error, changing nothing`, async () => {
        const probe = await t.make();
        const names = methodNames(probe).filter((n) => !(t.skip ?? []).includes(n));
        t.dispose?.(probe);
        const failures: string[] = [];
        for (const m of names) {
          const ex = t.examples?.[m] ?? [];
          const r = await fc.check(
            fc.asyncProperty(ex.length === 0 ? args : fc.oneof(args, mutate(ex)), async (a) => {
              const obj = await t.make();
              try {
                const before = await t.state(obj);
                const r = await codedOrOk(() => (obj as Record<string, (...x: unknown[]) => unknown>)[m]!(...a), `${t.name}.${m}(${a.length} args)`);
                if (r === 'rejected') expect(await t.state(obj), `${t.name}.${m}: state after a rejected call`).toEqual(before);
              } finally {
                t.dispose?.(obj);
              }
            }),
            { numRuns: Math.max(5, Math.floor(runs / 2)) },
          );
          if (r.failed) failures.push(`${m}: ${String((r.errorInstance as Error | undefined)?.message ?? r.errorInstance).split('\n')[0]} (args ${fc.stringify(r.counterexample)})`);
        }
        expect(failures).toEqual([]);
      });
    }
  });
}
