// Every relative link of the user-facing markdown (the READMEs, CONTRIBUTING.md, docs/*.md)
// leads somewhere: the file or folder exists and, for `#anchor`, the target has that heading
// (GitHub's anchor of it). And none of them points into the machine that wrote it (`/work/...`,
// a development folder a user does not have): the package READMEs ship in the npm tarballs.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

function markdownFiles(): string[] {
  const md = (dir: string): string[] =>
    existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.md')).map((f) => join(dir, f)) : [];
  const out = [...md(root), ...md(join(root, 'docs'))];
  for (const group of ['packages', 'apps', 'examples']) {
    for (const d of readdirSync(join(root, group), { withFileTypes: true })) if (d.isDirectory()) out.push(...md(join(root, group, d.name)));
  }
  return out;
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
export function slug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The lines of a markdown text outside code fences, with their line numbers. */
function prose(text: string): [line: number, text: string][] {
  const out: [number, string][] = [];
  let fenced = false;
  for (const [i, line] of text.split('\n').entries()) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    else if (!fenced) out.push([i + 1, line]);
  }
  return out;
}

/** The anchors of a markdown file's headings (a repeated heading gets -1, -2, ...). */
function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, line] of prose(readFileSync(file, 'utf8'))) {
    const m = /^#{1,6}\s+(.*)$/.exec(line);
    if (!m) continue;
    const s = slug(m[1]!);
    const n = seen.get(s) ?? 0;
    seen.set(s, n + 1);
    out.add(n === 0 ? s : `${s}-${n}`);
  }
  return out;
}

/** Where each relative link of a markdown file fails to lead: "line N: target (why)". */
function brokenLinks(file: string): string[] {
  const broken: string[] = [];
  for (const [n, line] of prose(readFileSync(file, 'utf8'))) {
    for (const m of line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const dest = path === '' ? file : resolve(dirname(file), path);
      if (!existsSync(dest)) {
        broken.push(`line ${n}: ${target} (no such file)`);
        continue;
      }
      if (anchor === undefined) continue;
      const md = statSync(dest).isDirectory() ? join(dest, 'README.md') : dest;
      if (!md.endsWith('.md') || !existsSync(md)) broken.push(`line ${n}: ${target} (an anchor into a file without headings)`);
      else if (!anchorsOf(md).has(anchor)) broken.push(`line ${n}: ${target} (no heading with that anchor)`);
    }
  }
  return broken;
}

describe('slug', () => {
  it("is GitHub's heading anchor", () => {
    expect(slug('API by example')).toBe('api-by-example');
    expect(slug('Quick start: a TPU-embedding table under a tfjs model')).toBe('quick-start-a-tpu-embedding-table-under-a-tfjs-model');
    expect(slug('`find` at 16M keys (Nov 28 2026, stop 28)')).toBe('find-at-16m-keys-nov-28-2026-stop-28');
  });
});

describe('markdown links', () => {
  const files = markdownFiles();

  it('finds the READMEs, CONTRIBUTING.md and docs/', () => {
    const names = files.map((f) => relative(root, f));
    for (const f of ['README.md', 'CONTRIBUTING.md', 'docs/checkpoint-format.md', 'packages/core/README.md', 'apps/bench/README.md']) expect(names).toContain(f);
  });

  for (const file of files) {
    const name = relative(root, file);
    it(`${name}: every relative link resolves, and nothing points into /work/`, () => {
      expect(brokenLinks(file)).toEqual([]);
      const local = readFileSync(file, 'utf8')
        .split('\n')
        .flatMap((l, i) => (/(^|[\s`(])\/work\//.test(l) ? [`line ${i + 1}: ${l.trim()}`] : []));
      expect(local).toEqual([]);
    });
  }
});
