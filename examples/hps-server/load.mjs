// A bounded loopback load generator: `concurrency` clients fire `requests` infer calls in total and the
// script prints throughput, latency percentiles and the event-loop delay of this process.
import { monitorEventLoopDelay } from 'node:perf_hooks';

function percentile(sorted, p) {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

/**
 * @param {{ url: string, model: string, concurrency?: number, requests?: number, keysPerRequest?: number, keyRange?: number }} o
 * @returns {Promise<{ requests: number, failed: number, seconds: number, rps: number, keysPerSecond: number, p50: number, p99: number, loopP99: number, loopMax: number }>}
 */
export async function runLoad(o) {
  const url = new URL(o.url);
  if (url.hostname !== '127.0.0.1' && url.hostname !== 'localhost' && url.hostname !== '::1') throw new Error(`load.mjs only targets loopback, not ${url.hostname}`);
  const concurrency = Math.min(o.concurrency ?? 200, 1000);
  const total = Math.min(o.requests ?? 2000, 100000);
  const k = o.keysPerRequest ?? 64;
  const range = o.keyRange ?? 10000;
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  const lat = [];
  let next = 0;
  let failed = 0;
  const start = performance.now();
  let seed = 12345;
  const rand = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  async function client() {
    while (next < total) {
      next++;
      // Zipf-like skew: small keys are hot
      const data = Array.from({ length: k }, () => Math.floor(range * rand() ** 3));
      const t0 = performance.now();
      try {
        const r = await fetch(`${o.url}/v2/models/${o.model}/infer`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ inputs: [{ name: 'KEYS', datatype: 'INT64', shape: [k], data }] }),
        });
        await r.arrayBuffer();
        if (r.status !== 200) failed++;
      } catch {
        failed++;
      }
      lat.push(performance.now() - t0);
    }
  }
  await Promise.all(Array.from({ length: concurrency }, client));
  const seconds = (performance.now() - start) / 1000;
  loop.disable();
  lat.sort((a, b) => a - b);
  return {
    requests: total,
    failed,
    seconds,
    rps: total / seconds,
    keysPerSecond: (total * k) / seconds,
    p50: percentile(lat, 0.5),
    p99: percentile(lat, 0.99),
    loopP99: loop.percentile(99) / 1e6,
    loopMax: loop.max / 1e6,
  };
}
