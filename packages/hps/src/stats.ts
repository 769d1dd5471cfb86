/** Hits and misses of one level. `hitRate` = hits / (hits + misses), 0 before any access. */
export interface LevelStats {
  /** Keys found at this level. */
  hits: number;
  /** Keys not found at this level. */
  misses: number;
  /** hits / (hits + misses); 0 before any access. */
  hitRate: number;
}

/** `server.stats(model, tableId)`: cumulative since the server was created, across reloads of the model. */
export interface HpsStats {
  /** L1 (embedding cache) counts. */
  l1: LevelStats;
  /** L2 (volatile DB) counts. */
  l2: LevelStats;
  /** L3 (persistent DB) counts. */
  l3: LevelStats;
  /** Lookup latency percentiles in milliseconds (log-bucketed histogram, about 2% resolution). */
  latencyMs: {
    /** Median. */
    p50: number;
    /** 90th percentile. */
    p90: number;
    /** 99th percentile. */
    p99: number;
  };
  /** Lookup calls counted. */
  lookups: number;
}

const BUCKETS = 1200;
/** Bucket i covers [MIN * G^i, MIN * G^(i+1)) ms. */
const MIN_MS = 0.0005;
const G = 1.02;
const LOG_G = Math.log(G);

/** Counters and a latency histogram of one table (all devices). */
export class TableStats {
  readonly hits = [0, 0, 0];
  readonly misses = [0, 0, 0];
  #hist = new Float64Array(BUCKETS);
  #count = 0;

  count(level: 0 | 1 | 2, hits: number, misses: number): void {
    this.hits[level] = this.hits[level]! + hits;
    this.misses[level] = this.misses[level]! + misses;
  }

  latency(ms: number): void {
    const i = ms <= MIN_MS ? 0 : Math.min(BUCKETS - 1, Math.floor(Math.log(ms / MIN_MS) / LOG_G));
    this.#hist[i]!++;
    this.#count++;
  }

  #percentile(p: number): number {
    if (this.#count === 0) return 0;
    const target = p * this.#count;
    let acc = 0;
    for (let i = 0; i < BUCKETS; i++) {
      acc += this.#hist[i]!;
      if (acc >= target) return MIN_MS * G ** (i + 0.5);
    }
    return MIN_MS * G ** BUCKETS;
  }

  snapshot(): HpsStats {
    const level = (l: number): LevelStats => {
      const h = this.hits[l]!;
      const m = this.misses[l]!;
      return { hits: h, misses: m, hitRate: h + m === 0 ? 0 : h / (h + m) };
    };
    return {
      l1: level(0),
      l2: level(1),
      l3: level(2),
      latencyMs: { p50: this.#percentile(0.5), p90: this.#percentile(0.9), p99: this.#percentile(0.99) },
      lookups: this.#count,
    };
  }
}
