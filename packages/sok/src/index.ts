// @embedstack/sok: NVIDIA SparseOperationKit for Node.js. Explicit exports only.

export { init, shutdown, isInitialized, numDevices } from './context.js';
export type { InitOptions, SokContext } from './context.js';
export { InProcessCommunicator } from './communicator.js';
export type { Communicator, DeviceBuffer } from './communicator.js';
export { SokVariable } from './variable.js';
export type { VariableMode } from './variable.js';
export { DynamicVariable } from './dynamicVariable.js';
export type { DynamicVariableOptions } from './dynamicVariable.js';
export { Variable } from './staticVariable.js';
export type { VariableOptions } from './staticVariable.js';
export type { InitializerName } from './initializer.js';
export { lookupSparse, embeddingLookup } from './lookup.js';
export type { LookupSparseOptions, EmbeddingLookupOptions } from './lookup.js';
export { GradientTape, IndexedSlices } from './tape.js';
export { OptimizerWrapper } from './optimizerWrapper.js';
export type { GradientPair } from './optimizerWrapper.js';
export { optimizers, SokOptimizer, SGD, Momentum, Adagrad, Adam, Adamax, Adadelta, Ftrl } from './optimizers.js';
export type { LrOption, AdamOptions, FtrlOptions } from './optimizers.js';
export { exportVariable, assign, incrementalModelDump, filterVariables, sparseReadAndEvict } from './io.js';
export type { AssignOptions } from './io.js';
export { dump, load, DUMP_FORMAT } from './dump.js';
export { currentScore } from './context.js';
export { All2AllDenseEmbedding, DistributedEmbedding } from './layers.js';
export type { All2AllDenseEmbeddingOptions, DistributedEmbeddingOptions, LayerCallOptions } from './layers.js';
