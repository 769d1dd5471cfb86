import { InvalidTypeError, invalidParameter } from '@embedstack/core';

/**
 * The environment variables the native addon reads when its thread pool starts and when it
 * loads (native/src/thread_pool.cc, memory.cc, binding/async_op.cc). The addon cannot report a bad value (it
 * reads them lazily, deep in native code), so the loader checks them first: a value that
 * is set and not accepted makes the backend unusable, saying why, instead of being ignored.
 */
export interface NativeEnvVariable {
  /** The variable, e.g. `EMBEDSTACK_CPU_THREADS`. */
  name: string;
  /** Smallest accepted value. */
  min: number;
  /** Largest accepted value. */
  max: number;
  /** What the value is, for the message. */
  meaning: string;
}

/** Each variable accepts a whole number in [min, max], written in decimal digits only; unset or empty means the default. */
export const NATIVE_ENV: readonly NativeEnvVariable[] = [
  { name: 'EMBEDSTACK_CPU_THREADS', min: 1, max: 1024, meaning: 'the threads of the native pool' },
  { name: 'EMBEDSTACK_CPU_SPIN_US', min: 0, max: 100000, meaning: 'the microseconds an idle pool worker stays awake' },
  { name: 'EMBEDSTACK_TUNE_MALLOC', min: 0, max: 1, meaning: "whether the addon raises glibc malloc's thresholds (0: it does not)" },
  { name: 'EMBEDSTACK_CPU_RESULT_CACHE_MB', min: 0, max: 65536, meaning: 'the MiB of freed result blocks the addon keeps for reuse' },
  { name: 'EMBEDSTACK_CPU_EARLY_WAIT_US', min: 0, max: 1000000, meaning: "the microseconds the JS thread waits for an async call's end after its early wake-up (tests only)" },
];

/**
 * What is wrong with the native addon's environment variables in `env`, or null when every
 * one is unset, empty or accepted ({@link NATIVE_ENV}). Never throws for a bad value.
 *
 * @throws InvalidTypeError when `env` is not an object
 */
export function nativeEnvProblem(env: NodeJS.ProcessEnv = process.env): string | null {
  if (typeof env !== 'object' || env === null) throw invalidParameter('env', 'an environment object (process.env)', env, InvalidTypeError);
  for (const v of NATIVE_ENV) {
    const raw = env[v.name];
    if (raw === undefined || raw === '') continue;
    const value = String(raw);
    const n = /^[0-9]{1,9}$/.test(value) ? Number(value) : Number.NaN;
    if (!(n >= v.min && n <= v.max)) {
      return `${v.name}=${JSON.stringify(value)} is not accepted: expected a whole number from ${v.min} to ${v.max} (${v.meaning}), in decimal digits, or unset it`;
    }
  }
  return null;
}
