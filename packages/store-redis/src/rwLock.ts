/**
 * A FIFO reader-writer lock for async calls: readers share, a writer is alone, and
 * nobody overtakes a waiting writer. It orders the calls of ONE table object in
 * this process; calls from other processes are ordered by Redis per command or
 * script only.
 */
export class RwLock {
  #readers = 0;
  #writer = false;
  #queue: { write: boolean; grant: () => void }[] = [];

  async read<T>(fn: () => Promise<T>): Promise<T> {
    await this.#acquire(false);
    try {
      return await fn();
    } finally {
      this.#readers--;
      this.#pump();
    }
  }

  async write<T>(fn: () => Promise<T>): Promise<T> {
    await this.#acquire(true);
    try {
      return await fn();
    } finally {
      this.#writer = false;
      this.#pump();
    }
  }

  #acquire(write: boolean): Promise<void> {
    return new Promise((grant) => {
      this.#queue.push({ write, grant });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#queue.length > 0) {
      const head = this.#queue[0]!;
      if (head.write) {
        if (this.#writer || this.#readers > 0) return;
        this.#writer = true;
      } else {
        if (this.#writer) return;
        this.#readers++;
      }
      this.#queue.shift();
      head.grant();
    }
  }
}
