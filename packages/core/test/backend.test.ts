import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createTable,
  FALLBACK_ENV,
  type EmbeddingBackend,
  ErrorCodes,
  getBackend,
  hasBackend,
  listBackends,
  loadDefaultBackend,
  ReferenceBackend,
  referenceBackend,
  registerBackend,
  setDefaultBackend,
  unregisterBackend,
} from '@embedstack/core';
import { throwsCode } from './util.js';

await vi.hoisted(async () => (await import('./ownRegistry.js')).ownRegistry());

// Checked before any test registers anything: importing core registers no backend.
const initiallyRegistered = listBackends();

function fake(name: string, priority: number, usable = true, reason?: string): EmbeddingBackend {
  return {
    name,
    priority,
    isUsable: () => usable,
    capabilities: () => ({ sync: true, threads: 1, device: 'js' }),
    devices: () => [{ id: 'js:0', kind: 'js' }],
    createTable: (o) => referenceBackend.createTable(o),
    ...(reason ? { unavailableReason: () => reason } : {}),
  };
}

const saved = process.env.EMBEDSTACK_BACKEND;
afterEach(() => {
  for (const n of listBackends()) unregisterBackend(n);
  setDefaultBackend(undefined);
  if (saved === undefined) delete process.env.EMBEDSTACK_BACKEND;
  else process.env.EMBEDSTACK_BACKEND = saved;
});

describe('backend registry', () => {
  it('core registers nothing on import; the reference backend is opt-in', () => {
    expect(initiallyRegistered).toEqual([]);
    expect(hasBackend()).toBe(false);
    expect(referenceBackend).toBeInstanceOf(ReferenceBackend);
    expect([referenceBackend.name, referenceBackend.priority]).toEqual(['reference', 0]);
    expect(referenceBackend.capabilities()).toEqual({ sync: true, threads: 1, device: 'js', storageDtypes: ['float32', 'float16', 'bfloat16'] });
    expect(referenceBackend.isUsable()).toBe(true);
    expect(referenceBackend.unavailableReason()).toBeUndefined();
    expect(referenceBackend.devices()[0]!.kind).toBe('js');
  });

  it('register, list, has, unregister', () => {
    registerBackend(referenceBackend);
    registerBackend(fake('a', 5));
    expect(listBackends()).toEqual(['reference', 'a']);
    expect(hasBackend()).toBe(true);
    expect(hasBackend('a')).toBe(true);
    expect(hasBackend('b')).toBe(false);
    registerBackend(fake('a', 7)); // replaces
    expect(getBackend('a').priority).toBe(7);
    expect(unregisterBackend('a')).toBe(true);
    expect(unregisterBackend('a')).toBe(false);
    throwsCode(() => registerBackend({ name: 'x' } as never), ErrorCodes.INVALID_TYPE, 'backend');
    throwsCode(() => registerBackend(null as never), ErrorCodes.INVALID_TYPE, 'backend');
  });

  it('the registry lives on globalThis so copies of core share it', () => {
    registerBackend(fake('shared', 1));
    const state = (globalThis as Record<symbol, { backends: Map<string, EmbeddingBackend> }>)[Symbol.for('embedstack.backendRegistry')]!;
    expect([...state.backends.keys()]).toEqual(['shared']);
  });

  it('without a name: the usable backend of highest priority', () => {
    registerBackend(referenceBackend);
    registerBackend(fake('cpu', 10));
    registerBackend(fake('cuda', 20, false, 'no GPU: install the CUDA driver'));
    expect(getBackend().name).toBe('cpu');
    unregisterBackend('cpu');
    expect(getBackend().name).toBe('reference');
  });

  it('setDefaultBackend chooses by name; undefined returns to automatic choice; unknown names are NOT_FOUND', () => {
    registerBackend(referenceBackend);
    registerBackend(fake('cpu', 10));
    setDefaultBackend('reference');
    expect(getBackend().name).toBe('reference');
    expect(getBackend('cpu').name).toBe('cpu');
    setDefaultBackend(undefined);
    expect(getBackend().name).toBe('cpu');
    const e = throwsCode(() => setDefaultBackend('tpu'), ErrorCodes.NOT_FOUND, 'backend');
    expect(e.message).toContain('"tpu"');
    expect(e.message).toContain('[reference, cpu, cuda, cuda-host]');
    setDefaultBackend('reference');
    unregisterBackend('reference'); // clears the default
    expect(getBackend().name).toBe('cpu');
  });

  it('EMBEDSTACK_BACKEND overrides setDefaultBackend and priority; an explicit name overrides it', () => {
    registerBackend(referenceBackend);
    registerBackend(fake('cpu', 10));
    setDefaultBackend('cpu');
    process.env.EMBEDSTACK_BACKEND = 'reference';
    expect(getBackend().name).toBe('reference');
    expect(getBackend('cpu').name).toBe('cpu');
    process.env.EMBEDSTACK_BACKEND = '';
    expect(getBackend().name).toBe('cpu');
    process.env.EMBEDSTACK_BACKEND = 'cuda';
    const e = throwsCode(() => getBackend(), ErrorCodes.NOT_FOUND, 'backend');
    expect(e.message).toContain('"cuda"');
    expect(e.message).toContain('EMBEDSTACK_BACKEND');
  });

  it('an unusable backend explains itself, named or not', () => {
    registerBackend(fake('cuda', 20, false, 'no GPU found: install the NVIDIA driver'));
    const named = throwsCode(() => getBackend('cuda'), ErrorCodes.BACKEND_UNAVAILABLE, 'cuda');
    expect(named.message).toContain('no GPU found: install the NVIDIA driver');
    registerBackend(fake('mystery', 1, false));
    const none = throwsCode(() => getBackend(), ErrorCodes.BACKEND_UNAVAILABLE, '@embedstack/cpu-backend');
    expect(none.message).toContain('- cuda: no GPU found: install the NVIDIA driver');
    expect(none.message).toContain('- mystery: not usable');
    expect(throwsCode(() => getBackend('mystery'), ErrorCodes.BACKEND_UNAVAILABLE, 'mystery').message).toContain('no reason given');
  });

  it('with nothing registered, getBackend says how to get one', () => {
    const e = throwsCode(() => getBackend(), ErrorCodes.BACKEND_UNAVAILABLE, 'registerBackend');
    expect(e.message).toContain('@embedstack/cpu-backend');
  });

  it('createTable takes a backend object, a registered name, or the default', () => {
    const a = createTable({ dim: 2, name: 'x' }, { backend: referenceBackend });
    expect(a.backendName).toBe('reference');
    registerBackend(fake('other', 3));
    const b = createTable({ dim: 2 }, { backend: 'other' });
    expect(b.backendName).toBe('other');
    const c = createTable({ dim: 2 });
    expect(c.backendName).toBe('other');
    throwsCode(() => createTable({ dim: 2 }, { backend: 'nope' }), ErrorCodes.NOT_FOUND, 'nope');
    throwsCode(() => createTable({ dim: 0 }, { backend: referenceBackend }), ErrorCodes.INVALID_ARGUMENT, 'dim');
  });

  it('the reference backend is selectable by name (or EMBEDSTACK_BACKEND) without registering it', () => {
    expect(getBackend('reference')).toBe(referenceBackend);
    unregisterBackend('reference');
    process.env.EMBEDSTACK_BACKEND = 'reference';
    expect(getBackend()).toBe(referenceBackend);
    expect(createTable({ dim: 2 }).backendName).toBe('reference');
  });
});

