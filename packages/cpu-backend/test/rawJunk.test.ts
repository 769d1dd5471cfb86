// Junk at the CPU backend's raw table (CpuRawTable, exported, and what `table.raw` returns for
// a table of this backend): every method of raw.sync, raw.async and the class, called with
// junk types, wrong sizes and detached buffers in place of valid arguments, either runs or
// rejects with a coded EmbeddingError (never a raw TypeError, never a crash), and a rejected
// call leaves the table as it was.
import { codedOrOk, junkArbitrary } from '@embedstack/core/testing';
import { createTable, type EmbeddingTable, optimizers, resolveOptimizer, resolveShardPlan, resolveTableOptions } from '@embedstack/core';
import { CpuRawCache, CpuRawTable, cpuBackend, loadAddon } from '@embedstack/cpu-backend';
import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';

const DIM = 4;
const options = resolveTableOptions({ dim: DIM, optimizer: optimizers.adagrad(), scorePolicy: 'customized' });

/** A typed array whose buffer is detached (transferred away). */
function detached<T extends ArrayBufferView>(make: (n: number) => T, n = 4): T {
  const a = make(n);
  structuredClone(a.buffer, { transfer: [a.buffer as ArrayBuffer] });
  return a;
}

/** Junk plus what a raw table's caller gets wrong most: detached buffers and arrays of the wrong size or type. */
const junk: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: junkArbitrary() },
  {
    weight: 2,
    arbitrary: fc.constantFrom<() => unknown>(
      () => detached((n) => new BigInt64Array(n)),
      () => detached((n) => new Int32Array(n)),
      () => detached((n) => new Float32Array(n)),
      () => detached((n) => new Uint8Array(n)),
      () => detached((n) => new BigUint64Array(n)),
      () => new Float32Array(3),
      () => new Float32Array(1 << 12),
      () => BigInt64Array.from([1n, 1n << 62n, -5n]),
      () => new Int32Array([0, 5, 2]),
      () => ({ rowSplits: new Int32Array([0, 3]), keys: detached((n) => new BigInt64Array(n), 3), weights: null }),
      () => ({ rowSplits: new Int32Array([0, 9]), keys: BigInt64Array.from([1n]), weights: null }),
      () => ({ values: detached((n) => new Float32Array(n), 8), exists: new Uint8Array(2) }),
      () => ({ kind: 'adam', lr: 1n }),
      () => ({ ...resolveOptimizer(optimizers.adagrad(), 1), lr: '0.1' }),
      () => ({ placement: 'mod', numShards: 0, shard: 0, start: 0, end: 0 }),
      () => [{ raw: {}, plan: null }],
      () => 2 ** 40,
      () => -1,
    ).map((f) => f()),
  },
);

const keys = () => BigInt64Array.from([1n, 2n]);
const values = () => Float32Array.from({ length: 2 * DIM }, (_, i) => i / 8);
const scores = () => BigUint64Array.from([3n, 4n]);
const bag = () => ({ rowSplits: Int32Array.from([0, 1, 2]), keys: keys(), weights: null });
const out = () => ({ values: new Float32Array(2 * DIM), exists: new Uint8Array(2) });
const plan = () => resolveShardPlan({ placement: 'mod', numShards: 1, shard: 0 }, options);
const opt = () => resolveOptimizer(optimizers.adagrad(), 1);
const slots = () => [new Float32Array(2 * DIM)];

/** Valid argument lists per method (each position is replaced by junk in turn). */
const EXAMPLES: Record<string, () => unknown[]> = {
  find: () => [keys(), out(), plan()],
  findOrInsert: () => [keys(), scores(), out(), null],
  upsert: () => [keys(), values(), scores()],
  assign: () => [keys(), values(), null],
  accum: () => [keys(), values(), Uint8Array.from([1, 0]), scores()],
  remove: () => [keys()],
  clear: () => [],
  size: () => [],
  capacity: () => [],
  memoryUsage: () => [],
  exportBatch: () => [0, 10],
  importRows: () => [keys(), values(), slots(), scores()],
  lookupCombined: () => [bag(), 'sum', 0, false, new Float32Array(2 * DIM)],
  lookupCombinedPartial: () => [bag(), 'mean', 0, false, plan(), new Float64Array(2 * DIM)],
  lookupCombinedBackward: () => [bag(), values(), 'sum', 0, null, new Float32Array(2 * DIM)],
  applyCombinedGradients: () => [bag(), values(), 'sum', 0, null, opt()],
  applyGradients: () => [keys(), values(), opt(), null],
  restrict: () => [1],
  setEpoch: () => [1],
};

