import { createTable, EmbeddingError, getBackend, InvalidTypeError, optimizers, resolveOptimizer } from '@embedstack/core';
import { ASYNC_MIN_WORK, cpuBackend, loadAddon, OPTIMIZER_FIELDS, PLAN_FIELDS, TABLE_FIELDS } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

describe('cpu backend: adapter and registration', () => {
  it('registers itself as "cpu" with priority 10 and describes the machine', () => {
    expect(getBackend('cpu')).toBe(cpuBackend);
    expect(cpuBackend.priority).toBe(10);
    const caps = cpuBackend.capabilities();
    expect(caps).toEqual({ sync: true, threads: caps.threads, device: 'cpu', storageDtypes: ['float32', 'float16', 'bfloat16'] });
    expect(caps.threads).toBeGreaterThanOrEqual(1);
    const [dev] = cpuBackend.devices();
    expect(dev!.id).toBe('cpu:0');
    expect(dev!.kind).toBe('cpu');
    expect(dev!.memoryBytes).toBeGreaterThan(0);
    expect(cpuBackend.unavailableReason()).toBeUndefined();
  });

  it('the addon and the TypeScript side agree on the ABI vectors', () => {
    const b = loadAddon().binding!;
    expect(b.abiFields).toEqual({ table: TABLE_FIELDS, optimizer: OPTIMIZER_FIELDS, plan: PLAN_FIELDS });
  });

  it('native failures become core EmbeddingErrors keeping code, message and native location', () => {
    const t = createTable({ dim: 2 }, { backend: cpuBackend });
    let err: unknown;
    try {
      t.raw.sync!.find(new Int32Array([1]));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidTypeError);
    expect((err as EmbeddingError).code).toBe('INVALID_TYPE');
    expect((err as Error).message).toBe('Expected keys to be a BigInt64Array but received Int32Array(1)');
    expect(((err as Error).cause as { nativeLocation: string }).nativeLocation).toMatch(/^args\.cc:\d+$/);
    t.dispose();
  });

  it('an async native failure carries the stack of the call site', async () => {
    const t = createTable({ dim: 2, optimizer: optimizers.adagrad() }, { backend: cpuBackend });
    const n = Math.ceil(ASYNC_MIN_WORK / 8) + 1; // large enough for the native pool (ASYNC_MIN_WORK)
    // a raw call with an optimizer whose slots do not fit the table: found by the native table
    const adam = resolveOptimizer(optimizers.adam(), 1);
    const err = await t.raw.async.applyGradients(new BigInt64Array(n), new Float32Array(n * 2), adam).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EmbeddingError);
    expect((err as EmbeddingError).code).toBe('INVALID_ARGUMENT');
    expect((err as Error).message).toBe(
      'Expected optimizer to be an optimizer whose slots are [dim] (the table\'s layout) but received adam with slots [dim, dim]',
    );
    expect((err as Error).stack).toContain('adapter.test.ts');
    expect(t.size()).toBe(0);
    t.dispose();
  });
});
