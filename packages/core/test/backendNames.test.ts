import { afterEach, describe, expect, it, vi } from 'vitest';
import { createTable, ErrorCodes, getBackend, listBackends, loadDefaultBackend, registerBackend, referenceBackend, setDefaultBackend, unregisterBackend } from '@embedstack/core';
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

  it('cuda and cuda-host name @embedstack/cuda-backend; an unknown name gets the valid names and where the unloaded ones come from', () => {
    registerBackend({ ...referenceBackend, name: 'mine', priority: 1, isUsable: () => true, capabilities: () => referenceBackend.capabilities(), devices: () => referenceBackend.devices(), createTable: (o) => referenceBackend.createTable(o) });
    for (const name of ['cuda', 'cuda-host']) {
      const e = throwsCode(() => getBackend(name), ErrorCodes.NOT_FOUND, 'backend');
      expect(e.message).toBe(
        `Expected backend to be one of [mine, reference] but received "${name}". Backend "${name}" is not loaded: install and import @embedstack/cuda-backend (it registers itself)`,
      );
    }
    expect(throwsCode(() => getBackend('tpu'), ErrorCodes.NOT_FOUND, 'backend').message).toBe(
      'Expected backend to be one of [mine, reference, cpu, cuda, cuda-host] but received "tpu"; cpu, cuda, cuda-host register when their package is loaded (@embedstack/cpu-backend, @embedstack/cuda-backend; a facade loads the package when its name is asked for)',
    );
  });

  it('from EMBEDSTACK_BACKEND: says where the name came from, then the hint', () => {
    process.env.EMBEDSTACK_BACKEND = 'cpu';
    expect(throwsCode(() => getBackend(), ErrorCodes.NOT_FOUND, 'backend').message).toBe(
      'Expected backend to be one of [reference] but received "cpu" (from EMBEDSTACK_BACKEND or setDefaultBackend). Backend "cpu" is not loaded: install and import @embedstack/cpu-backend (it registers itself)',
    );
  });

  it('EMBEDSTACK_BACKEND=bogus through a facade (loadDefaultBackend): lists every valid name, the lazily loaded ones too, and loads nothing', () => {
    process.env.EMBEDSTACK_BACKEND = 'bogus';
    let loads = 0;
    const e = throwsCode(() => loadDefaultBackend({ load: () => void loads++ }), ErrorCodes.NOT_FOUND, 'backend');
    expect(e.message).toBe(
      'Expected backend to be one of [reference, cpu, cuda, cuda-host] but received "bogus" (from EMBEDSTACK_BACKEND or setDefaultBackend); cpu, cuda, cuda-host register when their package is loaded (@embedstack/cpu-backend, @embedstack/cuda-backend; a facade loads the package when its name is asked for)',
    );
    expect([loads, listBackends()]).toEqual([0, []]);
    // a registered cpu is listed among the registered names, once; the names still to load follow
    registerBackend({ ...referenceBackend, name: 'cpu', priority: 1, isUsable: () => true, capabilities: () => referenceBackend.capabilities(), devices: () => referenceBackend.devices(), createTable: (o) => referenceBackend.createTable(o) });
    expect(throwsCode(() => loadDefaultBackend({ load: () => void loads++ }), ErrorCodes.NOT_FOUND, 'backend').message).toBe(
      'Expected backend to be one of [cpu, reference, cuda, cuda-host] but received "bogus" (from EMBEDSTACK_BACKEND or setDefaultBackend); cuda, cuda-host register when their package is loaded (@embedstack/cuda-backend; a facade loads the package when its name is asked for)',
    );
    expect(loads).toBe(0);
  });

  it('reference is listed once when registered, and setDefaultBackend accepts it before it is registered, as getBackend does', () => {
    registerBackend(referenceBackend);
    expect(throwsCode(() => setDefaultBackend('cpu'), ErrorCodes.NOT_FOUND, 'backend').message).toContain('[reference] but received "cpu". Backend "cpu" is not loaded');
    unregisterBackend('reference');
    setDefaultBackend('reference');
    expect(getBackend().name).toBe('reference');
  });
});
