// @embedstack/tpu-embedding: TensorFlow's TPU embedding mid-level API on embedstack backends.

export { TableConfig, FeatureConfig } from './config.js';
export type { TableConfigOptions, FeatureConfigOptions, TableInitializer } from './config.js';
export { EmbeddingOptimizer, SGD, Adagrad, AdagradMomentum, Adam, FTRL } from './optimizers.js';
export type {
  LearningRateInput,
  ClipValue,
  SlotValue,
  SlotCreationTable,
  SlotVariableCreationFn,
  CommonOptimizerOptions,
  RawOptimizerOptions,
  AdagradOptions,
  AdagradMomentumOptions,
  AdamOptions,
  FTRLOptions,
} from './optimizers.js';
export { MAX_STRATEGY_COUNT, ReplicaStrategy, shardRanges } from './strategy.js';
export type { ReplicaStrategyOptions, ShardRange } from './strategy.js';
export { TPUEmbedding } from './tpuEmbedding.js';
export type {
  TPUEmbeddingOptions,
  EnqueueOptions,
  DequeueOptions,
  FeatureInputs,
  FeatureInput,
  FeatureWeight,
  FeatureGradient,
  PerFeature,
} from './tpuEmbedding.js';
export { servingEmbeddingLookup, cpuEmbeddingLookup } from './serving.js';
export type { Nest, StructureOf, Mapped } from './nest.js';
