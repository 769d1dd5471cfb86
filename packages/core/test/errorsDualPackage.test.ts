import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as src from '@embedstack/core';

// The built package (run `pnpm build` first): its CommonJS build through a real require,
// and, in a plain node process, its ESM build through a real import next to it.
const coreDir = fileURLToPath(new URL('..', import.meta.url));
const cjs = createRequire(import.meta.url)('@embedstack/core') as typeof src;

const CLASSES = [
  'InvalidArgumentError', 'InvalidTypeError', 'ShapeMismatchError', 'OutOfRangeError', 'NotFoundError', 'AlreadyExistsError',
  'FailedPreconditionError', 'UnsupportedError', 'DisposedError', 'CheckpointCorruptError', 'IOError', 'BackendUnavailableError',
  'StoreUnavailableError', 'InternalError',
] as const;

describe('instanceof across copies of core (dual-package hazard)', () => {
  it('the CommonJS build is another copy, and its errors are instances of this copy\'s classes', () => {
    expect(cjs.EmbeddingError).not.toBe(src.EmbeddingError);
    let thrown: unknown;
    try {
      cjs.createTable({ dim: -1 });
    } catch (e) {
      thrown = e;
    }
    expect((thrown as src.EmbeddingError).code).toBe('INVALID_ARGUMENT');
    expect(thrown).toBeInstanceOf(src.EmbeddingError);
    expect(thrown).toBeInstanceOf(src.InvalidArgumentError);
    expect(thrown).toBeInstanceOf(Error);
    expect(thrown instanceof src.InvalidTypeError).toBe(false);
    expect(thrown instanceof src.NotFoundError).toBe(false);
  });

  it('each class: exactly its own instances and EmbeddingError match, both ways; a base EmbeddingError with a subclass code is not a subclass instance', () => {
    for (const [from, to] of [[cjs, src], [src, cjs]] as const) {
      for (const name of CLASSES) {
        const e = new from[name]('m');
        for (const other of CLASSES) expect([name, other, e instanceof to[other]]).toEqual([name, other, other === name]);
        expect(e instanceof to.EmbeddingError).toBe(true);
      }
      const base = new from.EmbeddingError('NOT_FOUND', 'm');
      expect(base instanceof to.EmbeddingError).toBe(true);
      expect(base instanceof to.NotFoundError).toBe(false);
    }
  });

  it('unrelated objects and plain errors do not pass; a user subclass keeps the plain prototype check', () => {
    const lookalikes: unknown[] = [
      new Error('x'), { code: 'NOT_FOUND', name: 'NotFoundError', message: 'x' }, Object.create(Error.prototype), null, undefined, 'NotFoundError', 7,
      Object.assign(new Error('x'), { code: 'INVALID_ARGUMENT', name: 'InvalidArgumentError' }), Object.create(null),
    ];
    for (const v of lookalikes) {
      expect(v instanceof src.EmbeddingError).toBe(false);
      expect(v instanceof src.NotFoundError).toBe(false);
    }
    class MyError extends src.NotFoundError {}
    class TheirError extends cjs.NotFoundError {}
    expect(new MyError('m') instanceof MyError).toBe(true);
    expect(new TheirError('m') instanceof src.NotFoundError).toBe(true); // a subclass of the other copy's NotFoundError
    expect(new TheirError('m') instanceof MyError).toBe(false);
    expect(new cjs.NotFoundError('m') instanceof MyError).toBe(false);
  });

  it('plain node: an error thrown by require(\'@embedstack/core\') is instanceof the class from import \'@embedstack/core\'', () => {
    const script = `
      import { createRequire } from 'node:module';
      import { EmbeddingError, InvalidArgumentError, NotFoundError } from '@embedstack/core';
      const cjs = createRequire(import.meta.url)('@embedstack/core');
      let e;
      try { cjs.createTable({ dim: -1 }); } catch (x) { e = x; }
      const esm = await import('@embedstack/core');
      let f;
      try { esm.createTable({ dim: -1 }); } catch (x) { f = x; }
      console.log(JSON.stringify([cjs.EmbeddingError === EmbeddingError, e.code, e instanceof EmbeddingError, e instanceof InvalidArgumentError,
        e instanceof NotFoundError, f instanceof cjs.EmbeddingError, f instanceof cjs.InvalidArgumentError]));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: coreDir, encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual([false, 'INVALID_ARGUMENT', true, true, false, true, true]);
  });
});
