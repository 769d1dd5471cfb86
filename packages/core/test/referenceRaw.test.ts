// The reference backend's raw tables (what `table.raw` returns for a table of this backend):
// junk arguments are refused with coded errors and change nothing; random valid call sequences
// agree with a plain Map (core/testing rawFuzz.ts).
import { referenceBackend } from '@embedstack/core';
import { describeRawTableFuzz } from '@embedstack/core/testing';

describeRawTableFuzz({ name: 'the reference backend', make: (options) => referenceBackend.createTable(options), timeout: 300_000 });
