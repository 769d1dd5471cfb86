// CI runs the example as a user would: `node main.mjs` against the BUILT packages.
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { missingBuilds, runExample } from '../runExample.js';

const here = dirname(fileURLToPath(import.meta.url));
const missing = missingBuilds(['tfra', 'core', 'store-redis']);

describe('examples/tfra', () => {
  if (missing) {
    console.log(`[examples/tfra] skipped: ${missing}`);
    it.skip(`skipped: ${missing}`, () => undefined);
    return;
  }

  it('trains (falling loss), restricts, saves and reloads; exits 0', () => {
    const r = runExample('examples/tfra', here);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/step +10 +loss \d\.\d{4}/);
    expect(r.stdout).toMatch(/tfra example OK/);
  });
});
