import { UnsupportedError } from '@embedstack/core';
import type { UpdateSourceConfig } from './config.js';

/** A running update source. */
export interface UpdateSource {
  stop(): Promise<void>;
}

/** Applies one message: table tag `hps_et.<model>.<table>`, keys, rows. */
export type UpdateHandler = (tag: string, keys: BigInt64Array, values: Float32Array) => Promise<void>;

/** Starts consuming online updates (milestone 3). @throws UnsupportedError for now */
export async function startUpdateSource(config: UpdateSourceConfig, handler: UpdateHandler): Promise<UpdateSource> {
  void handler;
  throw new UnsupportedError(`update_source.type '${config.type}' is not available in this build yet`);
}
