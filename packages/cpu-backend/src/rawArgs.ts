import { type Bag, InvalidTypeError, invalidParameter, type Keys, type LookupCombiner, type ResolvedOptimizer, type ResolvedShardPlan } from '@embedstack/core';
import { COMBINER_IDS, OPTIMIZER_IDS, OptimizerField } from './abi.js';

/**
 * The checks CpuRawTable runs on what its JS layer reads itself before the addon sees an
 * argument (a length to size a result, a bag's fields, the optimizer and plan it encodes):
 * junk there is a coded error (InvalidTypeError naming the argument), not a TypeError from
 * reading a property of undefined or converting a BigInt. The addon checks the arrays it
 * receives (types, lengths, detached buffers) and every number itself. Each check reads only
 * what a valid argument has, and costs a few typeof tests per call.
 */

/** The length of a typed array, read by the engine (no user getter); 0 for anything else (the addon refuses it). */
const typedLength = Function.prototype.call.bind(Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Int32Array.prototype) as object, 'length')!.get!) as (a: ArrayBufferView) => number;

export function lengthOf(a: unknown): number {
  if (!ArrayBuffer.isView(a) || a instanceof DataView) return 0;
  return typedLength(a);
}

/** An object (not null), for the fields read from it. */
function checkObject(v: unknown, argument: string, expected: string): void {
  if (typeof v !== 'object' || v === null) throw invalidParameter(argument, expected, v, InvalidTypeError);
}

/** A bag is an object ({ rowSplits, keys, weights }); the addon checks its arrays. */
export function checkBag(bag: unknown): Bag<Keys> {
  checkObject(bag, 'bag', 'a bag ({ rowSplits, keys, weights })');
  return bag as Bag<Keys>;
}

/** A find output is null (fresh arrays) or an object ({ values, exists }); the addon checks its arrays. */
export function checkFindOut(out: unknown): void {
  if (out !== null && out !== undefined) checkObject(out, 'out', '{ values, exists } or null');
}

/** The combiner's id for the addon. */
export function combinerId(c: unknown): number {
  if (typeof c !== 'string' || !Object.prototype.hasOwnProperty.call(COMBINER_IDS, c)) {
    throw invalidParameter('combiner', `one of ${Object.keys(COMBINER_IDS).join(', ')}`, c, InvalidTypeError);
  }
  return COMBINER_IDS[c as LookupCombiner];
}

/** The optimizer vector's number fields (abi.ts OptimizerField, in its order), without the kind and the two flags. */
const OPTIMIZER_NUMBERS = (Object.keys(OptimizerField) as (keyof typeof OptimizerField)[]).filter(
  (f) => f !== 'kind' && f !== 'useNesterov' && f !== 'sumInsideSqrt',
);

/** A resolved optimizer (core's resolveOptimizer): a known kind and a number in every field the addon reads. */
export function checkOptimizer(o: unknown): ResolvedOptimizer {
  const expected = 'a resolved optimizer (resolveOptimizer)';
  checkObject(o, 'optimizer', expected);
  const r = o as Record<string, unknown>;
  if (typeof r.kind !== 'string' || !Object.prototype.hasOwnProperty.call(OPTIMIZER_IDS, r.kind)) throw invalidParameter('optimizer.kind', expected, r.kind, InvalidTypeError);
  for (const f of OPTIMIZER_NUMBERS) if (typeof r[f] !== 'number') throw invalidParameter(`optimizer.${f}`, 'a number', r[f], InvalidTypeError);
  return o as ResolvedOptimizer;
}

const PLAN_FIELDS = ['numShards', 'shard', 'start', 'end'] as const;

/** A resolved shard plan (core's resolveShardPlan), or null / undefined for none; the addon checks its numbers' values. */
export function checkPlan(p: unknown, argument = 'plan'): ResolvedShardPlan | null {
  if (p === null || p === undefined) return null;
  checkObject(p, argument, 'a resolved shard plan (resolveShardPlan) or null');
  const r = p as Record<string, unknown>;
  if (r.placement !== 'mod' && r.placement !== 'range' && r.placement !== 'localized') throw invalidParameter(`${argument}.placement`, "'mod', 'range' or 'localized'", r.placement, InvalidTypeError);
  for (const f of PLAN_FIELDS) if (typeof r[f] !== 'number') throw invalidParameter(`${argument}.${f}`, 'a number', r[f], InvalidTypeError);
  return p as ResolvedShardPlan;
}

/** Plans of the shard parts ([{ raw, plan }]), each checked. */
export function checkParts(parts: unknown): readonly { raw: unknown; plan: ResolvedShardPlan }[] {
  if (!Array.isArray(parts)) throw invalidParameter('parts', 'an array of { raw, plan }', parts, InvalidTypeError);
  for (let i = 0; i < parts.length; i++) {
    const p: unknown = parts[i];
    checkObject(p, `parts[${i}]`, '{ raw, plan }');
    const plan = checkPlan((p as { plan?: unknown }).plan, `parts[${i}].plan`);
    if (plan === null) throw invalidParameter(`parts[${i}].plan`, 'a resolved shard plan', plan, InvalidTypeError);
  }
  return parts as { raw: unknown; plan: ResolvedShardPlan }[];
}
