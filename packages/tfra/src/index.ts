// @embedstack/tfra: TensorFlow Recommenders Addons `dynamic_embedding` for Node.js.
// Explicit exports only. Usage: `import * as de from '@embedstack/tfra'`.

export { Variable } from './variable.js';
export type { VariableOptions, LookupOptions, LookupWithExists, StoredKeys, AnyVariable } from './variable.js';
export { getVariable } from './registry.js';
export type { GetVariableOptions } from './registry.js';
export type { TfraValueDtype } from './variableOptions.js';
export { hashString64 } from './keys.js';
export type { TfraKeyDtype, VariableKeys, NestedKeys } from './keys.js';
export type { VariableValues } from './values.js';
export type { VariableInitializer } from './initializer.js';
export { defaultPartitionFn } from './partition.js';
export type { Partitioner } from './partition.js';

// storage
export { KVCreator, CuckooHashTableCreator, HkvHashTableCreator } from './kvCreators.js';
export type { ShardTableSpec, HkvHashTableCreatorOptions, HkvEvictStrategy } from './kvCreators.js';
export { RedisTableConfig, RedisTableCreator } from './redis.js';
export type { RedisTableConfigFields } from './redis.js';

// restrict policies
export { RestrictPolicy } from './restrictPolicy.js';
export type { RestrictOptions, RestrictPolicyClass } from './restrictPolicy.js';
export { TimestampRestrictPolicy, FrequencyRestrictPolicy } from './restrictPolicies.js';

// lookups and training
export { ShadowVariable, enableInferenceMode, enableTrainMode, getModelMode } from './shadow.js';
export type { ModelMode, LookupRecord, RecordedBag, RecordRows } from './shadow.js';
export { embeddingLookup, embeddingLookupUnique, embeddingLookupSparse, safeEmbeddingLookupSparse } from './lookups.js';
export type { EmbeddingLookupOptions, SparseLookupOptions, SafeSparseLookupOptions, WithTrainable } from './lookups.js';
export {
  optimizers,
  Optimizer,
  SGD,
  Momentum,
  Adagrad,
  Adam,
  FTRL,
  Adamax,
  Adadelta,
  DynamicEmbeddingOptimizer,
} from './optimizers.js';
export type {
  LearningRateInput,
  GradAndVar,
  CommonOptions,
  SGDOptions,
  MomentumOptions,
  AdagradOptions,
  AdamOptions,
  FTRLOptions,
  AdamaxOptions,
  AdadeltaOptions,
  DynamicEmbeddingOptimizerOptions,
} from './optimizers.js';

// checkpoints
export type { SaveOptions, LoadOptions } from './checkpoint.js';

// Keras-style layers
export { layers, Embedding, BasicEmbedding, SquashedEmbedding, FieldWiseEmbedding } from './layers.js';
export type { EmbeddingLayerOptions, FieldWiseEmbeddingOptions, LayerCombiner, SlotMapFn } from './layers.js';

// re-exported from core for convenience (initializers of `Variable({ initializer })`, tensors)
export { initializers, Tensor, SparseTensor, RaggedTensor } from '@embedstack/core';

export { facadeBackend } from './backend.js';
