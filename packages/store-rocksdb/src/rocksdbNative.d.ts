// Type declarations for the parts of `rocksdb-native` (JS, no types shipped) that this package uses.
declare module 'rocksdb-native' {
  interface RocksDBOpenOptions {
    /** Column families opened (and created when missing) with the database. */
    columnFamilies?: string[];
    readOnly?: boolean;
    createIfMissing?: boolean;
    createMissingColumnFamilies?: boolean;
    /** RocksDB's background flush/compaction threads. */
    maxBackgroundJobs?: number;
    maxFileOpeningThreads?: number;
  }
  interface ReadBatch {
    get(key: Uint8Array): Promise<Buffer | null>;
    flush(): Promise<void>;
    tryFlush(): void;
    destroy(): void;
  }
  interface WriteBatch {
    put(key: Uint8Array, value: Uint8Array): Promise<void>;
    tryPut(key: Uint8Array, value: Uint8Array): void;
    tryDelete(key: Uint8Array): void;
    /** Deletes every key k with start <= k < end (byte order). */
    tryDeleteRange(start: Uint8Array, end: Uint8Array): void;
    flush(): Promise<void>;
    destroy(): void;
  }
  interface IteratorEntry {
    key: Buffer;
    value: Buffer;
  }
  /** A streamx Readable of entries; destroy() releases its RocksDB iterator (close() waits for that). */
  interface RocksIterator extends AsyncIterable<IteratorEntry> {
    destroy(err?: Error): void;
  }
  class RocksDB {
    constructor(path: string, opts?: RocksDBOpenOptions);
    readonly opened: boolean;
    readonly closed: boolean;
    readonly path: string;
    ready(): Promise<void>;
    close(opts?: { force?: boolean }): Promise<void>;
    columnFamily(name: string): RocksDB;
    read(opts?: { capacity?: number; autoDestroy?: boolean }): ReadBatch;
    write(opts?: { capacity?: number; autoDestroy?: boolean }): WriteBatch;
    iterator(range?: { gt?: Uint8Array; gte?: Uint8Array; lt?: Uint8Array; lte?: Uint8Array; limit?: number }, opts?: { values?: boolean }): RocksIterator;
    flush(): Promise<void>;
    /** Compacts keys in [start, end) (byte order) of this column family. */
    compactRange(start: Uint8Array, end: Uint8Array, opts?: { exclusive?: boolean; bottommostLevelCompaction?: number }): Promise<void>;
    /** NONE 0, SKIP 1, FORCE 2 (RocksDB's BottommostLevelCompaction). */
    static readonly constants: { bottommostLevelCompaction: { NONE: number; SKIP: number; FORCE: number } };
  }
  export = RocksDB;
}
