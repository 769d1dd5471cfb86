// Junk at the CPU backend's raw table (CpuRawTable, exported, and what `table.raw` returns for
// a table of this backend): every method of raw.sync, raw.async and the class, called with
// junk types, wrong sizes and detached buffers in place of valid arguments, either runs or
// rejects with a coded EmbeddingError (never a raw TypeError, never a crash), and a rejected
// call leaves the table as it was.
import { codedOrOk, rawJunkArbitrary, rawTableExamples } from '@embedstack/core/testing';
import { createTable, type EmbeddingTable, optimizers, resolveOptimizer, resolveShardPlan, resolveTableOptions } from '@embedstack/core';
import { CpuRawCache, CpuRawTable, cpuBackend, loadAddon } from '@embedstack/cpu-backend';
import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';

const DIM = 4;
const options = resolveTableOptions({ dim: DIM, optimizer: optimizers.adagrad(), scorePolicy: 'customized' });

/** Junk plus what a raw table's caller gets wrong most (core/testing's, shared with the JS backends' fuzz). */
const junk = rawJunkArbitrary(options);

const keys = () => BigInt64Array.from([1n, 2n]);
const values = () => Float32Array.from({ length: 2 * DIM }, (_, i) => i / 8);
const bag = () => ({ rowSplits: Int32Array.from([0, 1, 2]), keys: keys(), weights: null });
const plan = () => resolveShardPlan({ placement: 'mod', numShards: 1, shard: 0 }, options);
const opt = () => resolveOptimizer(optimizers.adagrad(), 1);

/** Valid argument lists per method (each position is replaced by junk in turn; core/testing's, shared with the JS backends' fuzz). */
const EXAMPLES = rawTableExamples(options);

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
