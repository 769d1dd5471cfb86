import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddingBackend } from '../backend.js';
import { SuiteContext } from './harness.js';
import { backwardSection } from './sections/backward.js';
import { basicOpsSection } from './sections/basicOps.js';
import { cacheSection } from './sections/cache.js';
import { checkpointSection } from './sections/checkpoint.js';
import { combinersSection } from './sections/combiners.js';
import { errorsSection } from './sections/errors.js';
import { exportImportSection } from './sections/exportImport.js';
import { initializersSection } from './sections/initializers.js';
import { optimizersSection } from './sections/optimizers.js';
import { outputsSection } from './sections/outputs.js';
import { propertiesSection } from './sections/properties.js';
import { scoresSection } from './sections/scores.js';
import { shardPlansSection } from './sections/shardPlans.js';
import { storageSection } from './sections/storage.js';

/** Options of {@link runConformanceSuite}. */
export interface ConformanceSuiteOptions {
  /** Shown in the test names. */
  name: string;
  /** Returns the backend under test; called once, before the first test. */
  backend: () => EmbeddingBackend | Promise<EmbeddingBackend>;
  /** Runs of each differential property test (fast-check). Default 50. */
  propertyRuns?: number;
  /**
   * Whether the backend offers synchronous operations (`capabilities().sync`).
   * Default true: every test runs in the Promise form and in the `...Sync` form.
   * With false, tests run in the Promise form and check that `...Sync` throws UNSUPPORTED.
   */
  sync?: boolean;
}

/**
 * Declares the backend conformance suite (vitest `describe`/`it` blocks). Call it
 * at the top level of a test file:
 *
 *   runConformanceSuite({ name: 'cpu', backend: () => cpuBackend });
 *
 * Tables are created with `createTable(options, { backend })` and disposed after
 * each test. Expected numbers are computed independently (by hand or by a plain
 * float64 model of core.md's formulas); the property tests compare every op and
 * the whole exported state with the reference backend. Exports are compared as
 * sets (backends may order rows differently).
 */
export function runConformanceSuite(options: ConformanceSuiteOptions): void {
  const sync = options.sync ?? true;
  const ctx = new SuiteContext(options.name, sync, options.propertyRuns ?? 50);
  describe(`conformance: ${options.name}`, () => {
    beforeAll(async () => {
      ctx.setBackend(await options.backend());
    });
    afterEach(() => ctx.disposeAll());

    it('describes itself: name, usable, capabilities and devices', () => {
      const b = ctx.backend;
      expect(typeof b.name).toBe('string');
      expect(b.name.length).toBeGreaterThan(0);
      expect(typeof b.priority).toBe('number');
      expect(b.isUsable()).toBe(true);
      const caps = b.capabilities();
      expect(caps.sync).toBe(sync);
      expect(Number.isInteger(caps.threads) && caps.threads >= 1).toBe(true);
      expect(['cpu', 'cuda', 'js']).toContain(caps.device);
      const devices = b.devices();
      expect(devices.length).toBeGreaterThan(0);
      for (const d of devices) expect(typeof d.id).toBe('string');
    });

    basicOpsSection(ctx);
    combinersSection(ctx);
    outputsSection(ctx);
    backwardSection(ctx);
    shardPlansSection(ctx);
    optimizersSection(ctx);
    scoresSection(ctx);
    exportImportSection(ctx);
    initializersSection(ctx);
    errorsSection(ctx);
    checkpointSection(ctx);
    storageSection(ctx);
    propertiesSection(ctx);
    cacheSection(ctx);
  });
}