describe('loadDefaultBackend', () => {
  it('uses a backend object as is and a name through the registry', () => {
    const a = fake('a', 1);
    expect(loadDefaultBackend({ backend: a })).toBe(a);
    registerBackend(a);
    expect(loadDefaultBackend({ backend: 'a' })).toBe(a);
    expect(loadDefaultBackend()).toBe(a);
    expect(loadDefaultBackend({ backend: 'reference' })).toBe(referenceBackend);
    throwsCode(() => loadDefaultBackend({ backend: 5 as never }), ErrorCodes.INVALID_TYPE, 'backend');
    throwsCode(() => loadDefaultBackend({ backend: { name: 'x' } as never }), ErrorCodes.INVALID_TYPE, 'backend');
    throwsCode(() => loadDefaultBackend({ backend: 'nope' }), ErrorCodes.NOT_FOUND, 'backend');
  });

  it('explains what to do when nothing is registered and the CPU backend cannot be resolved', () => {
    const missing = () => {
      throw Object.assign(new Error("Cannot find module '@embedstack/cpu-backend'"), { code: 'MODULE_NOT_FOUND' });
    };
    const e = throwsCode(() => loadDefaultBackend({ load: missing }), ErrorCodes.BACKEND_UNAVAILABLE, '@embedstack/cpu-backend');
    expect(e.message).toContain('npm install @embedstack/cpu-backend');
    expect(e.message).toContain('EMBEDSTACK_BACKEND=reference');
    expect(e.cause).toBeInstanceOf(Error);
    const broken = () => {
      throw new Error('embedstack_cpu.node: invalid ELF header');
    };
    const b = throwsCode(() => loadDefaultBackend({ load: broken }), ErrorCodes.BACKEND_UNAVAILABLE, 'invalid ELF header');
    expect(b.message).toContain('rebuild it');
    // A package that loads but registers nothing is reported too.
    throwsCode(() => loadDefaultBackend({ load: () => undefined }), ErrorCodes.BACKEND_UNAVAILABLE, 'did not register');
    expect(hasBackend()).toBe(false);
    // Asked for 'reference', nothing is loaded.
    expect(loadDefaultBackend({ backend: 'reference', load: broken })).toBe(referenceBackend);
  });
});

