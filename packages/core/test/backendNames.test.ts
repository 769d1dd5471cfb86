import { afterEach, describe, expect, it, vi } from 'vitest';
import { createTable, ErrorCodes, getBackend, listBackends, registerBackend, referenceBackend, setDefaultBackend, unregisterBackend } from '@embedstack/core';
import { throwsCode } from './util.js';

await vi.hoisted(async () => (await import('./ownRegistry.js')).ownRegistry());

const saved = process.env.EMBEDSTACK_BACKEND;
afterEach(() => {
  for (const n of listBackends()) unregisterBackend(n);
  setDefaultBackend(undefined);
  if (saved === undefined) delete process.env.EMBEDSTACK_BACKEND;
  else process.env.EMBEDSTACK_BACKEND = saved;
});

describe('naming a backend that is not loaded', () => {
  it('createTable with backend "cpu" and only core imported: lists reference and says which package to install', () => {
    expect(listBackends()).toEqual([]);
    const e = throwsCode(() => createTable({ dim: 4 }, { backend: 'cpu' }), ErrorCodes.NOT_FOUND, 'backend');
    expect(e.message).toBe(
      'Expected backend to be one of [reference] but received "cpu". Backend "cpu" is not loaded: install and import @embedstack/cpu-backend (it registers itself)',
    );
  });

  it('cuda and cuda-host name @embedstack/cuda-backend; an unknown name gets no package hint', () => {
    registerBackend({ ...referenceBackend, name: 'mine', priority: 1, isUsable: () => true, capabilities: () => referenceBackend.capabilities(), devices: () => referenceBackend.devices(), createTable: (o) => referenceBackend.createTable(o) });
    for (const name of ['cuda', 'cuda-host']) {
      const e = throwsCode(() => getBackend(name), ErrorCodes.NOT_FOUND, 'backend');
      expect(e.message).toBe(
        `Expected backend to be one of [mine, reference] but received "${name}". Backend "${name}" is not loaded: install and import @embedstack/cuda-backend (it registers itself)`,
      );
    }
    expect(throwsCode(() => getBackend('tpu'), ErrorCodes.NOT_FOUND, 'backend').message).toBe('Expected backend to be one of [mine, reference] but received "tpu"');
  });

  it('from EMBEDSTACK_BACKEND: says where the name came from, then the hint', () => {
    process.env.EMBEDSTACK_BACKEND = 'cpu';
    expect(throwsCode(() => getBackend(), ErrorCodes.NOT_FOUND, 'backend').message).toBe(
      'Expected backend to be one of [reference] but received "cpu" (from EMBEDSTACK_BACKEND or setDefaultBackend). Backend "cpu" is not loaded: install and import @embedstack/cpu-backend (it registers itself)',
    );
  });

  it('reference is listed once when registered, and setDefaultBackend accepts it before it is registered, as getBackend does', () => {
    registerBackend(referenceBackend);
    expect(throwsCode(() => setDefaultBackend('cpu'), ErrorCodes.NOT_FOUND, 'backend').message).toContain('[reference] but received "cpu". Backend "cpu" is not loaded');
    unregisterBackend('reference');
    setDefaultBackend('reference');
    expect(getBackend().name).toBe('reference');
  });
});
