import { type Keys, OutOfRangeError } from '@embedstack/core';
import { routeKeys } from './route.js';
import type { SokVariable } from './variable.js';

/**
 * The row budget of a v1 layer's hashtable (`useHashtable: true`): SOK v1 gives each
 * device a fixed table of `maxVocabularySizePerGpu` rows, and a key that finds it full
 * fails there. Here a training call that would insert more new keys on a device than its
 * budget leaves is refused with OUT_OF_RANGE before anything is inserted; the call is
 * otherwise unchanged (a call reading only resident keys, or `training: false`, always
 * runs).
 *
 * The check costs nothing while every device has room for the whole batch (its rows, the
 * in-flight calls' reservations and the batch's key count fit). Close to the budget it
 * counts the batch's keys per owning device, and only when even that does not fit does it
 * wait for the layer's in-flight calls and count the distinct new keys per device exactly
 * (a `find` of the batch's keys, which counts as a read of the resident ones for 'lru'
 * scores), admitting no other call until it has decided. Calls in flight hold a
 * reservation, so concurrent calls never overshoot.
 */
export class HashtableBudget {
  /** Rows per device. */
  readonly perDevice: number;
  /** What the layer's name is in messages. */
  readonly #what: string;
  #reserved: number[] = [];
  readonly #inflight = new Set<Promise<unknown>>();
  /** Set while a call counts its new keys exactly (see run). */
  #gate: Promise<void> | null = null;

  constructor(perDevice: number, what: string) {
    this.perDevice = perDevice;
    this.#what = what;
  }

  /**
   * Runs `fn` (a training lookup of `keys` on `v`) once the budget admits `keys`.
   * @throws OutOfRangeError naming the device, its rows and the new keys; nothing is inserted then
   */
  async run<T>(v: SokVariable, keys: Keys, fn: () => Promise<T>): Promise<T> {
    // An exact count in progress admits nothing else until it has decided.
    while (this.#gate) await this.#gate;
    const shards = v.shards;
    if (this.#reserved.length !== shards.length) this.#reserved = shards.map(() => 0);
    const cap = this.perDevice;
    const fits = (need: readonly number[]): boolean => shards.every((s, i) => s.table.size() + this.#reserved[i]! + need[i]! <= cap);
    let need: number[] = shards.map(() => keys.length);
    if (!fits(need)) {
      const routed = routeKeys(v, keys);
      need = routed.map((r) => r.local.length);
      if (!fits(need)) {
        let open!: () => void;
        const gate = new Promise<void>((resolve) => (open = resolve));
        this.#gate = gate;
        const release = (): void => {
          if (this.#gate === gate) this.#gate = null;
          open();
        };
        try {
          while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight]);
          // Nothing in flight and nothing admitted until the gate opens: the counts are exact.
          need = await Promise.all(routed.map(async (r) => newKeys((await r.shard.table.find(r.local)).exists, r.local)));
          const bad = shards.findIndex((s, i) => s.table.size() + need[i]! > cap);
          if (bad >= 0) {
            const s = shards[bad]!;
            throw new OutOfRangeError(
              `${this.#what}'s hashtable is full: device ${s.device} holds ${s.table.size()} of its maxVocabularySizePerGpu = ${cap} rows and this call would insert ${need[bad]} new keys there (SOK v1's table has a fixed size per device). Raise maxVocabularySizePerGpu, or look up with { training: false } (no insertion)`,
              { argument: 'ids' },
            );
          }
          return await this.#admit(need, fn, release);
        } finally {
          release();
        }
      }
    }
    return this.#admit(need, fn, null);
  }

  /** Reserves `need` rows per device while `fn` runs (`started`: called once it is in flight). */
  async #admit<T>(need: number[], fn: () => Promise<T>, started: (() => void) | null): Promise<T> {
    need.forEach((n, i) => (this.#reserved[i]! += n));
    let p: Promise<T>;
    try {
      p = fn();
    } catch (e) {
      need.forEach((n, i) => (this.#reserved[i]! -= n));
      throw e;
    }
    this.#inflight.add(p);
    started?.();
    try {
      return await p;
    } finally {
      this.#inflight.delete(p);
      need.forEach((n, i) => (this.#reserved[i]! -= n));
    }
  }
}

/** Distinct keys of `keys` whose `exists` is 0. */
function newKeys(exists: Uint8Array, keys: Keys): number {
  const seen = new Set<bigint | number>();
  for (let i = 0; i < keys.length; i++) if (exists[i] === 0) seen.add(keys[i]!);
  return seen.size;
}
