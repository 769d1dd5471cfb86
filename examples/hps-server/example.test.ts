// CI runs the example as a user would: `node main.mjs` (export, serve, 200 concurrent clients, bad requests) against the BUILT packages.
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { missingBuilds, runExample } from '../runExample.js';

const here = dirname(fileURLToPath(import.meta.url));
const missing = missingBuilds(['hps', 'core', 'store-rocksdb', 'store-redis']);

describe('examples/hps-server', () => {
  if (missing) {
    console.log(`[examples/hps-server] skipped: ${missing}`);
    it.skip(`skipped: ${missing}`, () => undefined);
    return;
  }

  it('serves exact rows over KServe v2, answers bad requests with protocol errors, survives 200 concurrent clients', () => {
    const r = runExample('examples/hps-server', here);
    expect(r.stdout).toMatch(/infer \[7, 123456\] -> row 7 starts 7, unknown key -> default 0: exact/);
    expect(r.stdout).toMatch(/bad request \(body over the cap\) -> 413 ok/);
    expect(r.stdout).toMatch(/bad request \(key outside INT64\) -> 400 ok/);
    expect(r.stdout).toMatch(/requests 2000 \(failed 0\)/);
    expect(r.stdout).toMatch(/hps-server example OK/);
    expect(r.status).toBe(0);
  }, 120000);
});
