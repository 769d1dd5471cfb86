import { readFile } from 'node:fs/promises';
import { InvalidArgumentError, invalidParameter, InvalidTypeError, IOError, NotFoundError } from '@embedstack/core';

/**
 * Removes `//` line comments and `/* *\/` block comments outside JSON strings (HugeCTR's
 * own docs put `//` comments in their ps.json), keeping line numbers for parse errors.
 */
export function stripJsonComments(text: string): string {
  if (typeof text !== 'string') throw invalidParameter('text', 'a string', text, InvalidTypeError);
  let out = '';
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i]!;
    if (c === '"') {
      let j = i + 1;
      while (j < n && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (c === '/' && text[i + 1] === '/') {
      while (i < n && text[i] !== '\n') i++;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      const stop = end < 0 ? n : end + 2;
      out += text.slice(i, stop).replace(/[^\n]/g, ' ');
      i = stop;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** Parses JSON with comments tolerated. @throws InvalidArgumentError naming `source` */
export function parseJsonc(text: string, source: string): unknown {
  const clean = stripJsonComments(text);
  try {
    return JSON.parse(clean) as unknown;
  } catch (e) {
    throw new InvalidArgumentError(`Expected ${source} to be JSON (with optional // comments) but it does not parse: ${(e as Error).message}`, { argument: 'psConfigFile', cause: e });
  }
}

/** Reads and parses a ps.json file. @throws NotFoundError (missing), IOError, InvalidArgumentError (not JSON) */
export async function readJsoncFile(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new NotFoundError(`Expected psConfigFile to be an existing file but received ${JSON.stringify(path)} (not found)`, { argument: 'psConfigFile', cause: e });
    throw new IOError(`Could not read psConfigFile ${JSON.stringify(path)}: ${(e as Error).message}`, { argument: 'psConfigFile', cause: e });
  }
  return parseJsonc(text, `psConfigFile ${JSON.stringify(path)}`);
}
