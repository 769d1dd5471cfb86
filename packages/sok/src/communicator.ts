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

/**
 * out[i] = Σ_d send[d][at + i], added in device order (((s0 + s1) + s2) + s3 in float64),
 * for i < out.length, send holding 1 to 4 buffers; a Float32Array out rounds each sum
 * once. One pass (V8 does not vectorize: fewer passes and an unrolled body measured faster).
 */
function sumInto(out: Float32Array | Float64Array, send: readonly Float64Array[], at: number): void {
  const n = out.length;
  const a = send[0]!;
  if (send.length === 1) {
    for (let i = 0; i < n; i++) out[i] = a[at + i]!;
    return;
  }
  const b = send[1]!;
  if (send.length === 2) {
    let i = 0;
    for (; i + 3 < n; i += 4) {
      const k = at + i;
      out[i] = a[k]! + b[k]!;
      out[i + 1] = a[k + 1]! + b[k + 1]!;
      out[i + 2] = a[k + 2]! + b[k + 2]!;
      out[i + 3] = a[k + 3]! + b[k + 3]!;
    }
    for (; i < n; i++) out[i] = a[at + i]! + b[at + i]!;
    return;
  }
  const c = send[2]!;
  if (send.length === 3) {
    for (let i = 0; i < n; i++) out[i] = a[at + i]! + b[at + i]! + c[at + i]!;
    return;
  }
  const d = send[3]!;
  for (let i = 0; i < n; i++) out[i] = a[at + i]! + b[at + i]! + c[at + i]! + d[at + i]!;
}

/**
 * The in-process reduction (on NCCL a device kernel): Σ_d send[d] in device order,
 * rounded once to float32, into the receive buffers (one pass over receive views of one
 * buffer laid end to end, as lookupSparse passes them).
 */
function reduceInto(recv: readonly Float32Array[], send: readonly Float64Array[]): void {
  let parts = send;
  if (send.length > 4) {
    // More than four devices: all but the last into send[0] first (device order kept).
    const a = send[0]!;
    sumInto(a, send.slice(0, 4), 0);
    for (let e = 4; e < send.length - 1; e++) sumInto(a, [a, send[e]!], 0);
    parts = [a, send[send.length - 1]!];
  }
  const whole = contiguous(recv);
  let at = 0;
  for (const r of whole ? [whole] : recv) {
    sumInto(r, parts, at);
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

/** Copies `s` into `out` from element `at`: both of one typed-array class. @throws InternalError when the classes differ */
function copyInto(out: DeviceBuffer, s: DeviceBuffer, at: number): void {
  if (s.constructor !== out.constructor) throw new InternalError('allgather: buffers of different types');
  if (out instanceof BigInt64Array) {
    if (s instanceof BigInt64Array) out.set(s, at);
  } else if (!(s instanceof BigInt64Array)) out.set(s, at);
}

/**
 * N devices in this process (shards on the CPU backend). Host memory is shared, so
 * the collectives move references: `allgather` of adjacent views of one buffer is a
 * view of the whole (no copy); `alltoall` transposes; `reduceScatter` runs every
 * device's producer concurrently (their native calls run in parallel on the CPU
 * backend's thread pool) on send buffers it keeps between calls, then adds them element by element in
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
      copyInto(out, s, at);
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
