import { afterAll, vi } from 'vitest';

/**
 * For a test file about the backend registry from its empty start (what a user's process
 * sees): vitest runs many files in one worker (`isolate: false`, vitest.config.ts), and the
 * registry is one per process (on globalThis). This gives the file an empty registry and
 * fresh copies of the modules it imports (so importing core runs again). After the file it
 * puts the shared registry back and resets the modules again: the copies this file loaded hold
 * its own registry, so the next file in the worker loads its own copies, which find the shared
 * one. Call it before the file's imports:
 * `await vi.hoisted(async () => (await import('./ownRegistry.js')).ownRegistry());`
 */
export function ownRegistry(): void {
  const key = Symbol.for('embedstack.backendRegistry');
  const g = globalThis as Record<symbol, unknown>;
  const shared = g[key];
  delete g[key];
  vi.resetModules();
  afterAll(() => {
    if (shared === undefined) delete g[key];
    else g[key] = shared;
    vi.resetModules();
  });
}
