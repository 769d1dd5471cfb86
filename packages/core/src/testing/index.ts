// @embedstack/core/testing: the backend conformance suite. (filled by the conformance work)
export {};
