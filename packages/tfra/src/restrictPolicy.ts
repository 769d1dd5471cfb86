import { checkOptions, type EmbeddingTable, InvalidTypeError, invalidParameter, type Keys } from '@embedstack/core';
import type { TfraKeyDtype } from './keys.js';
import type { Variable } from './variable.js';
import { stateOf } from './variableState.js';

/** Options of `Variable.restrict` / {@link RestrictPolicy.applyRestriction} (TFRA's `restrict(num_reserved, trigger)`). */
export interface RestrictOptions {
  /** Restrict only when the variable holds more than `trigger` keys. Default numReserved. */
  trigger?: number | null;
}

/**
 * Base of the restrict policies (TFRA's `RestrictPolicy`). A policy keeps a status
 * per key in a companion Variable (`status`, same shards and partitioner, in the
 * memory of the active backend); the status is the 64-bit score of the status
 * table's rows. Never constructed directly: pass the class as
 * `new Variable({ restrictPolicy: de.TimestampRestrictPolicy })`.
 */
export abstract class RestrictPolicy {
  /** The Variable this policy restricts. */
  readonly variable: Variable<TfraKeyDtype>;

  /** @throws InvalidTypeError when `variable` is not a de.Variable */
  constructor(variable: Variable<TfraKeyDtype>) {
    if (!stateOf(variable)) throw invalidParameter('variable', 'a de.Variable', variable, InvalidTypeError);
    this.variable = variable;
  }

  /** The status Variable (dim 1). */
  abstract get status(): Variable<TfraKeyDtype>;

  /** Records that `keys` (any order, duplicates allowed) were updated by training. */
  abstract applyUpdate(keys: Keys): Promise<void>;

  /**
   * Runs only when `variable.size() > trigger`: per shard, keeps the
   * floor(numReserved / shards) keys with the highest status (newest timestamp,
   * highest count; ties keep the smaller key; keys without a status rank lowest)
   * and removes the others from the variable, its slots and the status.
   * Resolves to the number of keys removed.
   * @throws InvalidTypeError (non-integer) / InvalidArgumentError (negative) naming the argument
   */
  async applyRestriction(numReserved: number, options: RestrictOptions = {}): Promise<number> {
    const trigger = checkRestrictArguments(numReserved, options);
    const v = this.variable;
    if ((await v.size()) <= trigger) return 0;
    const internal = stateOf(v)!;
    const statusTables = stateOf(this.status)!.tables;
    const perShard = Math.floor(numReserved / v.shardNum);
    let removed = 0;
    for (let s = 0; s < v.shardNum; s++) {
      const scores = await scoreMap(statusTables[s]!);
      const keys: (bigint | number)[] = [];
      for await (const b of internal.stores[s]!.exportBatches()) for (const k of b.keys) keys.push(k);
      if (keys.length <= perShard) continue;
      keys.sort((a, b) => {
        const sa = scores.get(a) ?? 0n;
        const sb = scores.get(b) ?? 0n;
        if (sa !== sb) return sa > sb ? -1 : 1;
        return a < b ? -1 : a > b ? 1 : 0;
      });
      const losers = keys.slice(perShard);
      const arr = v.keyDtype === 'int32' ? Int32Array.from(losers as number[]) : BigInt64Array.from(losers as bigint[]);
      await internal.removeFromShard(s, arr);
      removed += losers.length;
    }
    return removed;
  }
}

/**
 * Checks the arguments of `restrict(numReserved, options)` (with or without a policy).
 * @returns the trigger (default numReserved)
 * @throws InvalidTypeError (non-integer, options not an object) / InvalidArgumentError (negative, unknown option) naming the argument
 */
export function checkRestrictArguments(numReserved: unknown, options: unknown): number {
  if (typeof numReserved !== 'number' || !Number.isSafeInteger(numReserved)) {
    throw invalidParameter('numReserved', 'an integer', numReserved, InvalidTypeError);
  }
  if (numReserved < 0) throw invalidParameter('numReserved', 'an integer >= 0', numReserved);
  const trigger = checkOptions<RestrictOptions>(options as RestrictOptions, ['trigger']).trigger ?? numReserved;
  if (typeof trigger !== 'number' || !Number.isSafeInteger(trigger)) {
    throw invalidParameter('trigger', 'an integer', trigger, InvalidTypeError);
  }
  if (trigger < 0) throw invalidParameter('trigger', 'an integer >= 0', trigger);
  return trigger;
}

async function scoreMap(table: EmbeddingTable): Promise<Map<bigint | number, bigint>> {
  const out = new Map<bigint | number, bigint>();
  for await (const b of table.exportBatches()) for (let i = 0; i < b.keys.length; i++) out.set(b.keys[i]!, b.scores[i]!);
  return out;
}

/** A restrict policy class (e.g. `TimestampRestrictPolicy`), as passed to `new Variable({ restrictPolicy })`. */
export type RestrictPolicyClass = new (variable: Variable<TfraKeyDtype>) => RestrictPolicy;

export function isRestrictPolicyClass(value: unknown): value is RestrictPolicyClass {
  return typeof value === 'function' && (value as { prototype?: unknown }).prototype instanceof RestrictPolicy;
}
