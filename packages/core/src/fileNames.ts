import { InvalidArgumentError, InvalidTypeError, invalidParameter } from './errors.js';

/**
 * The file or folder name that stores the table or variable called `name`: its
 * percent-encoding (`encodeURIComponent`) with dots encoded as well. The result never
 * holds `/`, `\`, NUL or a dot, so it cannot leave its folder (`..`) or be hidden, and
 * distinct names never share a file name (the encoding is one-to-one). Plain names stay
 * readable: `emb` -> `emb`, `emb/user` -> `emb%2Fuser`, `../x` -> `%2E%2E%2Fx`.
 * Used by tpu-embedding's checkpoint folders and sok's dump files.
 *
 * @param argument the name of the argument, for messages (default `name`)
 * @throws InvalidTypeError when `name` is not a non-empty string; InvalidArgumentError
 *   when it holds a lone UTF-16 surrogate (it has no encoding)
 */
export function fileNameOf(name: string, argument = 'name'): string {
  const arg = typeof argument === 'string' ? argument : 'name';
  if (typeof name !== 'string' || name.length === 0) throw invalidParameter(arg, 'a non-empty string', name, InvalidTypeError);
  if (/\p{Cs}/u.test(name)) throw invalidParameter(arg, 'a well-formed string (no lone UTF-16 surrogate)', name, InvalidArgumentError);
  return encodeURIComponent(name).replace(/\./g, '%2E');
}
