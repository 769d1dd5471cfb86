// @embedstack/tfjs: TensorFlow.js interop. Explicit exports only.

// converters
export { toTf, fromTf, toTfSparse, fromTfSparse, toTfRagged, fromTfRagged, int64KeysOf } from './convert.js';
export type { Int64Mode, ToTfOptions, FromTfOptions, TfSparse, TfRagged } from './convert.js';
export type { IdsInput } from './ids.js';

// layers
export { SparseEmbeddingLayer } from './sparseLayer.js';
export type { SparseLayerOptions, OutputMode, LookupPart, PreparedBatch } from './sparseLayer.js';
export { TPUEmbeddingLayer } from './tpuLayer.js';
export type { TPUEmbeddingLayerOptions, TPUEmbeddingLookupOptions } from './tpuLayer.js';
export { TfraEmbeddingLayer } from './tfraLayer.js';
export type { TfraEmbeddingLayerOptions, TfraEmbeddingLookupOptions } from './tfraLayer.js';
export { SokEmbeddingLayer } from './sokLayer.js';
export type { SokEmbeddingLayerOptions, SokEmbeddingLookupOptions, SokCombiner } from './sokLayer.js';
