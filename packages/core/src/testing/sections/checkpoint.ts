import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportHugeCTR, importHugeCTR, loadTable, saveTable } from '../../checkpoint/index.js';
import type { KeyDtype } from '../../dtypes.js';
import { initializers } from '../../initializers.js';
import { optimizers } from '../../optimizers.js';
import type { TableOptions } from '../../tableOptions.js';
import { expectSameState, snapshot, specialKeys, type SuiteContext } from '../harness.js';

/** saveTable / loadTable (and the HugeCTR layout) round trips on the backend under test. */
export function checkpointSection(ctx: SuiteContext): void {
  describe('checkpoints', () => {
    let root = '';
    let n = 0;
    const dir = () => join(root, `ckpt-${n++}`);
    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), `embedstack-conformance-${ctx.name}-`));
    });
    afterAll(async () => {
      if (root) await rm(root, { recursive: true, force: true });
    });

    const opt = optimizers.adam({ learningRate: 0.05 });
    for (const keyDtype of ['int64', 'int32'] as KeyDtype[]) {
      it(`dynamic table, ${keyDtype} keys: save, load into a fresh table, same keys, values, slots and scores`, async () => {
        const options: TableOptions = { dim: 3, keyDtype, optimizer: opt, scorePolicy: 'lfu', initializer: initializers.uniform(-1, 1), seed: 11 };
        const a = ctx.make(options);
        const K = specialKeys(keyDtype) as bigint[];
        await a.findOrInsert(K);
        await a.applyGradients([K[0]!, K[2]!, K[0]!], Float32Array.from({ length: 9 }, (_, i) => i / 3 - 1), opt, 1);
        const many = Array.from({ length: 300 }, (_, i) => (keyDtype === 'int64' ? BigInt(i) * 104729n + 5n : i * 7 + 5)) as bigint[];
        await a.upsert(many, Float32Array.from({ length: 900 }, (_, i) => i / 8));
        const d = dir();
        await saveTable(a, d, { batchSize: 64 });
        const b = ctx.make(options);
        await b.upsert(K.slice(0, 1), [9, 9, 9]);
        await loadTable(b, d, { batchSize: 50, clear: true });
        expect(b.size()).toBe(a.size());
        expectSameState(await snapshot(b), await snapshot(a), 'loaded table');
      });
    }

    it('static table: save and load restore values and slots', async () => {
      const options: TableOptions = { kind: 'static', dim: 2, vocabularySize: 7, optimizer: opt, initializer: initializers.normal(0, 1), seed: 3 };
      const a = ctx.make(options);
      await a.applyGradients([1, 6, 1], [1, 2, 3, 4, 5, 6], opt, 1);
      const d = dir();
      await saveTable(a, d);
      const b = ctx.make({ ...options, seed: 4 });
      await loadTable(b, d);
      expectSameState(await snapshot(b), await snapshot(a), 'loaded static table');
    });

    it('HugeCTR layout: export and import round-trip keys and values', async () => {
      const a = ctx.make({ dim: 4, initializer: initializers.uniform(), seed: 1 });
      await a.findOrInsert(specialKeys('int64') as bigint[]);
      const d = dir();
      await exportHugeCTR(a, d);
      const b = ctx.make({ dim: 4 });
      expect(await importHugeCTR(d, b)).toBe(5);
      const sa = await snapshot(a);
      const sb = await snapshot(b);
      expect([...sb.keys()].sort()).toEqual([...sa.keys()].sort());
      for (const [k, r] of sa) expect(sb.get(k)!.value, `key ${k}`).toEqual(r.value);
    });
  });
}
