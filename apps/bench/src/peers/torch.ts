/**
 * PyTorch peers, run in a child process (childPeer.ts) with `/usr/bin/python3` (Debian's
 * python3-torch; EMBEDSTACK_PYTHON overrides the interpreter): `nn.EmbeddingBag` over the
 * rows the bench's tables hold (tables.ts fillTable's pattern, recomputed in Python: the
 * same float32 values) and the same ids (handed over in a temporary file), at the same thread count.
 * When the interpreter or torch is missing, `startTorchBag` resolves to the reason and the
 * bench goes on without this peer.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StorageDtype } from '@embedstack/core';
import { ChildPeer } from '../childPeer.js';
import { FILL_BATCH } from '../tables.js';

/** The interpreter the PyTorch peers run on. */
export function torchPython(env: NodeJS.ProcessEnv = process.env): string {
  return env.EMBEDSTACK_PYTHON || '/usr/bin/python3';
}

// The weights of the PyTorch peers: row r holds valuePattern's row r mod fill (as tables.ts
// fillTable writes a table's rows), computed in float32 and converted to dtype (float32, float16
// or bfloat16); every page written. Python, defined at the top of the scripts that use it.
const PATTERN_WEIGHT = `
def pattern_weight(rows, dim, fill, dtype):
    j = torch.arange(min(rows, fill) * dim, dtype=torch.int64)
    pattern = ((((j * 7919) % 1000).double() / 1000) - 0.4995).float().view(-1, dim).to(dtype)
    weight = torch.empty((rows, dim), dtype=dtype)
    for s in range(0, rows, fill):
        weight[s:s + fill] = pattern[:min(fill, rows - s)]
    return weight
`;

// argv: rows dim threads mode ids-file ids-per-bag fill-batch dtype (the weights: PATTERN_WEIGHT).
// Prints `checksum <sum of one call's output>`, then `ready`; each `call i` runs the bag once
// under no_grad and answers its seconds.
const BAG_SCRIPT = `
import sys, time
import numpy as np
import torch
${PATTERN_WEIGHT}
rows, dim, threads, mode, path, per, fill = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6]), int(sys.argv[7])
torch.set_num_threads(threads)
print('version', torch.__version__, flush=True)
weight = pattern_weight(rows, dim, fill, getattr(torch, sys.argv[8]))
bag = torch.nn.EmbeddingBag.from_pretrained(weight, freeze=True, mode=mode)
ids = torch.from_numpy(np.fromfile(path, dtype=np.uint32).astype(np.int64))
offsets = torch.arange(0, ids.numel(), per, dtype=torch.int64)
with torch.no_grad():
    out = bag(ids, offsets)
    print('checksum', float(out.double().sum()), flush=True)
    for _ in range(3):
        bag(ids, offsets)
print('ready', flush=True)
for line in sys.stdin:
    t0 = time.perf_counter()
    with torch.no_grad():
        bag(ids, offsets)
    print(time.perf_counter() - t0, flush=True)
`;

// argv: rows dim threads ids-file batch lr. A sparse Adagrad step of torch.optim.Adagrad on a
// [rows, dim] parameter, its gradient a sparse COO tensor of `batch` ids (batch i mod the
// file's batches, duplicates included: Adagrad coalesces them) and valuePattern's rows.
const ADAGRAD_SCRIPT = `
import sys, time
import numpy as np
import torch
rows, dim, threads, path, batch, lr = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
torch.set_num_threads(threads)
print('version', torch.__version__, flush=True)
weight = torch.nn.Parameter(torch.full((rows, dim), 0.01))
opt = torch.optim.Adagrad([weight], lr=lr)
ids = torch.from_numpy(np.fromfile(path, dtype=np.uint32).astype(np.int64))
pool = ids.numel() // batch
j = torch.arange(batch * dim, dtype=torch.int64)
grads = ((((j * 7919) % 1000).double() / 1000) - 0.4995).float().view(batch, dim)
def step(i):
    b = i % pool
    ix = ids[b * batch:(b + 1) * batch].view(1, batch)
    weight.grad = torch.sparse_coo_tensor(ix, grads, (rows, dim))
    opt.step()
for i in range(3):
    step(i)
print('ready', flush=True)
for line in sys.stdin:
    i = int(line.split()[1])
    t0 = time.perf_counter()
    step(i)
    print(time.perf_counter() - t0, flush=True)
`;

