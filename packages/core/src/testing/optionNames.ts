import { describe, expect, it } from 'vitest';
import { EmbeddingError } from '../errors.js';

/**
 * The option-names test: an API that takes an options object (or another plain object of
 * named fields: a spec, a plan, a list entry) refuses every misspelling of each of its
 * documented names with INVALID_ARGUMENT naming `<argument>.<misspelt name>` and listing the
 * names it knows (upstream Python APIs raise TypeError on an unexpected keyword), changes
 * nothing when it refuses, and accepts every documented name at once.
 */
export interface OptionNamesCase {
  /** What is called, for messages: `'createTable(options)'`. */
  label: string;
  /** The argument path the error names (`'options'`, `'opts.out'`, `'hosts[0]'`). */
  argument: string;
  /** Every documented name of the object. */
  names: readonly string[];
  /**
   * Names without which the object is not recognised at all (an initializer's `kind`, a bag's
   * `keys`): misspelt, the call is refused with any coded error (it names the object, not the name).
   */
  required?: readonly string[];
  /** Called before each call (and before its state is taken): a fresh table, folder, ... */
  reset?: () => void | Promise<void>;
  /** A fresh object holding a valid value under every name in `names`. */
  full: () => Record<string, unknown>;
  /** Calls the API with `obj` in place of the object under test; returns (or resolves to) its result. */
  call: (obj: Record<string, unknown>) => unknown;
  /** Checks the result of the call with every name (assert a value). */
  check: (result: unknown) => void | Promise<void>;
  /** What a refused call must leave unchanged (a snapshot of the state the API could change). */
  state?: () => unknown;
}

/** A case on a fresh object per call (a table, a variable, a server): {@link OptionNamesCase} with `make` in place of `reset`. */
export interface FreshCase<T> extends Pick<OptionNamesCase, 'label' | 'argument' | 'names' | 'required' | 'full'> {
  /** A fresh object, before each call. */
  make: () => T | Promise<T>;
  /** Calls the API on `t` with `obj` in place of the object under test. */
  call: (t: T, obj: Record<string, unknown>) => unknown;
  /** Checks the result of the call with every name, and `t` after it. */
  check: (result: unknown, t: T) => void | Promise<void>;
  /** What a refused call must leave unchanged in `t`. */
  state?: (t: T) => unknown;
}

/** The {@link OptionNamesCase} of a {@link FreshCase}. */
export function onFresh<T>(c: FreshCase<T>): OptionNamesCase {
  let t: T;
  const { make, call, check, state, ...rest } = c;
  return {
    ...rest,
    reset: async () => {
      t = await make();
    },
    call: (o) => call(t, o),
    check: (r) => check(r, t),
    state: state && (() => state(t)),
  };
}

/** Misspellings of `name` a caller makes: the last letter dropped, snake_case / lower case, a letter doubled. */
export function misspellings(name: string): string[] {
  const snake = name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  const out = [name.slice(0, -1), snake === name ? `${name}_` : snake, `${name}${name.slice(-1)}`];
  return [...new Set(out)].filter((m) => m.length > 0 && m !== name);
}

async function outcome(fn: () => unknown): Promise<{ ok: true; value: unknown } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await fn() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** Runs one case's checks (see {@link OptionNamesCase}). */
export async function checkOptionNames(c: OptionNamesCase): Promise<void> {
  const required = c.required ?? [];
  await c.reset?.();
  for (const name of [...c.names, ...required]) {
    expect(Object.keys(c.full()), `${c.label}: full() sets ${name}`).toContain(name);
    // a misspelling that is another documented name is not a misspelling (beta1 -> beta)
    for (const typo of misspellings(name).filter((m) => !c.names.includes(m) && !required.includes(m))) {
      const obj = c.full();
      const value = obj[name];
      delete obj[name];
      obj[typo] = value;
      await c.reset?.();
      const before = c.state ? await c.state() : undefined;
      const r = await outcome(() => c.call(obj));
      expect(r.ok, `${c.label}: ${typo} (for ${name}) was accepted`).toBe(false);
      const e = (r as { error: unknown }).error;
      expect(e, `${c.label}: ${typo}: ${String(e)}`).toBeInstanceOf(EmbeddingError);
      const err = e as EmbeddingError;
      if (!required.includes(name)) {
        expect([err.code, err.argument], `${c.label}: ${typo}: ${err.message}`).toEqual(['INVALID_ARGUMENT', `${c.argument}.${typo}`]);
        for (const known of c.names) expect(err.message, `${c.label}: the message lists ${known}`).toContain(known);
      }
      if (c.state) expect(await c.state(), `${c.label}: state after refusing ${typo}`).toEqual(before);
    }
  }
  await c.reset?.();
  const r = await outcome(() => c.call(c.full()));
  if (!r.ok) throw new Error(`${c.label}: every documented name at once was refused: ${String(r.error)}`);
  await c.check(r.value);
}

/** One vitest `it` per case, inside `describe(title)`. */
export function describeOptionNames(title: string, cases: readonly OptionNamesCase[], timeout?: number): void {
  describe(title, () => {
    for (const c of cases) {
      it(`${c.label}: each of ${c.names.length} names misspelt is refused, nothing changed; all together accepted`, () => checkOptionNames(c), timeout);
    }
  });
}
