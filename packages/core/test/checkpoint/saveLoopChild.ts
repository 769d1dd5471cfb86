// Child process of the concurrency tests (bundled to plain .mjs by the test, run by `node`).
// Usage: node saveLoopChild.mjs <dir> <tag> <saves>
// Saves generations tag*1000, tag*1000+1, ... of a small table (every value encodes its
// generation, see concurrentTable) into <dir>, one after another, and prints one line per
// save: "ok <gen>" or "err <code> <message>".
import { writeSync } from 'node:fs';
import { saveTable } from '../../src/checkpoint/save.js';
import { EmbeddingError } from '../../src/errors.js';
import { concurrentTable } from './concurrentTable.js';

process.stdin.on('end', () => process.exit(2)).resume();
setTimeout(() => process.exit(3), 120_000).unref();

const [dir, tagArg, savesArg] = process.argv.slice(2);
const tag = Number(tagArg);
for (let s = 0; s < Number(savesArg); s++) {
  const gen = tag * 1000 + s;
  try {
    await saveTable(await concurrentTable(gen), dir!, { batchSize: 4 });
    writeSync(1, `ok ${gen}\n`);
  } catch (e) {
    const code = e instanceof EmbeddingError ? e.code : 'UNCODED';
    writeSync(1, `err ${code} ${String((e as Error).message).replace(/\n/g, ' ')}\n`);
  }
}
process.exit(0);
