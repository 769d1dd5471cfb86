// @embedstack/core: backend-agnostic contracts. Explicit exports only.

// errors
export {
  ErrorCodes,
  EmbeddingError,
  InvalidArgumentError,
  InvalidTypeError,
  ShapeMismatchError,
  OutOfRangeError,
  NotFoundError,
  AlreadyExistsError,
  FailedPreconditionError,
  UnsupportedError,
  DisposedError,
  CheckpointCorruptError,
  IOError,
  BackendUnavailableError,
  StoreUnavailableError,
  InternalError,
  invalidParameter,
  argName,
  describeValue,
  check,
} from './errors.js';
export type { ErrorCode, EmbeddingErrorOptions, ErrorClass } from './errors.js';

// dtypes, tensors, keys
export { DTYPES, KEY_DTYPES, dtypeOf, isDataArray, isKeyDtype } from './dtypes.js';
export type { Dtype, KeyDtype, ValueDtype, Keys, DataArray, TypedArrayFor } from './dtypes.js';
export { validateShape } from './shape.js';
export { Tensor, toTypedArray } from './tensor.js';
export type { Nested } from './tensor.js';
export { SparseTensor, RaggedTensor, sparseFromDense } from './sparse.js';
export type { Row } from './sparse.js';
export { normalizeKeys } from './keys.js';
export type { KeyInput } from './keys.js';
export { fileNameOf } from './fileNames.js';
export { layoutDifference, toBag, toOrderedBag } from './bag.js';
export type { BagInput, BagWeights, OrderedBag } from './bag.js';
export { resolveShardPlan } from './shardPlan.js';
export type { ShardPlan, ShardPlacement, ResolvedShardPlan, PlanTarget, PlanEntries } from './shardPlan.js';

// low-level helpers (argument-checked wrappers of what core uses internally)
export {
  mix32,
  fnv1a32,
  randomWord,
  keyWords,
  uniform01,
  standardNormal,
  initialRow,
  shapeSize,
  shapesEqual,
  formatShape,
  assertShape,
  keyShape,
  keyAt,
  floorMod,
  takeKeys,
  makeKeys,
  bagFromSegments,
  localKeyOf,
  planEntries,
  checkOwnedRows,
  describePlan,
  firstOutOfRange,
  checkRowIndices,
  crc32c,
  slotFloatsPerRow,
  sameSlotLayout,
  resolveOptimizer,
} from './checked.js';

// combiners, initializers, optimizers, scores
export { COMBINERS, isCombiner, validateCombiner, LOOKUP_COMBINERS, isLookupCombiner, validateLookupCombiner, validateMaxNorm } from './combiners.js';
export type { Combiner, LookupCombiner, Bag } from './combiners.js';
export { initializers, isInitializerSpec, resolveInitializer } from './initializers.js';
export type { InitializerSpec, ResolvedInitializer } from './initializers.js';

export {
  optimizers,
  createOptimizer,
  isOptimizerSpec,
  slotLayoutOf,
} from './optimizers.js';
export type {
  OptimizerKind,
  OptimizerSpec,
  OptimizerOptions,
  OptimizerHyper,
  CommonOptimizerOptions,
  ResolvedOptimizer,
  SlotLayout,
  LearningRate,
} from './optimizers.js';
export { SCORE_POLICIES, validateScorePolicy, scoresOnRead } from './scores.js';
export type { ScorePolicy } from './scores.js';

// tables and backends
export { resolveTableOptions } from './tableOptions.js';
export {
  checkStorageDtype,
  isStorageDtype,
  roundBfloat16,
  roundFloat16,
  roundToStorage,
  STORAGE_BYTES,
  STORAGE_DTYPES,
} from './storageDtype.js';
export type { StorageDtype } from './storageDtype.js';
export type { TableOptions, ResolvedTableOptions } from './tableOptions.js';
export { rawTableFromSync } from './rawTable.js';
export { checkedRawOps } from './rawArgs.js';
export type { ShardPart, RawTable, RawTableSync, RawTableAsync, FindResult, ExportBatch, Promisified } from './rawTable.js';
export {
  registerBackend,
  unregisterBackend,
  listBackends,
  hasBackend,
  setDefaultBackend,
  getBackend,
  loadDefaultBackend,
  DEFAULT_BACKEND_PACKAGE,
  FALLBACK_ENV,
  OPTIONAL_BACKEND_PACKAGES,
} from './backend.js';
export type { EmbeddingBackend, BackendCapabilities, DeviceInfo, LoadDefaultBackendOptions } from './backend.js';
export { EmbeddingTable, createTable, lookupCombinedShards, lookupCombinedShardsSync, applyCombinedGradientsShards, applyCombinedGradientsShardsSync } from './table.js';
export { EmbeddingCache, createCache, resolveCacheOptions, CACHE_DEFAULT_WAYS } from './cache.js';
export type { CacheOptions, ResolvedCacheOptions, RawCache, CacheQueryResult, CacheQueryOptions } from './cache.js';
export { validateValues, validateExists } from './values.js';
export {
  checkOptions,
  checkKnownKeys,
  checkBoolean,
  checkInteger,
  checkNumber,
  checkName,
  checkFunction,
  errorClassFor,
} from './validation.js';
export type { OptionsCheck, RangeCheck, JsType } from './validation.js';
export type {
  ValuesInput,
  ExistsInput,
  WriteOptions,
  FindOutput,
  FindOptions,
  CombinerOptions,
  LookupCombinedOptions,
  PartialLookupOptions,
  ShardsLookupOptions,
  TableShard,
  BackwardOptions,
  CombinedGradientsOptions,
  ApplyGradientsOptions,
} from './table.js';

// reference backend (the test oracle; plain TypeScript, not the product path)
// BEGIN reference exports
export { ReferenceBackend, referenceBackend, referenceKernels, ReferenceCache, ReferenceDynamicTable, ReferenceStaticTable } from './reference/index.js';
export type { ScoreClock, EvictionCandidate, OwnedEntries } from './reference/index.js';
// END reference exports

// checkpoints and the HugeCTR layout
// BEGIN checkpoint exports
export {
  CHECKPOINT_FORMAT,
  CHECKPOINT_FORMAT_VERSION,
  saveTable,
  loadTable,
  readTableManifest,
  readCheckpointBatches,
  verifyCheckpoint,
  exportHugeCTR,
  importHugeCTR,
  readHugeCTRModel,
  inspectHugeCTRModel,
  HUGECTR_KEY_FILE,
  HUGECTR_VECTOR_FILE,
} from './checkpoint/index.js';
export type {
  TableManifest,
  CheckpointFileInfo,
  CheckpointSlot,
  CheckpointDtype,
  ManifestInitializer,
  SaveTableOptions,
  LoadTableOptions,
  CheckpointBatch,
  HugeCTRKeyFormat,
  HugeCTRReadOptions,
  HugeCTRModelInfo,
  HugeCTRBatch,
  ImportHugeCTROptions,
  ExportHugeCTROptions,
} from './checkpoint/index.js';
// END checkpoint exports
// one committed version of a set of files (facades' multi-table checkpoints; tfra)
export { saveVersionedDir, liveVersionDir, writeDurableFile } from './checkpoint/versionedDir.js';
export type { VersionedDirFill } from './checkpoint/versionedDir.js';