// argv: rows dim threads ids-file batch dtype fill-batch. torch.index_select of `batch` row ids (call
// i: batch i mod the file's batches) from a [rows, dim] tensor of dtype (the weights:
// PATTERN_WEIGHT), output allocated per call as find's is. Prints `checksum <sum of call 0's
// output>`, then `ready`.
const INDEX_SELECT_SCRIPT = `
import sys, time
import numpy as np
import torch
${PATTERN_WEIGHT}
rows, dim, threads, path, batch, fill = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[7])
torch.set_num_threads(threads)
print('version', torch.__version__, flush=True)
weight = pattern_weight(rows, dim, fill, getattr(torch, sys.argv[6]))
ids = torch.from_numpy(np.fromfile(path, dtype=np.uint32).astype(np.int64))
pool = ids.numel() // batch
batches = [ids[b * batch:(b + 1) * batch] for b in range(pool)]
print('checksum', float(torch.index_select(weight, 0, batches[0]).double().sum()), flush=True)
for i in range(3):
    torch.index_select(weight, 0, batches[i % pool])
print('ready', flush=True)
for line in sys.stdin:
    i = int(line.split()[1])
    t0 = time.perf_counter()
    torch.index_select(weight, 0, batches[i % pool])
    print(time.perf_counter() - t0, flush=True)
`;

export interface TorchPeer {
  peer: ChildPeer;
  /** torch.__version__ */
  version: string;
  /** Lines the child printed during setup (before `ready`). */
  setup: readonly string[];
  close(): void;
  /** Closes the child and resolves when its process has exited (ChildPeer.stop). */
  stop(): Promise<void>;
}

/** How long the bench waits after each PyTorch call before the next job (ChildPeerOptions.quietMs). */
export const TORCH_QUIET_MS = 25;

/**
 * Why a PyTorch child did not get to `ready`, from the lines it printed and the start error: torch
 * missing (with how to install it), or torch present (it printed its version) but unable to run
 * this peer (e.g. torch 1.13 has no CPU bfloat16 EmbeddingBag), which no install fixes.
 */
export function torchFailure(lines: readonly string[], startError: string, python = torchPython()): string {
  const last = lines.filter((l) => /Error|error/.test(l)).pop()?.trim() ?? startError.split('\n')[0];
  const version = lines.map((l) => /^version (\S+)/.exec(l)).find((m) => m)?.[1];
  if (version !== undefined) return `PyTorch ${version} cannot run this peer (${python}: ${last})`;
  return `PyTorch unavailable (${python}: ${last}); install it with: apt-get install -y python3-torch`;
}

