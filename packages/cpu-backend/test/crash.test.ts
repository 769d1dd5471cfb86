import { loadAddon } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';
import { expectMalformedCallsCoded } from './fixtures/malformed.js';

describe('cpu backend: no input crashes the process', () => {
  it('a child survives thousands of malformed raw addon calls, each a coded error', () => {
    const load = loadAddon();
    expect(load.binding, load.reason ?? '').not.toBeNull();
    expectMalformedCallsCoded(load.path!, [1, 7]);
  }, 120_000);
});
