import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ChildPeer } from './childPeer.js';
import { measureInterleaved } from './harness.js';

/** A real child process speaking the protocol: call i takes (i + 1) ms by its own account. */
const CHILD = `
const rl = require('node:readline').createInterface({ input: process.stdin });
console.log('setting up');
console.log('ready');
rl.on('line', (line) => {
  const i = Number(line.split(' ')[1]);
  if (i === 99) console.log('error no such batch');
  else console.log(String((i + 1) / 1000));
});
`;

const start = (script: string, log?: (l: string) => void): Promise<ChildPeer> =>
  ChildPeer.start(process.execPath, ['-e', script], { readyTimeoutMs: 20_000, ...(log ? { log } : {}) });

describe('ChildPeer', () => {
  it('stop resolves only once the child process has exited (its teardown after stdin closes included)', async () => {
    // on end of input the child writes a file after 300 ms, then exits: stop must not resolve before the file exists
    const dir = mkdtempSync(join(tmpdir(), 'childpeer-stop-'));
    const marker = join(dir, 'gone');
    const script = `
const rl = require('node:readline').createInterface({ input: process.stdin });
console.log('ready');
rl.on('line', () => console.log('0.001'));
rl.on('close', () => setTimeout(() => { require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'x'); process.exit(0); }, 300));
`;
    try {
      const peer = await start(script);
      expect(await peer.call(0)).toBe(0.001);
      const t0 = performance.now();
      await peer.stop();
      expect(existsSync(marker)).toBe(true);
      expect(performance.now() - t0).toBeGreaterThanOrEqual(250);
      await peer.stop(); // a second stop of a gone child resolves at once
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reports the seconds the child timed, and logs what it printed before ready', async () => {
    const logged: string[] = [];
    const peer = await start(CHILD, (l) => logged.push(l));
    try {
      expect(await peer.call(0)).toBe(0.001);
      expect(await peer.call(4)).toBe(0.005);
      expect(logged).toEqual(['setting up']);
      await expect(peer.call(99)).rejects.toThrow('child peer call 99 failed: no such batch');
    } finally {
      peer.close();
    }
  });

  it('is sampled in the same rounds as in-process jobs, one call per sample', async () => {
    const peer = await start(CHILD);
    const order: string[] = [];
    try {
      const job = peer.job('child', 10);
      const traced = { ...job, fn: async (i: number) => (order.push(`c${i}`), job.fn(i)) };
      const local = { label: 'local', items: 1, fn: (i: number) => void order.push(`l${i}`) };
      const [l, c] = await measureInterleaved([local, traced], { warmup: 1, minSamples: 3, maxSamples: 3, minMs: 0, sampleMs: 0 });
      // warm-up l0 c0; rounds l c, c l, l c
      expect(order).toEqual(['l0', 'c0', 'l1', 'c1', 'c2', 'l2', 'l3', 'c3']);
      expect(l!.samples).toHaveLength(3);
      // calls 1, 2, 3 took 2, 3, 4 ms by the child's clock: 10 items each
      expect(c!.samples.map((x) => Math.round(x))).toEqual([5000, 3333, 2500]);
      expect(c!.rate).toBeCloseTo(10 / 0.003, 6);
    } finally {
      peer.close();
    }
  });

  it('quietMs: the answer waits that long after the child answered, and the figure stays the child\'s own time', async () => {
    const peer = await ChildPeer.start(process.execPath, ['-e', CHILD], { readyTimeoutMs: 20_000, quietMs: 60 });
    try {
      const t0 = performance.now();
      expect(await peer.call(0)).toBe(0.001);
      expect(performance.now() - t0).toBeGreaterThanOrEqual(55); // a timer, not a speed: setTimeout never fires early by more than ~1 ms
    } finally {
      peer.close();
    }
  });

  it('explains a child that dies before it is ready, with its stderr', async () => {
    await expect(start("console.error('no module named torch'); process.exit(3)")).rejects.toThrow(/exited \(code 3\).*\n.*no module named torch/s);
  });

  it('explains a command that cannot start', async () => {
    await expect(ChildPeer.start('/nonexistent/python3', [])).rejects.toThrow(/could not start: spawn \/nonexistent\/python3 ENOENT/);
  });
});
