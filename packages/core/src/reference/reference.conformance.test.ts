import { runConformanceSuite } from '../testing/index.js';
import { referenceBackend } from './index.js';

// The oracle must pass its own suite.
runConformanceSuite({ name: 'reference', backend: () => referenceBackend });
