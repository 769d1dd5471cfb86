import { describe, expect, it } from 'vitest';
import { escapeXml, lineChart, niceTicks } from './svg.js';

/** A minimal XML well-formedness check: balanced tags, quoted attributes, no raw '<' or '&' in text. */
function checkXml(doc: string): string[] {
  const stack: string[] = [];
  const re = /<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>|([^<]+)/gy;
  let m: RegExpExecArray | null;
  let pos = 0;
  const elements: string[] = [];
  while ((m = re.exec(doc)) !== null) {
    pos = re.lastIndex;
    if (m[5] !== undefined) {
      if (/&(?!(amp|lt|gt|quot|apos);)/.test(m[5])) throw new Error(`raw & in text: ${m[5]}`);
      continue;
    }
    const [, close, name, , self] = m;
    if (close) {
      if (stack.pop() !== name) throw new Error(`unbalanced </${name}>`);
    } else {
      elements.push(name!);
      if (!self) stack.push(name!);
    }
  }
  if (pos !== doc.length) throw new Error(`not XML at ${pos}: ${doc.slice(pos, pos + 40)}`);
  if (stack.length) throw new Error(`unclosed ${stack.join(',')}`);
  return elements;
}

describe('lineChart', () => {
  const spec = {
    title: 'find <throughput> & size',
    xLabel: 'keys',
    yLabel: 'M keys/s',
    xLog: true,
    series: [
      { name: 'findSync', points: [[1 << 20, 30], [1 << 22, 25], [1 << 24, 20]] as [number, number][] },
      { name: 'upsert "growth"', points: [[1 << 20, 10], [1 << 22, NaN], [1 << 24, 8]] as [number, number][] },
    ],
  };

  it('writes well-formed SVG with one polyline per series and escaped text', () => {
    const doc = lineChart(spec);
    const els = checkXml(doc.trim());
    expect(els[0]).toBe('svg');
    expect(els.filter((e) => e === 'polyline')).toHaveLength(2);
    expect(doc).toContain('find &lt;throughput&gt; &amp; size');
    expect(doc).toContain('upsert &quot;growth&quot;');
  });

  it('skips non-finite points and maps x on a log2 axis evenly', () => {
    const doc = lineChart(spec);
    const lines = [...doc.matchAll(/<polyline[^>]*points="([^"]*)"/g)].map((m) => m[1]!.split(' ').map((p) => p.split(',').map(Number)));
    expect(lines[0]).toHaveLength(3);
    expect(lines[1]).toHaveLength(2);
    const [a, b, c] = lines[0]!.map((p) => p[0]!);
    expect(b! - a!).toBeCloseTo(c! - b!, 5); // 2^20, 2^22, 2^24 are evenly spaced
    // y grows downward: the larger value sits higher (smaller y).
    expect(lines[0]![0]![1]!).toBeLessThan(lines[0]![2]![1]!);
  });

  it('still writes a valid chart with no data', () => {
    const doc = lineChart({ title: 'empty', xLabel: 'x', yLabel: 'y', series: [{ name: 's', points: [] }] });
    expect(checkXml(doc.trim())).not.toContain('polyline');
  });
});

describe('helpers', () => {
  it('escapeXml escapes the five XML specials', () => {
    expect(escapeXml(`<a href="x">&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&amp;&apos;&lt;/a&gt;');
  });
  it('niceTicks covers the maximum with 1-2-5 steps', () => {
    expect(niceTicks(23)).toEqual([0, 5, 10, 15, 20, 25]);
    expect(niceTicks(1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(0)).toEqual([0, 1]);
  });
});
