import type { Keys } from '@embedstack/core';
import { storageDtype, type TfraKeyDtype, uniqueKeys } from './keys.js';
import { ScoredTableCreator } from './kvCreators.js';
import { RestrictPolicy } from './restrictPolicy.js';
import { Variable } from './variable.js';
import { stateOf } from './variableState.js';

/** A policy whose status Variable `<name>/<policy>` scores its rows with core's policy of the same name. */
abstract class StatusPolicy extends RestrictPolicy {
  readonly #status: Variable<TfraKeyDtype>;

  constructor(variable: Variable<TfraKeyDtype>, policy: 'timestamp' | 'frequency') {
    super(variable);
    this.#status = new Variable({
      name: `${variable.name}/${policy}`,
      keyDtype: storageDtype(variable.keyDtype),
      dim: 1,
      devices: variable.devices,
      partitioner: variable.partitioner,
      trainable: false,
      checkpoint: variable.checkpoint,
      kvCreator: new ScoredTableCreator(policy),
    });
  }

  get status(): Variable<TfraKeyDtype> {
    return this.#status;
  }
}

/**
 * Oldest-out-first (TFRA's `TimestampRestrictPolicy`). Status: the wall-clock
 * second of the key's last update (the status table's 'timestamp' score; its value
 * holds the same second as float32, approximate). `restrict` keeps the newest.
 */
export class TimestampRestrictPolicy extends StatusPolicy {
  constructor(variable: Variable<TfraKeyDtype>) {
    super(variable, 'timestamp');
  }

  async applyUpdate(keys: Keys): Promise<void> {
    const { unique } = uniqueKeys(keys);
    await this.status.upsert(unique, new Float32Array(unique.length).fill(Math.floor(Date.now() / 1000)));
  }
}

/**
 * Lowest-occurrence-out-first (TFRA's `FrequencyRestrictPolicy`). Status: the
 * number of update calls in which the key appeared (once per call even if
 * repeated); held as the status table's 'frequency' score and as its value.
 * `restrict` keeps the most frequent.
 */
export class FrequencyRestrictPolicy extends StatusPolicy {
  constructor(variable: Variable<TfraKeyDtype>) {
    super(variable, 'frequency');
  }

  async applyUpdate(keys: Keys): Promise<void> {
    const { unique } = uniqueKeys(keys);
    const { values, exists } = await stateOf(this.status)!.find(unique);
    const next = values.map((c, i) => (exists[i] ? c + 1 : 1));
    await this.status.accum(unique, values, next, exists);
  }
}
