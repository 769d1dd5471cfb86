import { runConformanceSuite } from '@embedstack/core/testing';
import { cpuBackend } from '@embedstack/cpu-backend';

// core's backend conformance suite, including the differential property tests
// against the reference backend.
runConformanceSuite({ name: 'cpu', backend: () => cpuBackend, propertyRuns: 60 });
