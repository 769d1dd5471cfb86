import { InvalidArgumentError, InvalidTypeError, invalidParameter } from '@embedstack/core';

/**
 * Nested structures as TF's `nest`: plain objects (keys visited in sorted order),
 * arrays (in order) and leaves. The feature config fixes the structure; features,
 * weights, activations and gradients follow it ("flatten up to" the config, so a
 * nested number array may be a leaf of the inputs).
 */
export type Nest<T> = T | readonly Nest<T>[] | { readonly [key: string]: Nest<T> };

/**
 * The structure of a feature config with every FeatureConfig leaf replaced by `Leaf`
 * (objects keep their keys, arrays and tuples their positions): the type of
 * activations, inputs, weights and gradients of a TPUEmbedding over that config.
 */
export type StructureOf<F, Leaf, Config> = [Nest<Config>] extends [F] ? Nest<Leaf> : Mapped<F, Leaf, Config, []>;

/** StructureOf of a concrete structure (depth-limited: structures nest at most 10 levels). */
export type Mapped<F, Leaf, Config, D extends unknown[]> = D['length'] extends 10
  ? unknown
  : F extends Config
    ? Leaf
    : F extends readonly unknown[]
      ? { -readonly [K in keyof F]: Mapped<F[K], Leaf, Config, [...D, 0]> }
      : F extends object
        ? { -readonly [K in keyof F]: Mapped<F[K], Leaf, Config, [...D, 0]> }
        : never;

/** One leaf of a flattened structure and its path (`features.watched`, `features[0].a`). */
export interface FlatEntry<T> {
  path: string;
  leaf: T;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function child(path: string, key: string | number): string {
  return typeof key === 'number' ? `${path}[${key}]` : `${path}.${key}`;
}

/**
 * Flattens a structure whose leaves satisfy `isLeaf` (object keys sorted, arrays in
 * order). Anything that is neither a leaf, an array nor a plain object is an error.
 *
 * @throws InvalidTypeError naming the path of the bad element; InvalidArgumentError when empty
 */
export function flattenStructure<T>(
  structure: unknown,
  isLeaf: (value: unknown) => value is T,
  argument: string,
  leafName: string,
): FlatEntry<T>[] {
  const out: FlatEntry<T>[] = [];
  const walk = (node: unknown, path: string): void => {
    if (isLeaf(node)) out.push({ path, leaf: node });
    else if (Array.isArray(node)) node.forEach((v, i) => walk(v, child(path, i)));
    else if (isPlainObject(node)) for (const k of Object.keys(node).sort()) walk(node[k], child(path, k));
    else throw invalidParameter(path, `a ${leafName} or a nested object/array of them`, node, InvalidTypeError);
  };
  walk(structure, argument);
  if (out.length === 0) throw invalidParameter(argument, `at least one ${leafName}`, structure);
  return out;
}

/**
 * The values of `value` at the leaf positions of `structure`, in flatten order.
 * `value` must have the same nesting (same object keys, same array lengths) down to
 * the structure's leaves; what sits at a leaf position is returned as is. When
 * `allowAbsent` is set, `undefined`/`null` for the whole value means "all absent".
 *
 * @throws InvalidArgumentError naming the path where the structures differ
 */
export function flattenUpTo(
  structure: unknown,
  isLeaf: (value: unknown) => boolean,
  value: unknown,
  argument: string,
  allowAbsent = false,
): unknown[] {
  const out: unknown[] = [];
  const absent = allowAbsent && (value === undefined || value === null);
  const walk = (node: unknown, v: unknown, path: string): void => {
    if (isLeaf(node)) {
      out.push(absent ? undefined : v);
      return;
    }
    if (Array.isArray(node)) {
      if (!absent && (!Array.isArray(v) || v.length !== node.length)) {
        throw invalidParameter(path, `an array of length ${node.length} (the feature config's structure)`, v);
      }
      node.forEach((n, i) => walk(n, absent ? undefined : (v as unknown[])[i], child(path, i)));
      return;
    }
    const keys = Object.keys(node as object).sort();
    if (!absent) {
      if (!isPlainObject(v)) throw invalidParameter(path, `an object with keys [${keys.join(', ')}] (the feature config's structure)`, v);
      const got = Object.keys(v).sort();
      if (got.length !== keys.length || got.some((k, i) => k !== keys[i])) {
        throw new InvalidArgumentError(
          `Expected ${path} to have the keys [${keys.join(', ')}] of the feature config but received keys [${got.join(', ')}]`,
          { argument: path },
        );
      }
    }
    for (const k of keys) walk((node as Record<string, unknown>)[k], absent ? undefined : (v as Record<string, unknown>)[k], child(path, k));
  };
  walk(structure, value, argument);
  return out;
}

/** Builds a structure like `structure` whose leaves are `leaves` (in flatten order). */
export function packSequenceAs<T>(structure: unknown, isLeaf: (value: unknown) => boolean, leaves: readonly T[]): Nest<T> {
  let i = 0;
  const build = (node: unknown): Nest<T> => {
    if (isLeaf(node)) return leaves[i++]!;
    if (Array.isArray(node)) return node.map(build);
    const out: Record<string, Nest<T>> = {};
    for (const k of Object.keys(node as object).sort()) out[k] = build((node as Record<string, unknown>)[k]);
    return out;
  };
  const result = build(structure);
  if (i !== leaves.length) throw new InvalidArgumentError(`Expected ${i} leaves but received ${leaves.length}`);
  return result;
}