/** Methods of the class itself (the fused shard ops take `parts` of this backend's tables). */
function classExamples(raw: CpuRawTable): Record<string, () => unknown[]> {
  const parts = () => [{ raw, plan: plan() }];
  return {
    lookupCombinedShards: () => [parts(), bag(), 'sum', 0, false, new Float32Array(2 * DIM)],
    applyCombinedGradientsShards: () => [parts(), bag(), values(), 'sum', 0, opt()],
    size: () => [],
    capacity: () => [],
    memoryUsage: () => [],
    setEpoch: () => [2],
  };
}

function make(): { table: EmbeddingTable; raw: CpuRawTable } {
  const table = createTable({ dim: DIM, optimizer: optimizers.adagrad(), scorePolicy: 'customized' }, { backend: cpuBackend });
  table.importRowsSync(BigInt64Array.from([1n, 7n]), Float32Array.from({ length: 2 * DIM }, (_, i) => i), null, BigUint64Array.from([5n, 6n]));
  const raw = table.raw;
  expect(raw).toBeInstanceOf(CpuRawTable);
  return { table, raw: raw as CpuRawTable };
}

function state(raw: CpuRawTable): unknown {
  const b = raw.sync.exportBatch(0, Infinity);
  const order = Array.from(b.keys, (k, i) => [k, i] as const).sort((x, y) => (x[0] < y[0] ? -1 : 1));
  const rows = (a: Float32Array, w: number) => order.map(([, i]) => Array.from(a.subarray(i * w, (i + 1) * w)));
  return { keys: order.map(([k]) => k), values: rows(b.values, DIM), slots: b.slots.map((s) => rows(s, DIM)), scores: order.map(([, i]) => b.scores[i]) };
}

/** An example with 1 to all positions replaced by junk (or 0-4 arguments of pure junk). */
function argsFor(example: () => unknown[]): fc.Arbitrary<unknown[]> {
  const mutated = fc.array(fc.tuple(fc.nat(7), junk), { minLength: 1, maxLength: 4 }).map((subs) => {
    const a = example();
    for (const [pos, v] of subs) if (a.length > 0) a[pos % a.length] = v;
    return a;
  });
  return fc.oneof({ weight: 3, arbitrary: mutated }, { weight: 1, arbitrary: fc.array(junk, { maxLength: 4 }) });
}

const RUNS = Number(process.env.JUNK_RUNS ?? 40);

/** codedOrOk, and the code is not INTERNAL (junk from the caller is not a bug of embedstack's). */
async function notInternal(fn: () => unknown, label: string): Promise<void> {
  if ((await codedOrOk(fn, label)) === 'ok') return;
  try {
    fn();
  } catch (e) {
    expect((e as { code?: string }).code, `${label}: ${(e as Error).message}`).not.toBe('INTERNAL');
  }
}

async function fuzz(label: string, pick: (raw: CpuRawTable) => (...a: unknown[]) => unknown, example: (raw: CpuRawTable) => () => unknown[]): Promise<string | null> {
  const probe = make();
  const ex = example(probe.raw);
  probe.table.dispose();
  const r = await fc.check(
    fc.asyncProperty(argsFor(ex), async (a) => {
      const { table, raw } = make();
      try {
        const before = state(raw);
        const outcome = await codedOrOk(() => pick(raw)(...a), `${label}(${a.length} args)`);
        if (outcome === 'rejected') expect(state(raw), `${label}: state after a rejected call`).toEqual(before);
      } finally {
        table.dispose();
      }
    }),
    { numRuns: RUNS },
  );
  return r.failed ? `${label}: ${String((r.errorInstance as Error | undefined)?.message ?? r.errorInstance).split('\n')[0]} (args ${fc.stringify(r.counterexample)})` : null;
}