describe('EMBEDSTACK_FALLBACK=reference: the opt-in fallback when no native backend can run', () => {
  const savedFallback = process.env.EMBEDSTACK_FALLBACK;
  const registryState = (globalThis as Record<symbol, { warnedFallback?: boolean }>)[Symbol.for('embedstack.backendRegistry')]!;
  const brokenCpu = () => fake('cpu', 10, false, 'embedstack_cpu.node: no prebuilt binary for linux-riscv64; run `npm rebuild`');
  afterEach(() => {
    if (savedFallback === undefined) delete process.env.EMBEDSTACK_FALLBACK;
    else process.env.EMBEDSTACK_FALLBACK = savedFallback;
    registryState.warnedFallback = false;
    vi.restoreAllMocks();
  });

  it('without it, an installed but unusable CPU backend is an error naming its reason and both ways to the reference backend', () => {
    delete process.env.EMBEDSTACK_FALLBACK;
    registerBackend(brokenCpu());
    const e = throwsCode(() => loadDefaultBackend({ load: () => undefined }), ErrorCodes.BACKEND_UNAVAILABLE, 'can run on this machine (cpu)');
    expect(e.message).toContain('- cpu: embedstack_cpu.node: no prebuilt binary for linux-riscv64; run `npm rebuild`');
    expect(e.message).not.toContain('Install and import');
    expect(e.message).toContain('EMBEDSTACK_BACKEND=reference');
    expect(e.message).toContain('EMBEDSTACK_FALLBACK=reference');
  });

  it('with it, the reference backend serves and one process warning says why (the unusable backend\'s reason)', () => {
    process.env.EMBEDSTACK_FALLBACK = 'reference';
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    registerBackend(brokenCpu());
    expect(loadDefaultBackend({ load: () => undefined })).toBe(referenceBackend);
    expect(loadDefaultBackend({ load: () => undefined })).toBe(referenceBackend);
    const t = createTable({ dim: 2 });
    expect(t.backendName).toBe('reference');
    t.dispose();
    expect(warn).toHaveBeenCalledTimes(1);
    const [message, options] = warn.mock.calls[0]! as [string, { code: string; type: string }];
    expect(message).toContain('EMBEDSTACK_FALLBACK=reference: running on the pure-TypeScript reference backend');
    expect(message).toContain('no prebuilt binary for linux-riscv64');
    expect(options).toEqual({ type: 'EmbedstackWarning', code: 'EMBEDSTACK_FALLBACK' });
  });

  it('with it, a CPU backend package that cannot be loaded at all falls back too, the load error in the warning', () => {
    process.env.EMBEDSTACK_FALLBACK = 'reference';
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const missing = () => {
      throw Object.assign(new Error("Cannot find module '@embedstack/cpu-backend'"), { code: 'MODULE_NOT_FOUND' });
    };
    expect(loadDefaultBackend({ load: missing })).toBe(referenceBackend);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]![0])).toContain("Cannot find module '@embedstack/cpu-backend'");
  });

  it('is a last resort: a usable backend is chosen without a warning, and a backend asked for by name is never replaced', () => {
    process.env.EMBEDSTACK_FALLBACK = 'reference';
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const a = fake('a', 1);
    registerBackend(brokenCpu());
    registerBackend(a);
    expect(loadDefaultBackend({ load: () => undefined })).toBe(a);
    throwsCode(() => loadDefaultBackend({ backend: 'cpu', load: () => undefined }), ErrorCodes.BACKEND_UNAVAILABLE, 'linux-riscv64');
    const broken = () => {
      throw new Error('invalid ELF header');
    };
    unregisterBackend('cpu');
    throwsCode(() => loadDefaultBackend({ backend: 'cpu', load: broken }), ErrorCodes.BACKEND_UNAVAILABLE, 'invalid ELF header');
    expect(warn).not.toHaveBeenCalled();
  });

  it('any other value is an INVALID_ARGUMENT naming EMBEDSTACK_FALLBACK (checked when it would apply)', () => {
    process.env.EMBEDSTACK_FALLBACK = 'cpu';
    registerBackend(brokenCpu());
    const e = throwsCode(() => loadDefaultBackend({ load: () => undefined }), ErrorCodes.INVALID_ARGUMENT, 'EMBEDSTACK_FALLBACK');
    expect(e.message).toContain('"cpu"');
    expect(FALLBACK_ENV).toBe('EMBEDSTACK_FALLBACK');
  });
});
