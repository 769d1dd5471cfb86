import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));

/**
 * Tests only: runs one suite of the built CLI with `--json` (plus `args`) in a child process and
 * returns its one JSON object (checked: exit status 0, exactly one JSON line) and its stderr.
 */
export function runSuiteJson<T>(suite: string, args: readonly string[]): { result: T; stderr: string } {
  // The test command builds before it tests; run `pnpm build` first when running a test file alone.
  expect(existsSync(cli), `${cli} (run pnpm build first)`).toBe(true);
  const r = spawnSync(process.execPath, ['--expose-gc', cli, '--suite', suite, ...args, '--json'], {
    encoding: 'utf8',
    timeout: 170_000,
    env: { ...process.env, CI: '1', EMBEDSTACK_BACKEND: '' },
  });
  expect(r.status, r.stderr).toBe(0);
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('{'));
  expect(lines).toHaveLength(1);
  return { result: JSON.parse(lines[0]!) as T, stderr: r.stderr };
}
