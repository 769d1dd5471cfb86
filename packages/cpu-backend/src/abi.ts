import type {
  LookupCombiner,
  InitializerSpec,
  OptimizerKind,
  ResolvedOptimizer,
  ResolvedShardPlan,
  ResolvedTableOptions,
  ScorePolicy,
  StorageDtype,
} from '@embedstack/core';

/**
 * Fixed layouts of the Float64Array "structs" the addon takes (native/binding/abi.h
 * mirrors them; the addon reports its lengths in `abiFields`, checked at load).
 */
export const TableField = {
  kind: 0,
  dim: 1,
  keyDtype: 2,
  vocabularySize: 3,
  initCapacity: 4,
  maxCapacity: 5,
  initKind: 6,
  initA: 7,
  initB: 8,
  seed: 9,
  stream: 10,
  scorePolicy: 11,
  storageDtype: 12,
} as const;
/** Length of the table config vector (one slot per {@link TableField}). */
export const TABLE_FIELDS = 13;

/** core's StorageDtype -> the addon's (native/src/storage.h StorageDtype). */
export const STORAGE_DTYPE_IDS: Record<StorageDtype, number> = { float32: 0, float16: 1, bfloat16: 2 };

/** Index of each field in the optimizer vector applyGradients takes (native/binding/abi.h OptimizerField), filled by {@link encodeOptimizer}. */
export const OptimizerField = {
  kind: 0,
  lr: 1,
  step: 2,
  clipWeightMin: 3,
  clipWeightMax: 4,
  weightDecay: 5,
  clipGradMin: 6,
  clipGradMax: 7,
  beta1: 8,
  beta2: 9,
  epsilon: 10,
  momentum: 11,
  useNesterov: 12,
  exponent: 13,
  l1: 14,
  l2: 15,
  beta: 16,
  learningRatePower: 17,
  sumInsideSqrt: 18,
  rho: 19,
} as const;
/** Length of the optimizer vector (one slot per {@link OptimizerField}). */
export const OPTIMIZER_FIELDS = 20;

/** The shard-plan vector (native/binding/abi.h PlanField). */
export const PlanField = {
  placement: 0,
  numShards: 1,
  shard: 2,
  start: 3,
  end: 4,
} as const;
/** Length of the shard-plan vector (one slot per {@link PlanField}). */
export const PLAN_FIELDS = 5;

const PLACEMENT_IDS = { mod: 1, range: 2, localized: 3 } as const;

const INIT_KINDS: Record<InitializerSpec['kind'], number> = {
  zeros: 0,
  ones: 1,
  constant: 2,
  row: 3,
  uniform: 4,
  normal: 5,
  truncatedNormal: 6,
  array: 7,
  function: -1,
};

export const SCORE_POLICY_IDS: Record<ScorePolicy, number> = {
  lru: 0,
  lfu: 1,
  epochLru: 2,
  epochLfu: 3,
  timestamp: 4,
  frequency: 5,
  customized: 6,
};

export const OPTIMIZER_IDS: Record<OptimizerKind, number> = {
  sgd: 0,
  adagrad: 1,
  adagradMomentum: 2,
  adam: 3,
  ftrl: 4,
  rowWiseAdagrad: 5,
  momentum: 6,
  adamax: 7,
  adadelta: 8,
};

export const COMBINER_IDS: Record<LookupCombiner, number> = { sum: 0, mean: 1, sqrtn: 2, max: 3, min: 4 };

/** createTable's arguments for one table, as {@link encodeTable} builds them from resolved options. */
export interface EncodedTable {
  /** Float64Array(TABLE_FIELDS) laid out by {@link TableField}. */
  config: Float64Array;
  /** Floats per row of each optimizer slot (dim or 1). */
  slotWidths: Uint32Array;
  /** Initial value of each optimizer slot. */
  slotInitial: Float32Array;
  /** The `row` ([dim]) or `array` ([rows * dim]) initializer's values, else null. */
  initValues: Float32Array | null;
}

/** Resolved table options -> createTable's arguments. */
export function encodeTable(o: ResolvedTableOptions): EncodedTable {
  const c = new Float64Array(TABLE_FIELDS);
  c[TableField.kind] = o.kind === 'static' ? 1 : 0;
  c[TableField.dim] = o.dim;
  c[TableField.keyDtype] = o.keyDtype === 'int32' ? 1 : 0;
  c[TableField.vocabularySize] = o.vocabularySize;
  c[TableField.initCapacity] = o.initCapacity;
  c[TableField.maxCapacity] = o.maxCapacity;
  const init = o.initializer;
  c[TableField.initKind] = INIT_KINDS[init.kind];
  let initValues: Float32Array | null = null;
  switch (init.kind) {
    case 'constant':
      c[TableField.initA] = init.value;
      break;
    case 'uniform':
      c[TableField.initA] = init.min;
      c[TableField.initB] = init.max;
      break;
    case 'normal':
    case 'truncatedNormal':
      c[TableField.initA] = init.mean;
      c[TableField.initB] = init.std;
      break;
    case 'row':
    case 'array':
      initValues = init.values;
      break;
    default:
      break;
  }
  c[TableField.seed] = o.seed;
  c[TableField.stream] = o.stream;
  c[TableField.scorePolicy] = SCORE_POLICY_IDS[o.scorePolicy];
  c[TableField.storageDtype] = STORAGE_DTYPE_IDS[o.storageDtype];
  return {
    config: c,
    slotWidths: Uint32Array.from(o.slots.widths, (w) => (w === 'dim' ? o.dim : 1)),
    slotInitial: Float32Array.from(o.slots.initial),
    initValues,
  };
}

/** A step's resolved optimizer -> applyGradients' optimizer vector. */
export function encodeOptimizer(o: ResolvedOptimizer): Float64Array {
  const v = new Float64Array(OPTIMIZER_FIELDS);
  v[OptimizerField.kind] = OPTIMIZER_IDS[o.kind];
  v[OptimizerField.lr] = o.lr;
  v[OptimizerField.step] = o.step;
  v[OptimizerField.clipWeightMin] = o.clipWeightMin;
  v[OptimizerField.clipWeightMax] = o.clipWeightMax;
  v[OptimizerField.weightDecay] = o.weightDecay;
  v[OptimizerField.clipGradMin] = o.clipGradMin;
  v[OptimizerField.clipGradMax] = o.clipGradMax;
  v[OptimizerField.beta1] = o.beta1;
  v[OptimizerField.beta2] = o.beta2;
  v[OptimizerField.epsilon] = o.epsilon;
  v[OptimizerField.momentum] = o.momentum;
  v[OptimizerField.useNesterov] = o.useNesterov ? 1 : 0;
  v[OptimizerField.exponent] = o.exponent;
  v[OptimizerField.l1] = o.l1;
  v[OptimizerField.l2] = o.l2;
  v[OptimizerField.beta] = o.beta;
  v[OptimizerField.learningRatePower] = o.learningRatePower;
  v[OptimizerField.sumInsideSqrt] = o.sumInsideSqrt ? 1 : 0;
  v[OptimizerField.rho] = o.rho;
  return v;
}

/** A resolved shard plan -> the addon's plan vector (null: no plan). */
export function encodePlan(p: ResolvedShardPlan | null): Float64Array | null {
  if (!p) return null;
  const v = new Float64Array(PLAN_FIELDS);
  v[PlanField.placement] = PLACEMENT_IDS[p.placement];
  v[PlanField.numShards] = p.numShards;
  v[PlanField.shard] = p.shard;
  v[PlanField.start] = p.start;
  v[PlanField.end] = p.end;
  return v;
}
