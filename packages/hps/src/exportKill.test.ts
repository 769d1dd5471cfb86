// kill -9 at each table boundary of a multi-table exportModel: a server loading the model
// afterwards must see the whole previous export, never a mix of two (core's kill test helpers:
// the child is bundled from source into a temp .mjs, so no prior build of this package is needed).
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { bundleChild, kill9, runChildUntil, type ChildRun } from '@embedstack/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HPS } from './index.js';
import { tempDir, workspaceSources } from '../test/fixtures.js';

const TABLES = 3;
const ROWS = 500;

let work: { dir: string; cleanup: () => void };
let childScript: string;

beforeAll(async () => {
  work = tempDir('hps-export-kill-');
  // the child runs from a temp folder: core (its sources) and this package are bundled in
  childScript = await bundleChild(new URL('../test/exportChild.ts', import.meta.url), join(work.dir, 'bin'), { noExternal: [/^@embedstack\//], alias: workspaceSources() });
}, 60_000);

afterAll(() => work?.cleanup());

/** Runs the child; resolves with it once it printed `at <stopAt>` (or 'done' with stopAt -1). */
function runChild(dir: string, gen: number, stopAt: number): Promise<ChildRun> {
  return runChildUntil(childScript, [dir, String(TABLES), String(ROWS), String(gen), String(stopAt)], stopAt < 0 ? 'done' : `at ${stopAt}`);
}

/** The ps config of model m as exportModel returns it (written here independently). */
function psConfig(dir: string): Record<string, unknown> {
  const names = Array.from({ length: TABLES }, (_, t) => `t${t}`);
  return {
    supportlonglong: true,
    models: [
      {
        model: 'm',
        sparse_files: names.map((n) => join(dir, 'm', n)),
        embedding_table_names: names,
        embedding_vecsize_per_table: names.map(() => 4),
        maxnum_catfeature_query_per_table_per_sample: names.map(() => 1),
        default_value_for_each_table: names.map(() => -1),
        deployed_device_list: [0],
        max_batch_size: ROWS,
      },
    ],
  };
}

/** Loads the model through HPS and returns the one generation every row of every table belongs to (fails on a mix). */
async function servedGeneration(dir: string): Promise<number> {
  const server = await HPS.create({ psConfig: psConfig(dir) });
  try {
    const gens = new Set<number>();
    const keys = BigInt64Array.from({ length: ROWS }, (_, k) => BigInt(k));
    for (let t = 0; t < TABLES; t++) {
      const v = (await server.lookup(keys, 'm', t)).data as Float32Array;
      for (let k = 0; k < ROWS; k++) {
        for (let c = 0; c < 4; c++) {
          const x = v[k * 4 + c]! - t * 100 - k / 8; // the child's value: gen * 1000 + t * 100 + k / 8
          expect(Number.isInteger(x / 1000), `table ${t} key ${k}: ${v[k * 4 + c]}`).toBe(true);
          gens.add(x / 1000);
        }
      }
    }
    expect([...gens]).toHaveLength(1); // never a mix of two exports
    return [...gens][0]!;
  } finally {
    await server.close();
  }
}

describe('exportModel killed (SIGKILL) at each table boundary', () => {
  it(`after a kill before table 0, 1, ..., ${TABLES - 1}, a server loads the whole previous export; the next export completes`, async () => {
    const dir = join(work.dir, 'out');
    await runChild(dir, 1, -1);
    expect(await servedGeneration(dir)).toBe(1);
    for (let b = 0; b < TABLES; b++) {
      const r = await runChild(dir, 10 + b, b); // tables 0 .. b-1 of generation 10 + b are fully written
      await kill9(r.child);
      expect(await servedGeneration(dir), `killed before table ${b}`).toBe(1);
    }
    // the next export takes over the dead children's lock and removes their leftovers
    await runChild(dir, 2, -1);
    expect(await servedGeneration(dir)).toBe(2);
    expect(readdirSync(join(dir, 'm')).sort()).toEqual(['CURRENT', expect.stringMatching(/^ckpt-\d{12}$/)]);
  }, 120_000);
});

describe('an export that commits while a server streams the previous one', () => {
  it('the load starts over from the new version: every table is served from it', async () => {
    const { exportModel } = await import('./index.js');
    const { Tensor } = await import('@embedstack/core');
    const { cpSync, rmSync, writeFileSync } = await import('node:fs');
    const rows = 1000;
    // generation g, table t, key k: g * 1000 + t * 100 + k / 8 in every column
    const gen = (g: number) => Array.from({ length: TABLES }, (_, t) => ({ table: new Tensor(Float32Array.from({ length: rows * 4 }, (_, j) => g * 1000 + t * 100 + Math.floor(j / 4) / 8), [rows, 4]), name: `t${t}` }));
    const dir = join(work.dir, 'race');
    const next = join(work.dir, 'race-next');
    await exportModel({ model: 'm', dir, tables: gen(1) });
    await exportModel({ model: 'm', dir: next, tables: gen(2) });
    const config = psConfig(dir) as { models: Record<string, unknown>[]; persistent_db?: unknown };
    config.models[0]!.max_batch_size = rows;
    config.persistent_db = { type: 'rocks_db', path: join(work.dir, 'race-rocks') };
    let switched = false;
    const server = await HPS.create({
      psConfig: config,
      loadBatchSize: 100,
      onProgress: (p) => {
        // while table 0 streams, "another process" commits generation 2 (as exportModel does: the new
        // version, then CURRENT, then the old version deleted)
        if (switched || p.tableId !== 0 || p.rowsLoaded < 300) return;
        switched = true;
        cpSync(join(next, 'm', 'ckpt-000000000001'), join(dir, 'm', 'ckpt-000000000002'), { recursive: true });
        writeFileSync(join(dir, 'm', 'CURRENT'), 'ckpt-000000000002\n');
        rmSync(join(dir, 'm', 'ckpt-000000000001'), { recursive: true });
      },
    });
    try {
      expect(switched).toBe(true);
      const keys = BigInt64Array.from({ length: rows }, (_, k) => BigInt(k));
      for (let t = 0; t < TABLES; t++) {
        const v = Array.from((await server.lookup(keys, 'm', t)).data as Float32Array);
        expect(v).toEqual(Array.from({ length: rows * 4 }, (_, j) => Math.fround(2000 + t * 100 + Math.floor(j / 4) / 8)));
      }
    } finally {
      await server.close();
    }
  }, 60_000);
});
