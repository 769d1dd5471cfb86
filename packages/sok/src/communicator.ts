import { InternalError } from '@embedstack/core';

/** The buffers devices exchange: ids, pooled partial sums, gradients. */
export type DeviceBuffer = BigInt64Array | Int32Array | Float32Array | Float64Array;

/**
 * How N devices exchange data (SOK's NCCL layer). Every collective takes one
 * argument per device (index = device id) and resolves when every device has its
 * result, like a grouped NCCL call. Buffers are host memory on the CPU backend; a
 * CUDA communicator would take device buffers of the same shapes. The facade may run
 * the collectives of several tables concurrently (an NCCL implementation orders them
 * on its stream, in call order).
 *
 * An implementation over NCCL maps `allgather` to `ncclAllGather` (after an
 * all-gather of the sizes), `alltoall` to grouped `ncclSend`/`ncclRecv`,
 * `reduceScatter` to `ncclReduceScatter` of the produced partials, `barrier` to a
 * one-element all-reduce (see the package README, "Beyond one machine").
 */
export interface Communicator {
  /** The number of devices N (>= 1). */
  readonly numDevices: number;
  /** A short name for messages ('in-process'). */
  readonly kind: string;
  /**
   * Every device sends `send[d]` (sizes may differ); every device receives the
   * concatenation send[0] ++ ... ++ send[N-1] (one buffer, device order).
   */
  allgather<T extends DeviceBuffer>(send: readonly T[]): Promise<T>;
  /** Device d sends `send[d][e]` to device e; the result's [e][d] is what e received from d. Sizes may differ. */
  alltoall<T extends DeviceBuffer>(send: readonly (readonly T[])[]): Promise<T[][]>;
  /**
   * A sum over devices scattered by chunk (NCCL's reduce-scatter): every device d fills
   * its own float64 send buffer ([Σ recv[c].length], zeroed; chunk c at offset
   * Σ recv[<c].length) with `produce(d, send)`, which must only ADD to it (as core's
   * lookupCombinedPartial does); device c then receives Σ_d send_d[chunk c], added in
   * device order 0, 1, ..., N-1 and rounded once to float32, in `recv[c]` (its receive
   * buffer, written whole). The send buffers belong to the communicator (on NCCL,
   * device memory it keeps between calls); `send` is valid only until `produce` resolves.
   */
  reduceScatter(recv: readonly Float32Array[], produce: (device: number, send: Float64Array) => Promise<void>): Promise<void>;
  /** Resolves when every device has reached the barrier. */
  barrier(): Promise<void>;
}

/** Views of one buffer laid end to end: the concatenation without copying, or null. */
function contiguous<T extends DeviceBuffer>(parts: readonly T[]): T | null {
  const first = parts[0]!;
  let end = first.byteOffset + first.byteLength;
  for (let i = 1; i < parts.length; i++) {
    const p = parts[i]!;
    if (p.buffer !== first.buffer || p.constructor !== first.constructor || p.byteOffset !== end) return null;
    end += p.byteLength;
  }
  const Ctor = first.constructor as new (buffer: ArrayBufferLike, byteOffset: number, length: number) => T;
  return new Ctor(first.buffer, first.byteOffset, (end - first.byteOffset) / first.BYTES_PER_ELEMENT);
}

/** out[i] = a[at + i] + b[at + i] for i < out.length (float64 add; a Float32Array out rounds once). Unrolled: V8 does not vectorize (25% faster measured). */
function addInto(out: Float32Array | Float64Array, a: Float64Array, b: Float64Array, at: number): void {
  const n = out.length;
  let i = 0;
  for (; i + 3 < n; i += 4) {
    const k = at + i;
    out[i] = a[k]! + b[k]!;
    out[i + 1] = a[k + 1]! + b[k + 1]!;
    out[i + 2] = a[k + 2]! + b[k + 2]!;
    out[i + 3] = a[k + 3]! + b[k + 3]!;
  }
  for (; i < n; i++) out[i] = a[at + i]! + b[at + i]!;
}

/**
 * The in-process reduction (on NCCL a device kernel): Σ_d send[d] in device order into
 * send[0], the last addition rounded once to float32 straight into the receive
 * buffers.
 */
