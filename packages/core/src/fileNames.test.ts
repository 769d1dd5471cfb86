import { describe, expect, it } from 'vitest';
import { ErrorCodes } from './errors.js';
import { fileNameOf } from './index.js';

describe('fileNameOf', () => {
  it('keeps plain names and percent-encodes the rest, dots included', () => {
    expect(fileNameOf('emb')).toBe('emb');
    expect(fileNameOf('table_0-x~')).toBe('table_0-x~');
    expect(fileNameOf('emb/user')).toBe('emb%2Fuser');
    expect(fileNameOf('../escaped')).toBe('%2E%2E%2Fescaped');
    expect(fileNameOf('.')).toBe('%2E');
    expect(fileNameOf('a\\b')).toBe('a%5Cb');
    expect(fileNameOf('a b%')).toBe('a%20b%25');
    expect(fileNameOf('a\u0000')).toBe('a%00');
    expect(fileNameOf('é')).toBe('%C3%A9');
  });

  it('maps distinct names to distinct file names that stay in their folder', () => {
    const names = ['a/b', 'a_b', 'a%2Fb', 'a.b', 'a%2Eb', '..', '.', '%2E%2E', 'a', 'A'];
    const out = names.map((n) => fileNameOf(n));
    expect(new Set(out).size).toBe(names.length);
    for (const f of out) expect(f).toMatch(/^[^/\\.\u0000]+$/);
    // decoding gives the name back (one-to-one)
    expect(out.map((f) => decodeURIComponent(f))).toEqual(names);
  });

  it('rejects a non-string, an empty string and a lone surrogate, naming the argument', () => {
    expect(() => fileNameOf(5 as never)).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_TYPE, argument: 'name' }));
    expect(() => fileNameOf('', 'v.name')).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_TYPE, argument: 'v.name' }));
    expect(() => fileNameOf('a\ud800')).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_ARGUMENT, argument: 'name' }));
    expect(fileNameOf('\ud83d\ude00')).toBe('%F0%9F%98%80'); // a surrogate pair is fine
  });
});
