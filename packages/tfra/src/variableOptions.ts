import {
  checkBoolean,
  checkInteger,
  checkName,
  checkOptions,
  fnv1a32,
  type InitializerSpec,
  InvalidTypeError,
  invalidParameter,
} from '@embedstack/core';
import { type VariableInitializer, toCoreInitializer } from './initializer.js';
import type { TfraKeyDtype } from './keys.js';
import { CuckooHashTableCreator, KVCreator } from './kvCreators.js';
import { defaultPartitionFn, type Partitioner } from './partition.js';
import { isRestrictPolicyClass, type RestrictPolicyClass } from './restrictPolicy.js';

/** Options of `new de.Variable(...)` (TFRA's keyword arguments, camelCase). */
export interface VariableOptions {
  /** 'int64' (default), 'int32', or 'string' (hashed to int64 with `hashString64`). */
  keyDtype?: TfraKeyDtype;
  /**
   * Value type: 'float32' (default), or TFRA's half types 'float16' / 'bfloat16': the shards store
   * values in 2 bytes (core's `storageDtype`, rounded to nearest-even on every write); lookups still
   * return float32 tensors (holding the rounded values), and optimizer slots stay float32.
   */
  valueDtype?: TfraValueDtype;
  /** Floats per key. Default 1. */
  dim?: number;
  /** One shard (table) per entry; labels only, every shard lives on the active backend. Default ['cpu:0']. */
  devices?: readonly string[] | string;
  /** Places keys on shards. Default `defaultPartitionFn` (non-negative `key % N`). */
  partitioner?: Partitioner;
  /** Accepted for parity; unused. */
  sharedName?: string | null;
  /** Default 'DynamicEmbedding_Variable' (TFRA). */
  name?: string;
  /** Value of keys not in the table; see `toCoreInitializer`. Default zeros. */
  initializer?: VariableInitializer;
  /** Trained by optimizers. Default true. */
  trainable?: boolean;
  /** Saved by `saveToFileSystem`; false leaves the variable (and its slots) out of saves. Default true. */
  checkpoint?: boolean;
  /**
   * Rows reserved up front, split evenly over the shards. Default (0 or unset): the
   * environment's TF_HASHTABLE_INIT_SIZE, else 8192 (TFRA's default).
   */
  initSize?: number;
  /** Where the tables live. Default `new CuckooHashTableCreator()`. */
  kvCreator?: KVCreator;
  /** A restrict policy class (TimestampRestrictPolicy, FrequencyRestrictPolicy). Default none. */
  restrictPolicy?: RestrictPolicyClass | null;
  /** Train by adding deltas (accum) instead of setting values. Default false. */
  bpV2?: boolean;
  /** Seed of random initializers (uint32). Default 0. An embedstack extension. */
  seed?: number;
}

export const VARIABLE_OPTIONS = [
  'keyDtype',
  'valueDtype',
  'dim',
  'devices',
  'partitioner',
  'sharedName',
  'name',
  'initializer',
  'trainable',
  'checkpoint',
  'initSize',
  'kvCreator',
  'restrictPolicy',
  'bpV2',
  'seed',
] as const;

/** TFRA's table size when none is given (TF_HASHTABLE_INIT_SIZE overrides it). */
export const DEFAULT_INIT_SIZE = 8192;

/** Every option of a Variable with its default applied, validated. */
/** TFRA's value dtypes (tf.float32, tf.float16, tf.bfloat16). */
export type TfraValueDtype = 'float32' | 'float16' | 'bfloat16';

export interface ResolvedVariableOptions {
  name: string;
  keyDtype: TfraKeyDtype;
  valueDtype: TfraValueDtype;
  dim: number;
  devices: readonly string[];
  partitioner: Partitioner;
  sharedName: string;
  initializer: VariableInitializer;
  coreInitializer: InitializerSpec;
  trainable: boolean;
  checkpoint: boolean;
  /** Total rows reserved (before the split over shards). */
  initSize: number;
  kvCreator: KVCreator;
  restrictPolicy: RestrictPolicyClass | null;
  bpV2: boolean;
  seed: number;
  /** Stream of random initializers: the variable's name, so every shard agrees. */
  stream: number;
}

