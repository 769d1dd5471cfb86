// Initializer specs written as plain objects go through the builders' checks (review32a #7).
import { createTable, initializers, referenceBackend, resolveTableOptions } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import { throwsCode } from './util.js';

const DIM = 2;

describe('core: plain-object initializers', () => {
  it('an initializer written as a plain object is checked as its builder checks it', () => {
    const make = (initializer: unknown) => () => resolveTableOptions({ dim: DIM, initializer } as never);
    throwsCode(make({ kind: 'row', values: new Float32Array([NaN, 1]) }), 'INVALID_ARGUMENT', 'initializer.values');
    throwsCode(make({ kind: 'row', values: [1, , ] }), 'INVALID_TYPE', 'initializer.values');
    throwsCode(make({ kind: 'uniform', min: 1, max: -1 }), 'INVALID_ARGUMENT', 'initializer.max');
    throwsCode(make({ kind: 'normal', mean: 0, std: -1 }), 'INVALID_ARGUMENT', 'initializer.std');
    throwsCode(make({ kind: 'truncatedNormal', mean: 0, std: -1 }), 'INVALID_ARGUMENT', 'initializer.std');
    throwsCode(make({ kind: 'constant', value: '3' }), 'INVALID_TYPE', 'initializer.value');
    throwsCode(make({ kind: 'constant' }), 'INVALID_TYPE', 'initializer.value');
    // well-formed plain objects still work, and match their builders
    const t = createTable({ dim: DIM, initializer: { kind: 'row', values: [0.5, -0.5] } as never }, { backend: referenceBackend });
    expect(Array.from(t.findSync([4n]).values)).toEqual([0.5, -0.5]);
    expect(resolveTableOptions({ dim: DIM, initializer: { kind: 'uniform', min: -1, max: 1 } as never }).initializer).toEqual(
      resolveTableOptions({ dim: DIM, initializer: initializers.uniform(-1, 1) }).initializer,
    );
  });
});
