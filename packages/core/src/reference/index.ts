// The reference backend (test oracle) and its pure kernels.
import { applyOptimizerRow, combineBag, dedupeGradients } from './kernels.js';
import { compareKeepFirst, evictionLosers, nextScore, nowSeconds } from './scoring.js';

export { ReferenceBackend, referenceBackend } from './backend.js';
export { ReferenceDynamicTable } from './dynamicTable.js';
export { ReferenceStaticTable } from './staticTable.js';
export type { ScoreClock, EvictionCandidate } from './scoring.js';

/** Pure per-row functions other table implementations reuse (see kernels.ts and scoring.ts for the exact rules). */
export const referenceKernels = Object.freeze({
  applyOptimizerRow,
  combineBag,
  dedupeGradients,
  nextScore,
  evictionLosers,
  compareKeepFirst,
  nowSeconds,
});
