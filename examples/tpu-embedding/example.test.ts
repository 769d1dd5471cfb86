// CI runs the example as a user would: `node main.mjs` against the BUILT packages.
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { missingBuilds, runExample } from '../runExample.js';

const here = dirname(fileURLToPath(import.meta.url));
const missing = missingBuilds(['tpu-embedding', 'core']);

describe('examples/tpu-embedding', () => {
  if (missing) {
    console.log(`[examples/tpu-embedding] skipped: ${missing}`);
    it.skip(`skipped: ${missing}`, () => undefined);
    return;
  }

  it('trains (falling loss), saves, restores and serves; exits 0', () => {
    const r = runExample('examples/tpu-embedding', here);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/step +10 +loss \d\.\d{4}/);
    expect(r.stdout).toMatch(/saved and restored 2 tables \(step 80\)/);
    expect(r.stdout).toMatch(/tpu-embedding example OK: loss \d\.\d{4} -> \d\.\d{4}/);
  });
});
