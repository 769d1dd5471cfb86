// The in-process communicator's collectives, against sums written out in the test:
// reduceScatter adds the devices' float64 send buffers in device order and rounds each
// value once to float32 into the receive buffers (laid end to end or apart); its kept
// send buffers come back zeroed, also after a device failed.
import { InternalError } from '@embedstack/core';
import { InProcessCommunicator } from '@embedstack/sok';
import { describe, expect, it } from 'vitest';

/** Device d adds part(d, i) at every index i of its send buffer. */
const adding = (part: (d: number, i: number) => number) => async (d: number, send: Float64Array): Promise<void> => {
  for (let i = 0; i < send.length; i++) send[i] = send[i]! + part(d, i);
};

describe('InProcessCommunicator.reduceScatter', () => {
  it('sums in device order, rounds once to float32, and scatters by chunk (receive buffers apart)', async () => {
    const c = new InProcessCommunicator(3);
    const recv = [new Float32Array(2), new Float32Array(1), new Float32Array(3)];
    // 1 + 2^-24 + 2^-47 is exact in float64 and rounds up to 1 + 2^-23 in float32 (one
    // rounding); rounding after each addition would give 1. 0.1 + 0.2 + 0.3 in float64
    // device order is 0.6000000000000001.
    const parts = [
      [1, 0.1, 5, -1, 7, 0],
      [2 ** -24, 0.2, 6, 1, 8, 0],
      [2 ** -47, 0.3, 7, 2 ** -40, 9, -0],
    ];
    await c.reduceScatter(recv, adding((d, i) => parts[d]![i]!));
    expect(Array.from(recv[0]!)).toEqual([1 + 2 ** -23, Math.fround(0.1 + 0.2 + 0.3)]);
    expect(Array.from(recv[1]!)).toEqual([18]);
    expect(Array.from(recv[2]!)).toEqual([Math.fround(-1 + 1 + 2 ** -40), 24, 0]);
  });

  it('fills receive views of one buffer laid end to end (one pass), and reuses zeroed send buffers', async () => {
    const c = new InProcessCommunicator(2);
    const out = new Float32Array(7);
    const recv = [out.subarray(0, 4), out.subarray(4, 7)];
    for (let call = 1; call <= 3; call++) {
      await c.reduceScatter(recv, adding((d, i) => call * (d + 1) * (i + 1)));
      expect(Array.from(out)).toEqual([1, 2, 3, 4, 5, 6, 7].map((i) => call * 3 * i));
    }
  });

  it('4 and 6 devices: the same device-order sums as a plain loop, receive buffers laid end to end or apart', async () => {
    for (const n of [4, 6]) {
      const c = new InProcessCommunicator(n);
      const sizes = Array.from({ length: n }, (_, d) => (d % 3) + 1);
      const total = sizes.reduce((a, b) => a + b, 0);
      const part = (d: number, i: number): number => (d % 2 ? -1 : 1) * (0.1 * (d + 1) + 2 ** -(20 + i + d));
      const want = Array.from({ length: total }, (_, i) => {
        let x = 0;
        for (let d = 0; d < n; d++) x += part(d, i);
        return Math.fround(x);
      });
      const out = new Float32Array(total);
      let at = 0;
      const views = sizes.map((len) => out.subarray(at, (at += len)));
      const apart = sizes.map((len) => new Float32Array(len));
      for (const recv of [views, apart]) {
        await c.reduceScatter(recv, adding(part));
        expect(recv.flatMap((r) => Array.from(r))).toEqual(want);
      }
    }
  });

  it('one device: the receive buffers hold its send buffer rounded to float32', async () => {
    const c = new InProcessCommunicator(1);
    const recv = [new Float32Array(2)];
    await c.reduceScatter(recv, adding((_, i) => 0.1 * (i + 1)));
    expect(Array.from(recv[0]!)).toEqual([Math.fround(0.1), Math.fround(0.2)]);
  });

  it('rejects with the failing device\'s error only after every device settled; the next call starts from zeros', async () => {
    const c = new InProcessCommunicator(2);
    const recv = [new Float32Array(2), new Float32Array(2)];
    let slowDone = false;
    const failing = async (d: number, send: Float64Array): Promise<void> => {
      send.fill(100);
      if (d === 0) throw new Error('device 0 failed');
      await new Promise((r) => setTimeout(r, 20));
      send.fill(200);
      slowDone = true;
    };
    await expect(c.reduceScatter(recv, failing)).rejects.toThrow('device 0 failed');
    expect(slowDone).toBe(true);
    await c.reduceScatter(recv, adding((d) => d + 1));
    expect(Array.from(recv[0]!)).toEqual([3, 3]);
    expect(Array.from(recv[1]!)).toEqual([3, 3]);
  });

  it('refuses a receive list that is not one buffer per device', async () => {
    const c = new InProcessCommunicator(2);
    await expect(c.reduceScatter([new Float32Array(1)], adding(() => 1))).rejects.toThrow(InternalError);
  });
});
