import { describe, expect, it } from 'vitest';
import { crc32c } from './index.js';
import { crcBitwise } from '../../test/checkpoint/testUtil.js';

const ascii = (s: string) => new TextEncoder().encode(s);

describe('crc32c', () => {
  it('matches the published check values (RFC 3720 B.4, the "123456789" check)', () => {
    expect(crc32c(ascii('123456789'))).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa);
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43);
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe(0x46dd794e);
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => 31 - i))).toBe(0x113fdb5c);
    expect(crc32c(new Uint8Array(0))).toBe(0);
  });

  it('equals the bitwise definition for every length 0..200 and every alignment', () => {
    const buf = Uint8Array.from({ length: 260 }, (_, i) => (i * 167 + 13) & 0xff);
    for (let off = 0; off < 4; off++) {
      for (let len = 0; len <= 200; len++) {
        const view = buf.subarray(off, off + len);
        expect(crc32c(view), `offset ${off} length ${len}`).toBe(crcBitwise(view));
      }
    }
  });

  it('continues across chunks: crc32c(b, crc32c(a)) === crc32c(a ++ b)', () => {
    const data = Uint8Array.from({ length: 100_003 }, (_, i) => (i * 2654435761) >>> 24);
    const whole = crcBitwise(data);
    for (const cuts of [[1], [7, 8, 9], [4096, 50_000], [99_999]]) {
      let crc = 0;
      let start = 0;
      for (const end of [...cuts, data.length]) {
        crc = crc32c(data.subarray(start, end), crc);
        start = end;
      }
      expect(crc, `cuts ${cuts.join(',')}`).toBe(whole);
    }
  });
});
