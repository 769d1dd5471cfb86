// The CommonJS entry of every installed package loads (scripts/pack-check.mjs).
'use strict';
const assert = require('node:assert/strict');
const { renamedClasses } = require('./class-names.cjs');
const names = process.argv.slice(2);
for (const name of names) {
  const m = require(name);
  assert.ok(Object.keys(m).length > 0, `${name} exports something`);
  assert.deepEqual(renamedClasses(m), [], `${name}'s classes keep their names`);
}
const { createTable } = require('@embedstack/core');
const { cpuLevel } = require('@embedstack/cpu-backend');
const t = createTable({ dim: 8 }, { backend: 'cpu' });
t.upsertSync([1n], new Float32Array(8).fill(3));
assert.deepEqual(Array.from(t.findSync([1n]).values), [3, 3, 3, 3, 3, 3, 3, 3]);
// which binary ran (pack-check checks the arm64 run loaded prebuilds/linux-arm64)
console.log(JSON.stringify({ ok: true, required: names, cpu: cpuLevel() }));
