/**
 * vitest global setup: every test run gets one private temporary folder, removed when the
 * run ends, so the files tests create under `os.tmpdir()` (copied addons, checkpoints,
 * RocksDB folders, configs) do not pile up in the system's /tmp across runs. Test
 * processes (vitest's forks and the children they start) inherit it through TMPDIR.
 *
 * Each vitest project runs its global setup; the first creates the folder and owns its
 * removal, the others reuse it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const OWNER = 'EMBEDSTACK_TEST_TMPDIR';

export default function setup(): (() => void) | undefined {
  if (process.env[OWNER]) return undefined;
  const previous = process.env.TMPDIR;
  const dir = mkdtempSync(join(tmpdir(), 'embedstack-tests-'));
  process.env[OWNER] = dir;
  process.env.TMPDIR = dir;
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    delete process.env[OWNER];
    rmSync(dir, { recursive: true, force: true });
  };
}
