// core.md's `restrict(numReserved, policy)`: the policy may name the table's own scorePolicy (its
// scores follow that one); another is INVALID_ARGUMENT, and the table is unchanged. Before stop 53 a
// second argument was ignored: restrict(2, 'lfu') on an lru table ranked by lru, silently.
import { describe, expect, it } from 'vitest';
import { createTable, referenceBackend } from '@embedstack/core';

describe('restrict(numReserved, policy)', () => {
  it("keeps the highest scores by the table's policy when the policy names it; refuses another", async () => {
    const t = createTable({ dim: 1, name: 'restrict', scorePolicy: 'lfu' }, { backend: referenceBackend });
    // lfu counts occurrences: key 1 three times, key 2 twice, key 3 once
    await t.upsert([1n, 1n, 1n, 2n, 2n, 3n], [1, 1, 1, 2, 2, 3]);
    for (const wrong of ['lru', 'frequency']) {
      await expect(t.restrict(1, wrong as 'lru')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'policy' });
      expect(() => t.restrictSync(1, wrong as 'lru')).toThrow(/Expected policy to be the table's own scorePolicy 'lfu'/);
    }
    await expect(t.restrict(1, 'nope' as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'policy' });
    expect(t.size()).toBe(3); // nothing removed by the rejected calls
    expect(await t.restrict(2, 'lfu')).toBe(1); // key 3 (count 1) goes
    expect(Array.from(t.findSync([1n, 2n, 3n]).exists)).toEqual([1, 1, 0]);
    expect(t.restrictSync(1, null)).toBe(1); // null: no policy given
    expect(Array.from(t.findSync([1n, 2n]).exists)).toEqual([1, 0]);
  });
});
