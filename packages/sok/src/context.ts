import {
  checkInteger,
  checkOptions,
  type EmbeddingBackend,
  FailedPreconditionError,
  InvalidTypeError,
  invalidParameter,
  loadDefaultBackend,
} from '@embedstack/core';
import { type Communicator, InProcessCommunicator } from './communicator.js';

/** `sok.init` options. */
export interface InitOptions {
  /** Number of local devices N (GPUs on the CUDA backend, shards with their own tables on the CPU). Default 1. */
  numDevices?: number;
  /** Backend name or object; default core's registry default (loads @embedstack/cpu-backend when none is registered). */
  backend?: string | EmbeddingBackend;
  /** The exchange between devices; default an {@link InProcessCommunicator} over N local devices. Its numDevices must be N. */
  communicator?: Communicator;
}

/** The state `sok.init` sets up: devices, their backend and their communicator. */
export interface SokContext {
  /** Devices of `sok.init` (one table shard per device). */
  readonly numDevices: number;
  /** The backend every device table lives in. */
  readonly backend: EmbeddingBackend;
  /** Moves ids and rows between the devices. */
  readonly communicator: Communicator;
  /** False once {@link shutdown} ran: variables made under this context refuse work. */
  readonly live: boolean;
}

const MAX_DEVICES = 1024;

interface State {
  numDevices: number;
  backend: EmbeddingBackend;
  communicator: Communicator;
  live: boolean;
  /** The score clock: advanced by every call that touches rows (see {@link nextScore}). */
  clock: number;
}

let current: State | null = null;

/**
 * Sets up N local devices (SOK's `sok.init()`). Runs synchronously (the devices exist
 * when it returns) and returns a Promise: resolved, or rejected with the error below
 * (it never throws). Calling it again with the same device count (and no other
 * backend/communicator) is a no-op.
 *
 * @throws FailedPreconditionError when already initialised with another device count, backend or communicator
 * @throws InvalidArgumentError / InvalidTypeError for bad options; BackendUnavailableError when no backend loads
 */
export function init(options: InitOptions = {}): Promise<void> {
  // Errors reject the returned Promise (as hps.init's do), so `sok.init(x).catch(...)` sees them.
  try {
    initSync(options);
    return Promise.resolve();
  } catch (e) {
    return Promise.reject(e as Error);
  }
}

function initSync(options: InitOptions): void {
  const o = checkOptions<InitOptions>(options, ['numDevices', 'backend', 'communicator'], 'options');
  const numDevices = checkInteger(o.numDevices, 'options.numDevices', { min: 1, max: MAX_DEVICES, fallback: 1 });
  const b = o.backend;
  if (b !== undefined && b !== null && typeof b !== 'string' && (typeof b !== 'object' || typeof b.createTable !== 'function' || typeof b.name !== 'string')) {
    throw invalidParameter('options.backend', 'a backend name or an EmbeddingBackend', b, InvalidTypeError);
  }
  const comm = o.communicator;
  if (comm !== undefined && comm !== null) {
    if (typeof comm !== 'object' || typeof comm.allgather !== 'function' || typeof comm.alltoall !== 'function' || typeof comm.reduceScatter !== 'function' || typeof comm.barrier !== 'function') {
      throw invalidParameter('options.communicator', 'a Communicator (allgather, alltoall, reduceScatter, barrier)', comm, InvalidTypeError);
    }
    if (comm.numDevices !== numDevices) throw invalidParameter('options.communicator.numDevices', `${numDevices} (options.numDevices)`, comm.numDevices);
  }
  if (current) {
    const same = current.numDevices === numDevices && (b === undefined || b === null || backendOf(b) === current.backend) && (comm === undefined || comm === null || comm === current.communicator);
    if (!same) {
      throw new FailedPreconditionError(
        `sok.init was already called with numDevices ${current.numDevices} (backend "${current.backend.name}"); received numDevices ${numDevices}${b ? ` and another backend or communicator` : ''}. Call sok.shutdown() first.`,
        { argument: 'options.numDevices' },
      );
    }
    return;
  }
  const backend = backendOf(b);
  current = { numDevices, backend, communicator: comm ?? new InProcessCommunicator(numDevices), live: true, clock: 0 };
}

/**
 * The backend of `init`: an object as is; a name or nothing through core's loadDefaultBackend,
 * which loads @embedstack/cpu-backend (this package's dependency) when 'cpu' is named or nothing
 * is registered (getBackend alone refused `backend: 'cpu'` in a process that had not imported it).
 */
function backendOf(b: string | EmbeddingBackend | null | undefined): EmbeddingBackend {
  return loadDefaultBackend({ backend: b, from: import.meta.url });
}

/**
 * Ends the current `init` (for tests and for re-initialising with another device
 * count). Variables created before refuse further work (FAILED_PRECONDITION); their
 * tables stay allocated until disposed. A no-op when not initialised.
 */
export function shutdown(): void {
  if (current) current.live = false;
  current = null;
}

/** True after `init` (and before `shutdown`). */
export function isInitialized(): boolean {
  return current !== null;
}

/** The number of devices of the current `init`. @throws FailedPreconditionError before init */
export function numDevices(): number {
  return context().numDevices;
}

/** The current context. @throws FailedPreconditionError before `sok.init` */
export function context(): SokContext {
  if (!current) throw new FailedPreconditionError('sok.init({ numDevices }) must be called before creating or using SOK variables and layers');
  return current;
}

/**
 * The score clock of the current init: every lookup, assign, load and optimizer step
 * advances it by one, and the rows it touches get that score (a DynamicVariable's
 * device tables score rows 'epochLru' with this clock as the epoch, so scores agree
 * across devices). `incrementalModelDump(vars, sinceScore)` exports the rows touched
 * after `sinceScore`. Unlike SOK's GPU timer it counts calls, not time.
 * @throws FailedPreconditionError before init
 */
export function currentScore(): number {
  return (context() as State).clock;
}

/** @internal The value {@link nextScore} would return now, without advancing the clock (a staged load's epoch). */
export function peekScore(ctx: SokContext): number {
  return Math.min((ctx as State).clock + 1, 0xffffffff);
}

/** @internal Advances the clock of `ctx` and returns the new value (the epoch of the next call's touches). */
export function nextScore(ctx: SokContext): number {
  const s = ctx as State;
  s.clock = Math.min(s.clock + 1, 0xffffffff);
  return s.clock;
}
