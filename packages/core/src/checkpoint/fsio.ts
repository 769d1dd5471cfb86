import { type FileHandle, mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { EmbeddingError, IOError } from '../errors.js';
import { crc32c } from './crc32c.js';

/**
 * File-system helpers of the checkpoint code: every failure becomes an `IOError`
 * (code IO_ERROR) naming the operation and the path, with the original error as
 * `cause`. Byte order helpers convert typed arrays to and from little-endian bytes.
 */

/** True on little-endian hosts (x86, ARM): typed-array bytes are already LE. */
export const HOST_IS_LE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Chunk size of streamed reads (checksums, range checks). A multiple of 8. */
export const READ_CHUNK = 4 << 20;

export function errnoOf(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : undefined;
}

export function ioError(op: string, path: string, cause: unknown): EmbeddingError {
  if (cause instanceof EmbeddingError) return cause;
  const why = cause instanceof Error ? cause.message : String(cause);
  return new IOError(`Could not ${op} "${path}": ${why}`, { cause });
}

/** Runs `fn`, turning any non-Embedding error into an IOError about `op` on `path`. */
export async function io<T>(op: string, path: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw ioError(op, path, e);
  }
}

/** stat, or null when the path does not exist. */
export async function statOrNull(path: string): Promise<Awaited<ReturnType<typeof stat>> | null> {
  try {
    return await stat(path);
  } catch (e) {
    if (errnoOf(e) === 'ENOENT' || errnoOf(e) === 'ENOTDIR') return null;
    throw ioError('stat', path, e);
  }
}

/** fsync a directory so renames and new entries inside it are durable. */
export async function fsyncDir(path: string): Promise<void> {
  if (process.platform === 'win32') return; // directories cannot be fsynced there
  await io('fsync directory', path, async () => {
    const h = await open(path, 'r');
    try {
      await h.sync();
    } finally {
      await h.close();
    }
  });
}

/**
 * mkdir -p, durably: fsyncs the parent of every level it created (the deepest first), so
 * a power loss after it returns cannot lose a new directory whose parent was new too.
 */
export async function ensureDir(path: string): Promise<void> {
  const leaf = resolve(path);
  const created = await io('create directory', leaf, () => mkdir(leaf, { recursive: true }));
  if (created === undefined) return;
  const first = resolve(created);
  for (let dir = leaf; ; dir = dirname(dir)) {
    await fsyncDir(dirname(dir));
    if (dir === first || dirname(dir) === dir) return;
  }
}

export async function renamePath(from: string, to: string): Promise<void> {
  await io(`rename to "${to}"`, from, () => rename(from, to));
}

export async function removeTree(path: string): Promise<void> {
  await io('remove', path, () => rm(path, { recursive: true, force: true }));
}

/** Writes a small file durably: create/truncate, write, fsync, close. */
export async function writeSmallFile(path: string, data: string | Uint8Array): Promise<void> {
  const w = await DataFileWriter.create(path, 'w');
  await w.write(typeof data === 'string' ? new TextEncoder().encode(data) : data);
  await w.finish();
}

/** Little-endian bytes of a typed array: a view on LE hosts, a swapped copy on BE hosts. */
export function leBytes(a: BigInt64Array | BigUint64Array | Float32Array | Int32Array): Uint8Array {
  const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  return HOST_IS_LE ? bytes : swapped(bytes, a.BYTES_PER_ELEMENT);
}

/** Reverses the bytes of every `width`-byte element (into a copy). */
export function swapped(bytes: Uint8Array, width: number): Uint8Array {
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i += width) {
    for (let j = 0; j < width; j++) out[i + j] = bytes[i + width - 1 - j]!;
  }
  return out;
}

/** Converts LE bytes read from a file into host order, in place. */
export function toHostOrder(bytes: Uint8Array, width: number): void {
  if (HOST_IS_LE || width === 1) return;
  bytes.set(swapped(bytes, width));
}

/**
 * A data file being written: sequential appends, running CRC32C and byte count;
 * `finish()` fsyncs and closes. Memory: only the caller's chunks.
 */
export class DataFileWriter {
  bytes = 0;
  crc = 0;
  private constructor(
    readonly path: string,
    private handle: FileHandle | null,
  ) {}

  static async create(path: string, flags = 'wx'): Promise<DataFileWriter> {
    return new DataFileWriter(path, await io('create', path, () => open(path, flags)));
  }

  async write(chunk: Uint8Array): Promise<void> {
    const h = this.handle!;
    this.crc = crc32c(chunk, this.crc);
    let done = 0;
    while (done < chunk.length) {
      const { bytesWritten } = await io('write', this.path, () => h.write(chunk, done, chunk.length - done, null));
      done += bytesWritten;
    }
    this.bytes += chunk.length;
  }

  async finish(): Promise<{ bytes: number; crc32c: number }> {
    const h = this.handle!;
    this.handle = null;
    try {
      await io('fsync', this.path, () => h.sync());
    } finally {
      await io('close', this.path, () => h.close());
    }
    return { bytes: this.bytes, crc32c: this.crc };
  }

  /** Closes without fsync (error paths). Never throws. */
  async abandon(): Promise<void> {
    const h = this.handle;
    this.handle = null;
    await h?.close().catch(() => undefined);
  }
}

/** Reads exactly `length` bytes at `position` into `buf` (from 0), or fails naming the path. */
export async function readExactly(h: FileHandle, path: string, buf: Uint8Array, length: number, position: number): Promise<void> {
  let done = 0;
  while (done < length) {
    const { bytesRead } = await io('read', path, () => h.read(buf, done, length - done, position + done));
    if (bytesRead === 0) throw new IOError(`Could not read "${path}": unexpected end of file at byte ${position + done}`);
    done += bytesRead;
  }
}

/** Streams `[0, length)` of an open file in chunks of READ_CHUNK bytes (one reused buffer). */
export async function* readChunks(h: FileHandle, path: string, length: number): AsyncGenerator<Uint8Array> {
  const buf = new Uint8Array(Math.min(READ_CHUNK, Math.max(length, 1)));
  for (let pos = 0; pos < length; pos += buf.length) {
    const n = Math.min(buf.length, length - pos);
    await readExactly(h, path, buf, n, pos);
    yield buf.subarray(0, n);
  }
}

/** A short random hex tag for temporary names. */
export function randomTag(): string {
  return Math.floor(Math.random() * 0x100000000)
    .toString(16)
    .padStart(8, '0');
}

export function hex32(n: number): string {
  return `0x${(n >>> 0).toString(16).padStart(8, '0')}`;
}
