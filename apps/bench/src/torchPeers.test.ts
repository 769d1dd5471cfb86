// The PyTorch peers' tensors hold the bench tables' rows, so their outputs can be checked against ours.
import { type EmbeddingBackend, referenceBackend, type StorageDtype } from '@embedstack/core';
import { cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';
import { startTorchIndexSelect } from './peers/torch.js';
import { FILL_BATCH, dynamicTable } from './tables.js';

describe('PyTorch index_select peer', () => {
  // more rows than one fill batch, so that rows past it (row r holds the pattern's row r mod FILL_BATCH) are read too
  const rows = FILL_BATCH + 4464;
  const dim = 8;
  const batch = 50;
  // 3 batches; the first (call 0, the checksum's) has ids on both sides of FILL_BATCH
  const ids = Uint32Array.from({ length: 3 * batch }, (_, j) => (j % 5 === 0 ? FILL_BATCH + ((j * 977) % 4464) : (j * 2654435761) % rows));
  const keys = BigInt64Array.from({ length: rows }, (_, i) => BigInt(i) * 7919n - 3n);
  const picked = BigInt64Array.from(ids.subarray(0, batch), (i) => keys[i]!);
  const backends: [string, EmbeddingBackend][] = [
    ['reference', referenceBackend],
    ['cpu', cpuBackend],
  ];
  for (const dtype of ['float32', 'bfloat16', 'float16'] as StorageDtype[]) {
    it(`prints the sum of its first call's output, equal to our find of the same keys in a ${dtype} table filled as the bench fills it (no checksum before stop 37)`, async (ctx) => {
      const t = await startTorchIndexSelect({ rows, dim, threads: 1, ids, batch, dtype });
      if (typeof t === 'string') {
        ctx.skip(t);
        return;
      }
      try {
        expect(Number.isFinite(t.checksum)).toBe(true);
        for (const [name, backend] of backends) {
          const table = dynamicTable(backend, dim, keys, { storageDtype: dtype });
          try {
            const found = table.findSync(picked);
            expect(found.exists.every((e) => e === 1)).toBe(true);
            const ours = found.values.reduce((a, x) => a + x, 0);
            // one stored value per element on both sides: the float64 sums are equal
            expect(t.checksum, `${name} backend`).toBe(ours);
          } finally {
            table.dispose();
          }
        }
      } finally {
        t.close();
      }
    });
  }
});
