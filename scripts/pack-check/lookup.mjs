// The issue's acceptance line, shared by the pack-check's scripts: `createTable({ dim: 8 },
// { backend })` in the installed packages, one row upserted and found (values by hand).
import assert from 'node:assert/strict';
import { createTable } from '@embedstack/core';

export function expectLookup(backend) {
  const t = createTable({ dim: 8 }, { backend });
  t.upsertSync([7n], Float32Array.from({ length: 8 }, (_, i) => i / 4));
  const r = t.findSync([7n, 8n]);
  assert.deepEqual(Array.from(r.values.subarray(0, 8)), [0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75]);
  assert.deepEqual(Array.from(r.exists), [1, 0]);
  assert.equal(t.backendName, backend);
  t.dispose();
}