function reduceInto(recv: readonly Float32Array[], send: readonly Float64Array[]): void {
  const n = send.length;
  const sum = send[0]!;
  for (let d = 1; d < n - 1; d++) addInto(sum, sum, send[d]!, 0);
  // Receive buffers laid end to end (lookupSparse's output rows) take one pass.
  const whole = contiguous(recv);
  const last = n > 1 ? send[n - 1]! : null;
  let at = 0;
  for (const r of whole ? [whole] : recv) {
    if (last) addInto(r, sum, last, at);
    else r.set(sum.subarray(at, at + r.length));
    at += r.length;
  }
}

/**
 * The reduce-scatter's float64 send buffers, kept between calls: a fresh multi-hundred-KiB
 * typed array costs page faults and zero fills on every call (measured 69 us for 256 KiB,
 * against 4 us to zero a kept one). Concurrent calls each take their own set; at most
 * KEEP_SETS sets of at most KEEP_BYTES (all N buffers) are kept.
 */
class SendBuffers {
  static readonly KEEP_SETS = 2;
  static readonly KEEP_BYTES = 32 << 20;
  readonly #free: Float64Array[][] = [];

  /** N zeroed buffers of `total` values (a kept set when one fits exactly). */
  take(n: number, total: number): Float64Array[] {
    const i = this.#free.findIndex((set) => set.length === n && set[0]!.length === total);
    if (i < 0) return Array.from({ length: n }, () => new Float64Array(total));
    return this.#free.splice(i, 1)[0]!;
  }

  /** Keeps `set` for a later take, zeroed now while the reduction left it in cache. */
  give(set: Float64Array[]): void {
    if (set[0]!.byteLength * set.length > SendBuffers.KEEP_BYTES) return;
    for (const b of set) b.fill(0);
    this.#free.push(set);
    if (this.#free.length > SendBuffers.KEEP_SETS) this.#free.shift();
  }
}

/**
 * N devices in this process (shards on the CPU backend). Host memory is shared, so
 * the collectives move references: `allgather` of adjacent views of one buffer is a
 * view of the whole (no copy); `alltoall` transposes; `reduceScatter` runs every
 * device's producer concurrently (their native calls run in parallel on the libuv
 * pool) on send buffers it keeps between calls, then adds them element by element in
 * device order and rounds into the receive buffers: the in-process stand-in for
 * NCCL's reduction, the only arithmetic outside core ops.
 */
export class InProcessCommunicator implements Communicator {
  readonly kind = 'in-process';
  readonly numDevices: number;
  readonly #sendBuffers = new SendBuffers();

  constructor(numDevices: number) {
    this.numDevices = numDevices;
  }

  #check(n: number, what: string): void {
    if (n !== this.numDevices) throw new InternalError(`${what}: expected ${this.numDevices} per-device arguments but received ${n}`);
  }

  async allgather<T extends DeviceBuffer>(send: readonly T[]): Promise<T> {
    this.#check(send.length, 'allgather');
    if (send.length === 1) return send[0]!;
    const whole = contiguous(send);
    if (whole) return whole;
    const first = send[0]!;
    const Ctor = first.constructor as new (length: number) => T;
    const out = new Ctor(send.reduce((n, s) => n + s.length, 0));
    let at = 0;
    for (const s of send) {
      if (s.constructor !== first.constructor) throw new InternalError('allgather: buffers of different types');
      (out as unknown as { set(a: ArrayLike<unknown>, o: number): void }).set(s as ArrayLike<unknown>, at);
      at += s.length;
    }
    return out;
  }

  async alltoall<T extends DeviceBuffer>(send: readonly (readonly T[])[]): Promise<T[][]> {
    this.#check(send.length, 'alltoall');
    for (const row of send) this.#check(row.length, 'alltoall');
    return Array.from({ length: this.numDevices }, (_, e) => send.map((row) => row[e]!));
  }

  async reduceScatter(recv: readonly Float32Array[], produce: (device: number, send: Float64Array) => Promise<void>): Promise<void> {
    const n = this.numDevices;
    this.#check(recv.length, 'reduceScatter');
    const total = recv.reduce((a, b) => a + b.length, 0);
    const send = this.#sendBuffers.take(n, total);
    try {
      // Every producer settles before the buffers go back (a failed device must not leave another writing into them).
      const settled = await Promise.allSettled(send.map((buf, d) => produce(d, buf)));
      for (const r of settled) if (r.status === 'rejected') throw r.reason;
      reduceInto(recv, send);
    } finally {
      this.#sendBuffers.give(send);
    }
  }

  async barrier(): Promise<void> {}
}