/** Starts `script` on torchPython() with `ids` in a temporary file (its path replaces the arg 'IDS'). */
async function startTorch(script: string, args: readonly string[], ids: Uint32Array, threads: number): Promise<TorchPeer | string> {
  const lines: string[] = [];
  let dir: string | undefined;
  try {
    // inside the try: a start never rejects (suites start these before awaiting them), it resolves to why it failed
    dir = mkdtempSync(join(tmpdir(), 'embedstack-torch-'));
    const file = join(dir, 'ids.u32');
    writeFileSync(file, new Uint8Array(ids.buffer, ids.byteOffset, ids.byteLength));
    const peer = await ChildPeer.start(torchPython(), ['-c', script, ...args.map((a) => (a === 'IDS' ? file : a))], {
      log: (l) => lines.push(l),
      env: { OMP_NUM_THREADS: String(threads) },
      // its OpenMP workers spin 5-12 ms after a call (measured on the bench VM): let them settle
      // before our job's sample starts, which they would otherwise slow
      quietMs: TORCH_QUIET_MS,
    });
    const version = lines.map((l) => /^version (\S+)/.exec(l)).find((m) => m)?.[1] ?? '?';
    return { peer, version, setup: lines, close: () => peer.close(), stop: () => peer.stop() };
  } catch (e) {
    return torchFailure(lines, (e as Error).message);
  } finally {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Closes every peer of `starts` once started (a start that failed resolved to a string): a suite's
 * `finally` for peers it started before its setup, so none outlives a suite that threw before using
 * it. Closing a closed peer again does nothing.
 */
export function closeStarted(starts: readonly Promise<TorchPeer | string>[]): void {
  for (const s of starts) void s.then((t) => typeof t !== 'string' && t.close());
}

/**
 * Starts a PyTorch sparse Adagrad peer: `torch.optim.Adagrad(lr).step()` on a [rows, dim]
 * parameter whose gradient is a sparse tensor of `batch` ids (call i: batch i mod the
 * batches of `ids`) and valuePattern(batch, dim). Resolves to the peer or why it is unavailable.
 */
export function startTorchAdagrad(o: { rows: number; dim: number; threads: number; ids: Uint32Array; batch: number; learningRate: number }): Promise<TorchPeer | string> {
  return startTorch(ADAGRAD_SCRIPT, [String(o.rows), String(o.dim), String(o.threads), 'IDS', String(o.batch), String(o.learningRate)], o.ids, o.threads);
}

/**
 * Starts a PyTorch `index_select` peer: rows of a [rows, dim] tensor (row r holds valuePattern's
 * row r mod FILL_BATCH, as a table filled with tables.ts fillTable holds its r-th key) gathered
 * by `batch` ids (call i: batch i mod the batches of `ids`). Resolves to the peer, with the sum
 * of call 0's output (the rows of ids[0..batch)), or why it is unavailable.
 */
export async function startTorchIndexSelect(o: { rows: number; dim: number; threads: number; ids: Uint32Array; batch: number; dtype?: StorageDtype }): Promise<TorchChecked | string> {
  const t = await startTorch(INDEX_SELECT_SCRIPT, [String(o.rows), String(o.dim), String(o.threads), 'IDS', String(o.batch), o.dtype ?? 'float32', String(FILL_BATCH)], o.ids, o.threads);
  return typeof t === 'string' ? t : { ...t, checksum: checksumOf(t.setup) };
}

/** A PyTorch peer that printed the sum of one call's output. */
export interface TorchChecked extends TorchPeer {
  /** Sum of one call's output (float64; NaN when the child printed none), to check PyTorch computes what we do. */
  checksum: number;
}

/** The `checksum <sum>` a child printed during setup (NaN when none). */
function checksumOf(setup: readonly string[]): number {
  const sum = setup.map((l) => /^checksum (\S+)/.exec(l)).find((m) => m)?.[1];
  return sum === undefined ? NaN : Number(sum);
}

/**
 * Starts a PyTorch EmbeddingBag peer over `rows` x `dim` (valuePattern), bags of `perBag`
 * consecutive ids of `ids`, `mode` 'sum' or 'mean', on `threads` threads.
 * Resolves to the peer, or to a string saying why PyTorch is unavailable.
 */
export async function startTorchBag(o: {
  rows: number;
  dim: number;
  threads: number;
  mode: 'sum' | 'mean';
  ids: Uint32Array;
  perBag: number;
  dtype?: StorageDtype;
}): Promise<TorchChecked | string> {
  const args = [String(o.rows), String(o.dim), String(o.threads), o.mode, 'IDS', String(o.perBag), String(FILL_BATCH), o.dtype ?? 'float32'];
  const t = await startTorch(BAG_SCRIPT, args, o.ids, o.threads);
  return typeof t === 'string' ? t : { ...t, checksum: checksumOf(t.setup) };
}
