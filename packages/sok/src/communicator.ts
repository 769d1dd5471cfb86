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
   * its own send buffer ([Σ lengths] float64, zeroed; chunk c at offset Σ lengths[<c])
   * with `produce(d, send)`, which must only ADD to it (as core's
   * lookupCombinedPartial does); the result's chunk c ([lengths[c]], for device c) is
   * Σ_d send_d[chunk c], added in device order 0, 1, ..., N-1.
   */
  reduceScatter(lengths: readonly number[], produce: (device: number, send: Float64Array) => Promise<void>): Promise<Float64Array[]>;
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
 * device's producer concurrently (their native calls run in parallel on the libuv
 * pool), then adds the send buffers element by element in device order: the
 * in-process stand-in for NCCL's reduction, the only arithmetic outside core ops.
 */
export class InProcessCommunicator implements Communicator {
  readonly kind = 'in-process';
  readonly numDevices: number;

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

  async reduceScatter(lengths: readonly number[], produce: (device: number, send: Float64Array) => Promise<void>): Promise<Float64Array[]> {
    const n = this.numDevices;
    this.#check(lengths.length, 'reduceScatter');
    const total = lengths.reduce((a, b) => a + b, 0);
    const send = Array.from({ length: n }, () => new Float64Array(total));
    await Promise.all(send.map((buf, d) => produce(d, buf)));
    // The reduction (on NCCL a device kernel): device order, into device 0's buffer, then scattered as views.
    const sum = send[0]!;
    for (let d = 1; d < n; d++) {
      const part = send[d]!;
      for (let i = 0; i < total; i++) sum[i] = sum[i]! + part[i]!;
    }
    const out: Float64Array[] = [];
    let at = 0;
    for (const len of lengths) {
      out.push(sum.subarray(at, at + len));
      at += len;
    }
    return out;
  }

  async barrier(): Promise<void> {}
}
