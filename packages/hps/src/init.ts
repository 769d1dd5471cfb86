import { AlreadyExistsError, checkOptions, FailedPreconditionError, invalidParameter } from '@embedstack/core';
import { HPS } from './server.js';

/** Options of {@link init} (HugeCTR's `hps.Init(global_batch_size, ps_config_file)`). */
export interface InitOptions {
  /** Samples per global batch (all devices). Required, integer >= 1. */
  globalBatchSize: number;
  /** ps.json path; or `psConfig`, the same as an object (exactly one). */
  psConfigFile?: string;
  /** The ps config as an object (HugeCTR's JSON keys), instead of psConfigFile. */
  psConfig?: Record<string, unknown>;
}

let current: Promise<HPS> | null = null;

/**
 * A server a layer call started (no hps.init before it), until a call on it succeeds: the calls
 * using it now. When every one of them was rejected, the server is closed again, so that a
 * rejected call leaves no server behind; after a success it stays, as hps.init's would.
 */
let provisional: { server: Promise<HPS>; calls: number } | null = null;

/** The server a layer's first call started (see {@link withServer}) and from what: for init's message. */
let startedByLayer: { server: Promise<HPS>; from: string } | null = null;

/**
 * Starts the process-wide HPS server the layers look up through.
 * @throws AlreadyExistsError when a server is running, started by init or by a layer's first call
 *   (the message says which; call `shutdown()` first), and HPS.create's errors
 */
export async function init(options: InitOptions): Promise<HPS> {
  const o = checkOptions<InitOptions>(options, ['globalBatchSize', 'psConfigFile', 'psConfig'], 'options', { required: true });
  if (typeof o.globalBatchSize !== 'number' || !Number.isSafeInteger(o.globalBatchSize) || o.globalBatchSize < 1) {
    throw invalidParameter('options.globalBatchSize', 'an integer >= 1', o.globalBatchSize);
  }
  if (current) {
    throw new AlreadyExistsError(
      provisional !== null && provisional.server === current
        ? 'a layer call is starting a server from its own psConfigFile / psConfig (it stays if that call succeeds): await it, or call hps.shutdown() first'
        : startedByLayer !== null && startedByLayer.server === current
          ? `an HPS server is already running: hps.init was not called, so a layer's first call started it from its ${startedByLayer.from}; call hps.init before any layer call (or hps.shutdown() before starting another server)`
          : 'hps.init was already called: call hps.shutdown() before starting another server',
    );
  }
  const started = HPS.create({ ...(o.psConfigFile != null ? { psConfigFile: o.psConfigFile } : {}), ...(o.psConfig != null ? { psConfig: o.psConfig } : {}) });
  current = started;
  try {
    return await started;
  } catch (e) {
    current = null;
    throw e;
  }
}

/**
 * Runs `use` with the server of {@link init}, started from `fallback` when none runs (see
 * `provisional`). @throws FailedPreconditionError when neither exists; init's and `use`'s errors
 */
export async function withServer<T>(fallback: InitOptions | null, use: (server: HPS) => Promise<T>): Promise<T> {
  if (!current) {
    if (!fallback) throw new FailedPreconditionError('No HPS server: call hps.init({ globalBatchSize, psConfigFile }) first or give the layer psConfigFile / psConfig');
    const started = init(fallback); // sets `current` before its first await, unless its checks throw
    if (!current) await started; // rejects with why
    provisional = { server: current!, calls: 0 };
    startedByLayer = { server: current!, from: fallback.psConfigFile != null ? `psConfigFile ${JSON.stringify(fallback.psConfigFile)}` : 'psConfig' };
    void started.catch(() => {}); // its outcome is awaited below, through `current`
  }
  const server = current!;
  const mine = provisional !== null && provisional.server === server ? provisional : null;
  if (mine) mine.calls++;
  try {
    const result = await use(await server);
    if (provisional === mine) provisional = null; // kept from now on
    return result;
  } catch (e) {
    if (mine && provisional === mine && --mine.calls === 0) {
      provisional = null;
      // the call's own error is what the caller gets, whatever the close does
      if (current === server) await shutdown().catch(() => {});
    }
    throw e;
  }
}

/** Closes the server of {@link init} (no-op when none runs). */
export async function shutdown(): Promise<void> {
  const c = current;
  current = null;
  provisional = null;
  startedByLayer = null;
  if (c) await (await c.catch(() => null))?.close();
}
