// @embedstack/core/testing: the backend conformance suite (vitest + fast-check are peer dependencies).
export { runConformanceSuite } from './suite.js';
export type { ConformanceSuiteOptions } from './suite.js';
export { modelStep } from './model.js';
export { cacheSetOf } from './cacheSet.js';
export type { ModelOptimizer, ModelRow } from './model.js';
export { expectClose, expectSameState, snapshot, opsFor } from './harness.js';
export type { Form, Ops, RowState } from './harness.js';
export { describeJunkSuite, junkArbitrary, codedOrOk, junkTarget } from './junk.js';
export type { JunkTarget, JunkSuiteOptions } from './junk.js';
export { bundleChild, runChildUntil, childExit, kill9, type ChildExit } from './child.js';
export type { BundleChildOptions, ChildRun } from './child.js';
export { checkOptionNames, describeOptionNames, misspellings, onFresh } from './optionNames.js';
export type { FreshCase, OptionNamesCase } from './optionNames.js';
export { describeRawTableFuzz, rawJunkArbitrary, rawTableExamples } from './rawFuzz.js';
export type { RawFuzzTarget } from './rawFuzz.js';
