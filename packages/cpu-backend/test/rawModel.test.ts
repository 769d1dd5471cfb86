// The CPU backend's raw tables under core/testing's raw-table fuzz (the one the reference backend
// and RedisRawTable run): junk is refused with coded errors and changes nothing, and random valid
// call sequences agree with a plain Map (rawJunk.test.ts has this backend's own junk cases too).
import { describeRawTableFuzz } from '@embedstack/core/testing';
import { cpuBackend } from '@embedstack/cpu-backend';

describeRawTableFuzz({ name: 'the CPU backend', make: (options) => cpuBackend.createTable(options), runs: Number(process.env.JUNK_RUNS ?? 20), timeout: 300_000 });
