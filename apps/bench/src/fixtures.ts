/**
 * Expensive setup shared between suites: key sets, filled dynamic tables and
 * native arenas, built on first use and kept until released. The CLI releases
 * them after each suite unless the next one reuses them (Suite.fixturesFor: the
 * `limit` suite hands `find` its 4M-key table and arena).
 */
import type { EmbeddingBackend, EmbeddingTable } from '@embedstack/core';
import { collectGarbage } from './harness.js';
import type { Arena, NativePeers } from './native.js';
import { progress } from './progress.js';
import { makeKeys } from './rng.js';
import { dynamicTable } from './tables.js';

export class Fixtures {
  readonly #backend: EmbeddingBackend;
  readonly #native: NativePeers;
  readonly #threads: number;
  readonly #keys = new Map<number, BigInt64Array>();
  readonly #tables = new Map<string, EmbeddingTable>();
  readonly #arenas = new Map<string, Arena>();

  constructor(backend: EmbeddingBackend, native: NativePeers, threads: number) {
    this.#backend = backend;
    this.#native = native;
    this.#threads = threads;
  }

  /** The first n keys of key sequence 1. */
  keys(n: number): BigInt64Array {
    let k = this.#keys.get(n);
    if (!k) this.#keys.set(n, (k = makeKeys(n, 1)));
    return k;
  }

  /** A presized dynamic table holding keys(n). */
  table(dim: number, n: number): EmbeddingTable {
    const id = `${dim}/${n}`;
    let t = this.#tables.get(id);
    if (!t) this.#tables.set(id, (t = dynamicTable(this.#backend, dim, this.keys(n))));
    return t;
  }

  /** A native [rows, dim] arena, every page written. */
  arena(rows: number, dim: number): Arena {
    const id = `${rows}/${dim}`;
    let a = this.#arenas.get(id);
    if (!a) {
      progress.label(`allocating a ${rows.toLocaleString('en-US')} x ${dim} native arena`);
      this.#arenas.set(id, (a = this.#native.createArena(rows, dim, this.#threads)));
    }
    return a;
  }

  releaseAll(): void {
    for (const t of this.#tables.values()) t.dispose();
    for (const a of this.#arenas.values()) this.#native.freeArena(a);
    this.#tables.clear();
    this.#arenas.clear();
    this.#keys.clear();
    collectGarbage();
  }
}
