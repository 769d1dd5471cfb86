// Every TypeScript code block of the READMEs runs as written: each ```ts block is compiled
// (esbuild strips the types) and run with node from this folder, whose dependencies are
// every embedstack package (the BUILT packages, as a user who installed them has them).
// A block that cannot run here says why in a marker on the line before it:
//   <!-- readme-test: skip: needs a GPU -->
// and the test prints that reason.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const runDir = join(here, '.run');

function readmes(): string[] {
  const out = [join(root, 'README.md')];
  for (const dir of ['packages', 'apps', 'examples']) {
    for (const d of readdirSync(join(root, dir), { withFileTypes: true })) {
      const f = join(root, dir, d.name, 'README.md');
      if (d.isDirectory() && existsSync(f)) out.push(f);
    }
  }
  return out;
}

interface Block {
  line: number;
  code: string;
  skip: string | null;
}

/** The ```ts blocks of a markdown text, with the skip reason of the marker line before each. */
export function tsBlocks(text: string): Block[] {
  const lines = text.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```ts') continue;
    const end = lines.findIndex((l, j) => j > i && l.trim() === '```');
    if (end < 0) break;
    const marker = /<!--\s*readme-test:\s*skip:\s*(.*?)\s*-->/.exec(lines[i - 1] ?? '');
    blocks.push({ line: i + 1, code: lines.slice(i + 1, end).join('\n'), skip: marker ? marker[1]! : null });
    i = end;
  }
  return blocks;
}

mkdirSync(runDir, { recursive: true });
afterAll(() => rmSync(runDir, { recursive: true, force: true }));

describe('tsBlocks', () => {
  it('finds ts blocks and their skip markers, nothing else', () => {
    const md = ['# t', '```sh', 'echo', '```', '<!-- readme-test: skip: needs a GPU -->', '```ts', 'a()', '```', '```ts', 'b()', 'c()', '```'].join('\n');
    expect(tsBlocks(md)).toEqual([
      { line: 6, code: 'a()', skip: 'needs a GPU' },
      { line: 9, code: 'b()\nc()', skip: null },
    ]);
  });
});

for (const file of readmes()) {
  const blocks = tsBlocks(readFileSync(file, 'utf8'));
  if (blocks.length === 0) continue;
  const name = relative(root, file);
  describe(name, () => {
    for (const [i, b] of blocks.entries()) {
      it(`block ${i + 1} (line ${b.line}) runs as written`, (ctx) => {
        if (b.skip !== null) {
          console.log(`[readme] ${name} line ${b.line}: skipped: ${b.skip}`);
          ctx.skip();
          return;
        }
        const js = transformSync(b.code, { loader: 'ts', format: 'esm', target: 'node20' }).code;
        const script = join(runDir, `${name.replace(/[^a-z0-9]+/gi, '-')}-${i + 1}.mjs`);
        writeFileSync(script, js);
        const env = { ...process.env };
        delete env.EMBEDSTACK_BACKEND;
        const r = spawnSync(process.execPath, [script], { cwd: runDir, encoding: 'utf8', timeout: 60_000, env });
        if (r.status !== 0) console.log(`[readme] ${name} line ${b.line} failed:\n${r.stdout}\n${r.stderr}`);
        expect(r.status, `${name} line ${b.line}: ${r.stderr.split('\n').find((l) => /Error/.test(l)) ?? r.error?.message ?? ''}`).toBe(0);
      });
    }
  });
}
