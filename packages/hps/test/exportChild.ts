// Child process of the exportModel kill -9 test (bundled to plain .mjs by the test, run by `node`).
// Usage: node exportChild.mjs <dir> <tables> <rows> <generation> <stopAt>
// Exports model "m" with <tables> tables of <rows> rows (table t, key k: generation * 1000 + t * 100 + k / 8
// in every column) into <dir>. Before reading table <stopAt> (0 .. tables-1) it prints "at <stopAt>" with
// a synchronous write and waits forever, so the parent kills it exactly at that table boundary (every
// earlier table fully written). With <stopAt> = -1 it runs to the end and prints "done".
import { writeSync } from 'node:fs';
import { createTable, type EmbeddingTable, referenceBackend } from '@embedstack/core';
import { exportModel } from '../src/exportModel.js';

process.stdin.on('end', () => process.exit(2)).resume();
setTimeout(() => process.exit(3), 60_000).unref();

const [dir, tablesArg, rowsArg, genArg, stopArg] = process.argv.slice(2);
const nTables = Number(tablesArg);
const rows = Number(rowsArg);
const gen = Number(genArg);
const stopAt = Number(stopArg);

/** Table t of this generation; its first export read announces the boundary and blocks when t === stopAt. */
async function table(t: number): Promise<EmbeddingTable> {
  const tbl = createTable({ kind: 'dynamic', dim: 4, keyDtype: 'int64', initializer: { kind: 'zeros' } }, { backend: referenceBackend });
  const keys = BigInt64Array.from({ length: rows }, (_, k) => BigInt(k));
  await tbl.upsert(keys, Float32Array.from({ length: rows * 4 }, (_, j) => gen * 1000 + t * 100 + Math.floor(j / 4) / 8));
  if (t !== stopAt) return tbl;
  const ops = tbl.raw.async as { exportBatch: typeof tbl.raw.async.exportBatch };
  const exportBatch = ops.exportBatch.bind(ops);
  ops.exportBatch = async (offset: number, limit: number) => {
    writeSync(1, `at ${t}\n`);
    await new Promise(() => undefined);
    return exportBatch(offset, limit);
  };
  return tbl;
}

const tables = await Promise.all(Array.from({ length: nTables }, (_, t) => table(t)));
writeSync(1, 'ready\n');
await exportModel({ model: 'm', dir: dir!, tables: tables.map((table, t) => ({ table, name: `t${t}` })) });
writeSync(1, 'done\n');
process.exit(0);
