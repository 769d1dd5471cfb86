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
  /** 0 dynamic, 1 static. */
  kind: 0,
  /** Floats per row. */
  dim: 1,
  /** 0 int64, 1 int32. */
  keyDtype: 2,
  /** Static: rows; dynamic: 0. */
  vocabularySize: 3,
  /** Dynamic: rows reserved up front. */
  initCapacity: 4,
  /** Dynamic: row cap (Infinity when uncapped). */
  maxCapacity: 5,
  /** Initializer kind: 0 zeros, 1 ones, 2 constant, 3 row, 4 uniform, 5 normal, 6 truncatedNormal, 7 array. */
  initKind: 6,
  /** constant: value; uniform: min; normal / truncatedNormal: mean. */
  initA: 7,
  /** uniform: max; normal / truncatedNormal: std. */
  initB: 8,
  /** Seed of the random initializers (uint32). */
  seed: 9,
  /** Initializer stream id (uint32). */
  stream: 10,
  /** Score policy: 0 lru, 1 lfu, 2 epochLru, 3 epochLfu, 4 timestamp, 5 frequency, 6 customized. */
  scorePolicy: 11,
  /** Storage dtype: 0 float32, 1 float16, 2 bfloat16. */
  storageDtype: 12,
} as const;
/** Length of the table config vector (one slot per {@link TableField}). */
export const TABLE_FIELDS = 13;

/** core's StorageDtype -> the addon's (native/src/storage.h StorageDtype). */
export const STORAGE_DTYPE_IDS: Record<StorageDtype, number> = { float32: 0, float16: 1, bfloat16: 2 };

/** Index of each field in the optimizer vector applyGradients takes (native/binding/abi.h OptimizerField), filled by {@link encodeOptimizer}. */
export const OptimizerField = {
  /** Optimizer: 0 sgd, 1 adagrad, 2 adagradMomentum, 3 adam, 4 ftrl, 5 rowWiseAdagrad, 6 momentum, 7 adamax, 8 adadelta. */
  kind: 0,
  /** The step's learning rate. */
  lr: 1,
  /** The step (>= 1). */
  step: 2,
  /** Weight clip after the update (-Infinity: none). */
  clipWeightMin: 3,
  /** Weight clip after the update (Infinity: none). */
  clipWeightMax: 4,
  /** Weight decay, already multiplied by lr when asked. */
  weightDecay: 5,
  /** Gradient clip (-Infinity: none). */
  clipGradMin: 6,
  /** Gradient clip (Infinity: none). */
  clipGradMax: 7,
  /** OptimizerHyper.beta1. */
  beta1: 8,
  /** OptimizerHyper.beta2. */
  beta2: 9,
  /** OptimizerHyper.epsilon. */
  epsilon: 10,
  /** OptimizerHyper.momentum. */
  momentum: 11,
  /** OptimizerHyper.useNesterov (1 / 0). */
  useNesterov: 12,
  /** OptimizerHyper.exponent. */
  exponent: 13,
  /** OptimizerHyper.l1. */
  l1: 14,
  /** OptimizerHyper.l2. */
  l2: 15,
  /** OptimizerHyper.beta. */
  beta: 16,
  /** OptimizerHyper.learningRatePower. */
  learningRatePower: 17,
  /** OptimizerHyper.sumInsideSqrt (1 / 0). */
  sumInsideSqrt: 18,
  /** OptimizerHyper.rho. */
  rho: 19,
} as const;
/** Length of the optimizer vector (one slot per {@link OptimizerField}). */
export const OPTIMIZER_FIELDS = 20;

/** The shard-plan vector (native/binding/abi.h PlanField). */
export const PlanField = {
  /** 1 mod, 2 range, 3 localized. */
  placement: 0,
  /** 'mod': N; else 1. */
  numShards: 1,
  /** 'mod': this shard; else 0. */
  shard: 2,
  /** 'range': first global key; else 0. */
  start: 3,
  /** 'range': one past the last global key; else 0. */
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

/** core's ScorePolicy -> the addon's id (TableField.scorePolicy). */
export const SCORE_POLICY_IDS: Record<ScorePolicy, number> = {
  lru: 0,
  lfu: 1,
  epochLru: 2,
  epochLfu: 3,
  timestamp: 4,
  frequency: 5,
  customized: 6,
};

/** core's OptimizerKind -> the addon's id (OptimizerField.kind). */
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
  return encodePlanAt(p, new Float64Array(PLAN_FIELDS), 0);
}

/** Several plans laid end to end (lookupCombinedShards: PLAN_FIELDS numbers each). */
export function encodePlans(plans: readonly ResolvedShardPlan[]): Float64Array {
  const v = new Float64Array(plans.length * PLAN_FIELDS);
  plans.forEach((p, i) => encodePlanAt(p, v, i * PLAN_FIELDS));
  return v;
}

function encodePlanAt(p: ResolvedShardPlan, v: Float64Array, at: number): Float64Array {
  v[at + PlanField.placement] = PLACEMENT_IDS[p.placement];
  v[at + PlanField.numShards] = p.numShards;
  v[at + PlanField.shard] = p.shard;
  v[at + PlanField.start] = p.start;
  v[at + PlanField.end] = p.end;
  return v;
}