/** new Cls(binding or junk, junk options): constructed, or a coded error other than INTERNAL. */
async function fuzzConstructor(Cls: new (b: never, o: never) => unknown): Promise<void> {
  const binding = loadAddon().binding!;
  const r = await fc.check(
    fc.asyncProperty(fc.boolean(), junk, junk, async (real, b, o) => {
      await notInternal(() => new Cls((real ? binding : b) as never, o as never), `new ${Cls.name}`);
    }),
    { numRuns: RUNS * 4 },
  );
  expect(r.failed ? `${String((r.errorInstance as Error | undefined)?.message)} ${fc.stringify(r.counterexample)}` : null).toBeNull();
}

describe('cpu backend: the raw table (CpuRawTable, table.raw) rejects junk with coded errors', () => {
  it('every example is a valid call (so the junk replaces a valid argument)', async () => {
    for (const form of ['sync', 'async'] as const) {
      for (const [m, ex] of Object.entries(EXAMPLES)) {
        const f = (make().raw[form] as unknown as Record<string, ((...a: unknown[]) => unknown) | undefined>)[m];
        if (f === undefined) continue;
        await f(...ex());
      }
    }
    const { raw } = make();
    for (const [m, ex] of Object.entries(classExamples(raw))) await (raw as unknown as Record<string, (...a: unknown[]) => unknown>)[m]!(...ex());
  });

  for (const form of ['sync', 'async'] as const) {
    it(`raw.${form}: every method`, async () => {
      const failures: string[] = [];
      const methods = Object.keys(make().raw[form]).filter((m) => m !== 'dispose');
      expect(methods.filter((m) => !(m in EXAMPLES))).toEqual([]);
      for (const m of methods) {
        const f = await fuzz(`raw.${form}.${m}`, (raw) => (raw[form] as unknown as Record<string, (...a: unknown[]) => unknown>)[m]!, () => EXAMPLES[m]!);
        if (f) failures.push(f);
      }
      expect(failures).toEqual([]);
    }, 300_000);
  }

  it('the class methods (the fused shard ops, size, setEpoch, ...)', async () => {
    const failures: string[] = [];
    for (const m of Object.keys(classExamples(make().raw))) {
      const f = await fuzz(`CpuRawTable.${m}`, (raw) => (raw as unknown as Record<string, (...a: unknown[]) => unknown>)[m]!.bind(raw), (raw) => classExamples(raw)[m]!);
      if (f) failures.push(f);
    }
    expect(failures).toEqual([]);
  }, 300_000);

  it('the constructor: junk binding or options', async () => {
    await fuzzConstructor(CpuRawTable);
  });

  it('the raw cache (CpuRawCache): junk constructor arguments and method arguments', async () => {
    const binding = loadAddon().binding!;
    await fuzzConstructor(CpuRawCache);
    const make = () => new CpuRawCache(binding as never, { capacity: 8, dim: DIM, ways: 2, name: 'c' } as never);
    const examples: Record<string, () => unknown[]> = {
      query: () => [keys(), new Float32Array(2 * DIM), new Uint8Array(2)],
      insert: () => [keys(), values()],
      update: () => [keys(), values()],
      remove: () => [keys()],
    };
    for (const [m, ex] of Object.entries(examples)) {
      const r = await fc.check(
        fc.asyncProperty(argsFor(ex), async (a) => {
          const c = make();
          c.insert(BigInt64Array.from([1n, 7n]), Float32Array.from({ length: 2 * DIM }, (_, i) => i));
          const before = [Array.from(c.keys()).sort(), c.size()];
          if ((await codedOrOk(() => (c as unknown as Record<string, (...x: unknown[]) => unknown>)[m]!(...a), `CpuRawCache.${m}`)) === 'rejected') {
            expect([Array.from(c.keys()).sort(), c.size()]).toEqual(before);
          }
          c.dispose();
        }),
        { numRuns: RUNS },
      );
      expect(r.failed ? `${m}: ${String((r.errorInstance as Error | undefined)?.message).split('\n')[0]} ${fc.stringify(r.counterexample)}` : null).toBeNull();
    }
  });
});
