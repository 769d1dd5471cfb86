import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32c, createTable, type EmbeddingBackend, ErrorCodes, loadTable, optimizers, Tensor } from '@embedstack/core';
import { afterAll, describe, expect, it } from 'vitest';
import { FeatureConfig, TableConfig } from './config.js';
import { Adam, FTRL, SGD } from './optimizers.js';
import { ReplicaStrategy } from './strategy.js';
import { expectClose, expectError, ragged, testBackends } from '../test/testUtil.js';
import { TPUEmbedding } from './tpuEmbedding.js';

const cases = await testBackends();
const root = await mkdtemp(join(tmpdir(), 'tpu-embedding-ckpt-'));
afterAll(() => rm(root, { recursive: true, force: true }));
let seq = 0;
const freshDir = () => join(root, `c${seq++}`);

const STEPS = [
  { v: [[0], [1, 2], [3], [4, 5]], u: [[1], [2, 3], [], [9]] },
  { v: [[5], [6], [7], [0, 1]], u: [[4, 5], [6], [7], [8]] },
  { v: [[0, 1, 2], [3], [3], [6]], u: [[1], [5], [9], [0]] },
];

function model(backend: EmbeddingBackend, numHosts = 1, opts: { userDim?: number; userOptimizer?: 'ftrl' | 'sgd' } = {}) {
  const video = new TableConfig({ vocabularySize: 8, dim: 4, combiner: 'sum', name: 'video' });
  const user = new TableConfig({
    vocabularySize: 10,
    dim: opts.userDim ?? 2,
    name: 'user',
    optimizer: opts.userOptimizer === 'sgd' ? new SGD({ learningRate: 0.1 }) : new FTRL({ learningRate: 0.2, l2: 0.1 }),
  });
  const emb = new TPUEmbedding({
    featureConfig: { v: new FeatureConfig({ table: video }), u: new FeatureConfig({ table: user }) },
    optimizer: new Adam({ learningRate: 0.05 }),
    strategy: new ReplicaStrategy({ numReplicas: 2, numHosts }),
    backend,
  });
  return { emb, video, user };
}

type Model = ReturnType<typeof model>["emb"];

async function step(emb: Model, s: (typeof STEPS)[number]): Promise<void> {
  await emb.enqueue({ v: ragged(s.v), u: ragged(s.u) });
  const acts = await emb.dequeue();
  const g = (t: Tensor) => new Tensor(Float32Array.from(t.data as Float32Array, (x) => x / 2 + 0.1), t.shape);
  await emb.applyGradients({ v: g(acts.v!), u: g(acts.u!) });
}

function snapshot(emb: Model): number[][] {
  return [...emb.embeddingTables.values()].map((t) => Array.from(t.data as Float32Array));
}

