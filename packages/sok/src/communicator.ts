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
   * A sum over devices scattered by chunk: chunk c ([lengths[c]] float64) ends up on
   * device c holding Σ_d (device d's contribution to chunk c). `produce(d, c, into)`
   * computes device d's contribution to chunk c and ADDS it to `into` (it must only
   * add, as core's lookupCombinedPartial does). Calls for one chunk never overlap; the
   * order in which devices add to a chunk is the ring order c, c+1, ... (mod N).
   */
  reduceScatter(lengths: readonly number[], produce: (device: number, chunk: number, into: Float64Array) => Promise<void>): Promise<Float64Array[]>;
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
 * N devices in this process (shards on the CPU backend). Host memory is shared, so
 * the collectives move references: `allgather` of adjacent views of one buffer is a
 * view of the whole (no copy); `alltoall` transposes; `reduceScatter` runs the ring
 * schedule (N phases; in phase p device d adds its part of chunk (d + p) mod N
 * straight into that chunk's buffer), the devices of one phase concurrently, so
 * their native calls run in parallel on the libuv pool.
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

  async reduceScatter(lengths: readonly number[], produce: (device: number, chunk: number, into: Float64Array) => Promise<void>): Promise<Float64Array[]> {
    const n = this.numDevices;
    this.#check(lengths.length, 'reduceScatter');
    const chunks = lengths.map((len) => new Float64Array(len));
    for (let phase = 0; phase < n; phase++) {
      await Promise.all(Array.from({ length: n }, (_, d) => produce(d, (d + phase) % n, chunks[(d + phase) % n]!)));
    }
    return chunks;
  }

  async barrier(): Promise<void> {}
}
