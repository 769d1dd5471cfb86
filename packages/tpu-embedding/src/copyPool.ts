/**
 * ArrayBuffers for the copies `enqueue` makes of the caller's arrays, reused from
 * batch to batch (never handed to the caller, so never detached). A new ArrayBuffer is fresh memory: the first write of each of
 * its pages is a page fault (a 4096 x 20-id batch copies 330 KB: 82 faults per call, on
 * a VM 1-1.5 ms, longer than the lookup it feeds). A buffer comes back here once its
 * batch is spent (TPUEmbedding decides when), and a later copy of at most its size and
 * more than half of it takes it back: a copy is a view of its first bytes, so batches
 * whose id counts vary reuse the same buffers. Each new buffer has 1/8 more room than
 * asked, for the next batch's few more ids. Copies are written in full before they are
 * read, so nothing of an earlier batch is ever read.
 */
export class CopyPool {
  /** Free buffers, oldest first. */
  readonly #free: ArrayBuffer[] = [];
  #freeBytes = 0;

  /** At most this many bytes of free buffers are kept (the oldest go first). */
  static readonly maxFreeBytes = 64 << 20;

  /** A buffer of at least `bytes` (>= 0): a free one of at most twice as many, else a new one. */
  take(bytes: number): ArrayBuffer {
    let best = -1;
    for (let i = 0; i < this.#free.length; i++) {
      const c = this.#free[i]!.byteLength;
      if (c >= bytes && c <= 2 * bytes && (best < 0 || c < this.#free[best]!.byteLength)) best = i;
    }
    if (best < 0) return new ArrayBuffer(Math.ceil((bytes + (bytes >>> 3)) / 64) * 64);
    const b = this.#free.splice(best, 1)[0]!;
    this.#freeBytes -= b.byteLength;
    return b;
  }

  /** Returns buffers from `take` (none of them in use any more). */
  give(buffers: readonly ArrayBuffer[]): void {
    for (const b of buffers) {
      if (b.byteLength > CopyPool.maxFreeBytes) continue;
      this.#free.push(b);
      this.#freeBytes += b.byteLength;
    }
    while (this.#freeBytes > CopyPool.maxFreeBytes) this.#freeBytes -= this.#free.shift()!.byteLength;
  }

  /** Bytes of the free buffers held (tests). */
  get freeBytes(): number {
    return this.#freeBytes;
  }

  /** Drops every free buffer. */
  clear(): void {
    this.#free.length = 0;
    this.#freeBytes = 0;
  }
}