describe.each(cases)('save and restore on the $name backend', ({ backend, reason }) => {
  if (!backend) {
    it.skip(`skipped: ${reason}`, () => undefined);
    return;
  }

  it('resumes exactly: save after 2 steps, restore into a fresh TPUEmbedding (any numHosts), step 3 = uninterrupted run', async () => {
    const a = model(backend);
    for (const s of STEPS) await step(a.emb, s);
    const expected = snapshot(a.emb);

    const b = model(backend);
    await step(b.emb, STEPS[0]!);
    await step(b.emb, STEPS[1]!);
    const dir = freshDir();
    await b.emb.save(dir);
    const atSave = snapshot(b.emb);

    for (const hosts of [1, 3]) {
      const c = model(backend, hosts);
      await c.emb.restore(dir);
      expect(c.emb.step).toBe(2);
      expect(snapshot(c.emb)).toEqual(atSave);
      await step(c.emb, STEPS[2]!);
      snapshot(c.emb).forEach((t, i) => expectClose(t, expected[i]!, 1e-6));
    }

  });

  it('writes one core table checkpoint per table plus a manifest', async () => {
    const a = model(backend, 3);
    await step(a.emb, STEPS[0]!);
    const dir = freshDir();
    await a.emb.save(dir);
    expect((await readdir(dir)).sort()).toEqual(['tpu_embedding.json', 'user', 'video']);
    const manifest = JSON.parse(await readFile(join(dir, 'tpu_embedding.json'), 'utf8')) as { step: number; tables: { name: string; slots: string[] }[] };
    expect(manifest.step).toBe(1);
    expect(manifest.tables.map((t) => [t.name, t.slots])).toEqual([
      ['user', ['accumulators', 'linears']], // table order: first occurrence, keys sorted (u < v)
      ['video', ['momenta', 'velocities']],
    ]);
    // core's loadTable reads it into a plain static table of the full vocabulary
    const plain = createTable({ kind: 'static', dim: 4, vocabularySize: 8, name: 'video', optimizer: optimizers.adam() }, { backend });
    await loadTable(plain, join(dir, 'video'));
    const rowsBack = await plain.export();
    const values = new Float32Array(32);
    rowsBack.keys.forEach((k, j) => values.set(rowsBack.values.subarray(j * 4, (j + 1) * 4), Number(k) * 4));
    expect(Array.from(values)).toEqual(Array.from(a.emb.embeddingTables.get(a.video)!.data as Float32Array));
    plain.dispose();
  });

  it('saves into an existing empty directory, and refuses a non-empty one', async () => {
    const a = model(backend);
    a.emb.build();
    const dir = freshDir();
    await a.emb.save(dir);
    const listing = async () => (await readdir(dir, { recursive: true })).sort();
    const before = await listing();
    await expectError(() => a.emb.save(dir), ErrorCodes.ALREADY_EXISTS, 'dir');
    expect(await listing()).toEqual(before);
    const empty = freshDir();
    await (await import('node:fs/promises')).mkdir(empty);
    await a.emb.save(empty);
    expect((await readdir(empty)).length).toBe(3);
    const file = join(root, `file${seq++}`);
    await writeFile(file, 'x');
    await expectError(() => a.emb.save(file), ErrorCodes.INVALID_ARGUMENT, 'dir');
    await expectError(() => a.emb.save('' as string), ErrorCodes.INVALID_TYPE, 'dir');
  });

  it('refuses a missing, mismatched or corrupt checkpoint and changes nothing', async () => {
    const a = model(backend);
    await step(a.emb, STEPS[0]!);
    const dir = freshDir();
    await a.emb.save(dir);

    const b = model(backend);
    await step(b.emb, STEPS[1]!);
    const before = snapshot(b.emb);
    await expectError(() => b.emb.restore(freshDir()), ErrorCodes.NOT_FOUND, 'tpu_embedding.json');
    const wrongDim = model(backend, 1, { userDim: 3 });
    await expectError(() => wrongDim.emb.restore(dir), ErrorCodes.INVALID_ARGUMENT, 'dim');
    const wrongOpt = model(backend, 1, { userOptimizer: 'sgd' });
    await expectError(() => wrongOpt.emb.restore(dir), ErrorCodes.INVALID_ARGUMENT, 'optimizer');

    // corrupt the last table's values: detected before anything is loaded
    const userDir = join(dir, 'user');
    const current = (await readFile(join(userDir, 'CURRENT'), 'utf8')).trim();
    const values = join(userDir, current, 'values');
    const bytes = await readFile(values);
    bytes[3] = bytes[3]! ^ 0xff;
    await writeFile(values, bytes);
    await expectError(() => b.emb.restore(dir), ErrorCodes.CHECKPOINT_CORRUPT, 'values');
    expect(snapshot(b.emb)).toEqual(before);
    expect(b.emb.step).toBe(1);
  });

  it('tpu_embedding.json carries a CRC-32C of its content: a damaged manifest is refused, one written without it (older checkpoints) still loads', async () => {
    const a = model(backend);
    await step(a.emb, STEPS[0]!);
    await step(a.emb, STEPS[1]!);
    const dir = freshDir();
    await a.emb.save(dir);
    const path = join(dir, 'tpu_embedding.json');
    const text = await readFile(path, 'utf8');
    const m = JSON.parse(text) as Record<string, unknown>;
    // the checksum, computed here independently: CRC-32C of the JSON without the field, 2-space indent
    const { manifestCrc32c, ...rest } = m;
    expect(manifestCrc32c).toBe(crc32c(new TextEncoder().encode(JSON.stringify(rest, null, 2))));
    expect(m.step).toBe(2);

    const b = model(backend);
    await step(b.emb, STEPS[2]!);
    const before = snapshot(b.emb);
    // damage that still parses: the step counter 2 -> 7
    await writeFile(path, text.replace('"step": 2', '"step": 7'));
    await expectError(() => b.emb.restore(dir), ErrorCodes.CHECKPOINT_CORRUPT, 'manifestCrc32c');
    expect(snapshot(b.emb)).toEqual(before);
    expect(b.emb.step).toBe(1);
    // a damaged checksum field itself
    await writeFile(path, text.replace(/"manifestCrc32c": \d+/, '"manifestCrc32c": 12345'));
    await expectError(() => b.emb.restore(dir), ErrorCodes.CHECKPOINT_CORRUPT, 'manifestCrc32c');
    expect(b.emb.step).toBe(1);

    // an older checkpoint: the same manifest without the field restores
    await writeFile(path, JSON.stringify(rest, null, 2) + '\n');
    await b.emb.restore(dir);
    expect(b.emb.step).toBe(2);
    expect(snapshot(b.emb)).toEqual(snapshot(a.emb));
  });
});