function validateDevices(devices: unknown): string[] {
  if (devices === undefined || devices === null) return ['cpu:0'];
  const list = typeof devices === 'string' ? [devices] : devices;
  if (!Array.isArray(list) || list.length === 0 || list.some((d) => typeof d !== 'string' || d.length === 0)) {
    throw invalidParameter('devices', 'a non-empty array of device names', devices, InvalidTypeError);
  }
  return list.slice();
}

function defaultInitSize(): number {
  const env = typeof process !== 'undefined' ? process.env.TF_HASHTABLE_INIT_SIZE : undefined;
  const n = env === undefined || env === '' ? NaN : Number(env);
  return Number.isSafeInteger(n) && n >= 1 ? n : DEFAULT_INIT_SIZE;
}

/**
 * Validates and completes `new Variable(options)`'s options (TFRA's defaults).
 * @throws InvalidArgumentError / InvalidTypeError naming the option (restrictPolicy not a policy class: InvalidTypeError)
 */
export function resolveVariableOptions(options: unknown): ResolvedVariableOptions {
  const o = checkOptions<VariableOptions>(options, VARIABLE_OPTIONS);
  const keyDtype = o.keyDtype ?? 'int64';
  if (keyDtype !== 'int64' && keyDtype !== 'int32' && keyDtype !== 'string') {
    throw invalidParameter('keyDtype', "'int64', 'int32' or 'string'", keyDtype, InvalidTypeError);
  }
  const valueDtype = o.valueDtype ?? 'float32';
  if (valueDtype !== 'float32' && valueDtype !== 'float16' && valueDtype !== 'bfloat16') {
    throw invalidParameter('valueDtype', "'float32', 'float16' or 'bfloat16'", o.valueDtype, InvalidTypeError);
  }
  for (const [key, v] of [['dim', o.dim], ['initSize', o.initSize]] as const) {
    if (v !== undefined && v !== null && typeof v !== 'number') throw invalidParameter(key, 'an integer', v, InvalidTypeError);
  }
  const dim = checkInteger(o.dim, 'dim', { min: 1, fallback: 1 });
  const devices = validateDevices(o.devices);
  const partitioner = o.partitioner ?? defaultPartitionFn;
  if (typeof partitioner !== 'function') throw invalidParameter('partitioner', 'a function (keys, shardNum) => shard indices', partitioner, InvalidTypeError);
  const name = checkName(o.name, 'name', 'DynamicEmbedding_Variable');
  const coreInitializer = toCoreInitializer(o.initializer, dim);
  const initSize = checkInteger(o.initSize, 'initSize', { min: 0, fallback: 0 });
  const kvCreator = o.kvCreator ?? new CuckooHashTableCreator();
  if (!(kvCreator instanceof KVCreator)) {
    throw invalidParameter('kvCreator', 'a kv creator (CuckooHashTableCreator, HkvHashTableCreator, RedisTableCreator)', kvCreator, InvalidTypeError);
  }
  const restrictPolicy = o.restrictPolicy ?? null;
  if (restrictPolicy !== null && !isRestrictPolicyClass(restrictPolicy)) {
    throw invalidParameter('restrictPolicy', 'a restrict policy class (TimestampRestrictPolicy or FrequencyRestrictPolicy)', restrictPolicy, InvalidTypeError);
  }
  if (o.sharedName !== undefined && o.sharedName !== null && typeof o.sharedName !== 'string') throw invalidParameter('sharedName', 'a string', o.sharedName, InvalidTypeError);
  return {
    name,
    keyDtype,
    valueDtype,
    dim,
    devices: Object.freeze(devices),
    partitioner,
    sharedName: o.sharedName ?? `shared_name.${name}`,
    initializer: o.initializer,
    coreInitializer,
    trainable: checkBoolean(o.trainable, 'trainable', true),
    checkpoint: checkBoolean(o.checkpoint, 'checkpoint', true),
    initSize: initSize > 0 ? initSize : defaultInitSize(),
    kvCreator,
    restrictPolicy,
    bpV2: checkBoolean(o.bpV2, 'bpV2', false),
    seed: checkInteger(o.seed, 'seed', { min: 0, max: 0xffffffff, fallback: 0 }),
    stream: fnv1a32(name),
  };
}
