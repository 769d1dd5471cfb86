// The reference backend (test oracle) and its pure kernels.
import { bagDenominators, combineBackward, combinePartial, gatherRows, ownedEntries, scatterRows } from './combineOps.js';
import { entryGradients, placeFound, plannedGradients, planRead, poolPartial } from './plannedOps.js';
import { applyOptimizerRow, combineBag, dedupeGradients } from './kernels.js';
import { compareKeepFirst, evictionLosers, nextScore, nowSeconds } from './scoring.js';

export { ReferenceBackend, referenceBackend } from './backend.js';
export { ReferenceCache } from './cache.js';
export { ReferenceDynamicTable } from './dynamicTable.js';
export { ReferenceStaticTable } from './staticTable.js';
export type { ScoreClock, EvictionCandidate } from './scoring.js';
export type { OwnedEntries } from './combineOps.js';

/** Pure per-row functions other table implementations reuse (see kernels.ts and scoring.ts for the exact rules). */
export const referenceKernels = Object.freeze({
  applyOptimizerRow,
  combineBag,
  dedupeGradients,
  ownedEntries,
  bagDenominators,
  combinePartial,
  combineBackward,
  gatherRows,
  scatterRows,
  planRead,
  placeFound,
  poolPartial,
  entryGradients,
  plannedGradients,
  nextScore,
  evictionLosers,
  compareKeepFirst,
  nowSeconds,
});
