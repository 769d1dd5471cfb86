// Child process of the kill -9 test (bundled to plain .mjs by the test, run by `node`).
// Usage: node crashChild.mjs <dir> <rows> <firstGeneration>
// Saves generation g, g+1, ... of the generated table into <dir> forever, printing
// "saving <g>" before and "saved <g>" after each save with synchronous writes, so the
// parent knows what was durable when it killed us.
import { writeSync } from 'node:fs';
import { saveTable } from '../../src/checkpoint/save.js';
import { generatedTable } from './generatedTable.js';

// Never outlive the test: exit when the parent goes away (stdin closes) or after 60 s.
process.stdin.on('end', () => process.exit(2)).resume();
setTimeout(() => process.exit(3), 60_000).unref();

const [dir, rowsArg, firstArg] = process.argv.slice(2);
const { table, setGeneration } = generatedTable(Number(rowsArg));
writeSync(1, 'ready\n');
for (let gen = Number(firstArg); ; gen++) {
  setGeneration(gen);
  writeSync(1, `saving ${gen}\n`);
  await saveTable(table, dir!, { batchSize: 32768 });
  writeSync(1, `saved ${gen}\n`);
}
