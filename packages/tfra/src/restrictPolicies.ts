import type { Keys } from '@embedstack/core';
import { INTERNAL } from './internal.js';
import { storageDtype, uniqueKeys } from './keys.js';
import { ScoredTableCreator } from './kvCreators.js';
import { RestrictPolicy } from './restrictPolicy.js';
import { Variable } from './variable.js';

function statusVariable(v: Variable, suffix: string, policy: 'timestamp' | 'frequency'): Variable {
  return new Variable({
    name: `${v.name}/${suffix}`,
    keyDtype: storageDtype(v.keyDtype),
    dim: 1,
    devices: v.devices,
    partitioner: v.partitioner,
    trainable: false,
    checkpoint: v.checkpoint,
    kvCreator: new ScoredTableCreator(policy),
  });
}

/**
 * Oldest-out-first (TFRA's `TimestampRestrictPolicy`). Status: the wall-clock
 * second of the key's last update (the status table's 'timestamp' score; its value
 * holds the same second as float32, approximate). `restrict` keeps the newest.
 */
export class TimestampRestrictPolicy extends RestrictPolicy {
  readonly #status: Variable;

  constructor(variable: Variable) {
    super(variable);
    this.#status = statusVariable(variable, 'timestamp', 'timestamp');
  }

  get status(): Variable {
    return this.#status;
  }

  async applyUpdate(keys: Keys): Promise<void> {
    const { unique } = uniqueKeys(keys);
    await this.#status.upsert(unique, new Float32Array(unique.length).fill(Math.floor(Date.now() / 1000)));
  }
}

/**
 * Lowest-occurrence-out-first (TFRA's `FrequencyRestrictPolicy`). Status: the
 * number of update calls in which the key appeared (once per call even if
 * repeated); held as the status table's 'frequency' score and as its value.
 * `restrict` keeps the most frequent.
 */
export class FrequencyRestrictPolicy extends RestrictPolicy {
  readonly #status: Variable;

  constructor(variable: Variable) {
    super(variable);
    this.#status = statusVariable(variable, 'frequency', 'frequency');
  }

  get status(): Variable {
    return this.#status;
  }

  async applyUpdate(keys: Keys): Promise<void> {
    const { unique } = uniqueKeys(keys);
    const { values, exists } = await this.#status[INTERNAL].find(unique);
    const next = values.map((c, i) => (exists[i] ? c + 1 : 1));
    await this.#status.accum(unique, values, next, exists);
  }
}
