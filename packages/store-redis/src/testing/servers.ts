import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Real Redis servers for tests: `redis-server` processes on free loopback ports
 * (127.0.0.1 only), persistence off, each in its own temp directory. `stop()` kills
 * them and removes the directories; a process-exit hook kills any left running.
 * Needs `redis-server` and `redis-cli` on PATH (Debian: `apt-get install -y redis-server`).
 */

const HOST = '127.0.0.1';
const live = new Set<ChildProcess>();
let exitHook = false;

function installExitHook(): void {
  if (exitHook) return;
  exitHook = true;
  process.on('exit', () => {
    for (const c of live) c.kill('SIGKILL');
  });
}

/** Throws a clear error when the Redis binaries are missing. */
export function checkRedisInstalled(): void {
  for (const bin of ['redis-server', 'redis-cli']) {
    const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
    if (r.error || r.status !== 0) {
      throw new Error(`${bin} was not found on PATH (${r.error?.message ?? `exit ${r.status}`}). Install Redis: apt-get install -y redis-server`);
    }
  }
}

/** True when redis-server and redis-cli can run (for skipIf with a printed reason). */
export function redisAvailable(): boolean {
  try {
    checkRedisInstalled();
    return true;
  } catch {
    return false;
  }
}

/** A free TCP port on 127.0.0.1 (bind port 0, read it, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, HOST, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function encode(args: string[]): string {
  return `*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('');
}

/** One command over a fresh socket; returns the reply as text (simple, error, integer or bulk). */
export function rawCommand(port: number, args: string[], timeoutMs = 2000): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = createConnection({ host: HOST, port });
    let data = Buffer.alloc(0);
    const finish = (err: Error | null, value?: string) => {
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(value!);
    };
    const timer = setTimeout(() => finish(new Error(`no reply from ${HOST}:${port} within ${timeoutMs} ms`)), timeoutMs);
    sock.on('error', (e) => finish(e));
    sock.on('connect', () => sock.write(encode(args)));
    sock.on('data', (chunk) => {
      data = Buffer.concat([data, chunk]);
      const eol = data.indexOf('\r\n');
      if (eol < 0) return;
      const head = data.subarray(0, eol).toString();
      const kind = head[0];
      if (kind === '+' || kind === ':') return finish(null, head.slice(1));
      if (kind === '-') return finish(new Error(head.slice(1)));
      if (kind === '$') {
        const len = Number(head.slice(1));
        if (len < 0) return finish(null, '');
        if (data.length >= eol + 2 + len + 2) finish(null, data.subarray(eol + 2, eol + 2 + len).toString());
        return;
      }
      finish(new Error(`unexpected reply ${head}`));
    });
  });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface Node {
  port: number;
  proc: ChildProcess;
  log: string;
  exited: boolean;
}

function logTail(node: Node): string {
  try {
    return readFileSync(node.log, 'utf8').split('\n').slice(-15).join('\n');
  } catch {
    return '(no log)';
  }
}

async function spawnNode(dir: string, port: number, extra: string[]): Promise<Node> {
  const log = join(dir, `redis-${port}.log`);
  const fd = openSync(log, 'a');
  const args = ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', ...extra];
  const proc = spawn('redis-server', args, { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const node: Node = { port, proc, log, exited: false };
  live.add(proc);
  installExitHook();
  proc.on('exit', () => {
    node.exited = true;
    live.delete(proc);
  });
  proc.on('error', () => {
    node.exited = true;
    live.delete(proc);
  });
  return node;
}

/**
 * Polls `test` every 50 ms until it resolves true, for at most `timeoutMs` by the clock. A test that
 * throws counts as false; a timeout names `what` and the last error. For waits in tests on servers
 * whose exit is not an error (a node killed on purpose).
 */
export function waitUntil(what: string, timeoutMs: number, test: () => Promise<boolean>): Promise<void> {
  return waitFor(what, timeoutMs, [], test);
}

/** {@link waitUntil}, and a node of `nodes` that exits ends the wait at once with its log. */
async function waitFor(what: string, timeoutMs: number, nodes: readonly Node[], test: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    const dead = nodes.find((n) => n.exited);
    if (dead) throw new Error(`redis-server on port ${dead.port} exited while waiting for ${what}:\n${logTail(dead)}`);
    try {
      if (await test()) return;
    } catch (e) {
      last = (e as Error).message;
    }
    await sleep(50);
  }
  const logs = nodes.length > 0 ? `:\n${nodes.map(logTail).join('\n')}` : '';
  throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${last})` : ''}${logs}`);
}

async function killAll(nodes: Node[], dir: string): Promise<void> {
  await Promise.all(
    nodes.map(
      (n) =>
        new Promise<void>((resolve) => {
          if (n.exited) return resolve();
          n.proc.once('exit', () => resolve());
          n.proc.kill('SIGKILL');
        }),
    ),
  );
  rmSync(dir, { recursive: true, force: true });
}

/** A running throwaway redis-server (or cluster) started by the helpers below. */
export interface RedisServerHandle {
  /** The address to connect to (127.0.0.1). */
  host: string;
  /** The port to connect to (the first node's in a cluster). */
  port: number;
  /** Every node's port (one here). */
  ports: number[];
  /** The temp directory of the server (removed by stop). */
  dir: string;
  /** Kills the server and removes its directory. Idempotent. */
  stop(): Promise<void>;
  /** SIGKILLs node i (0 here), as a crash; stop() still cleans up. */
  killNode(i?: number): void;
}

/** Options of {@link startRedisServer}. */
export interface StartRedisServerOptions {
  /** Port; default a free one. */
  port?: number;
  /** Milliseconds to wait for the server. Default 10000. */
  timeoutMs?: number;
}
/**
 * Spawns a node on the ports `choose()` gives and waits until it answers PING. A port freePort()
 * returned can be taken before redis-server binds it (by another process's outgoing connection: both
 * come from the ephemeral range; seen once in CI, on a cluster node's bus port): a node that exits
 * with "Address already in use" is started again on new ports, at most `tries` times (1: a port the
 * caller gave, which another try would not free).
 */
async function spawnAnswering(dir: string, timeoutMs: number, choose: () => Promise<{ port: number; extra: string[] }>, tries = 5): Promise<Node> {
  for (let attempt = 1; ; attempt++) {
    const { port, extra } = await choose();
    const node = await spawnNode(dir, port, extra);
    try {
      await waitFor(`redis-server on port ${port}`, timeoutMs, [node], async () => (await rawCommand(port, ['PING'])) === 'PONG');
      return node;
    } catch (e) {
      if (node.exited && attempt < tries && /Address already in use/.test(logTail(node))) continue;
      node.proc.kill('SIGKILL');
      throw e;
    }
  }
}

/** Starts one standalone redis-server on 127.0.0.1. @throws Error with the fix when redis-server is missing */
export async function startRedisServer(opts: StartRedisServerOptions = {}): Promise<RedisServerHandle> {
  checkRedisInstalled();
  const dir = mkdtempSync(join(tmpdir(), 'embedstack-redis-'));
  let node: Node;
  try {
    node = await spawnAnswering(dir, opts.timeoutMs ?? 10000, async () => ({ port: opts.port ?? (await freePort()), extra: [] }), opts.port === undefined ? 5 : 1);
  } catch (e) {
    await killAll([], dir);
    throw e;
  }
  const port = node.port;
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await killAll([node], dir);
  };
  return { host: HOST, port, ports: [port], dir, stop, killNode: () => void node.proc.kill('SIGKILL') };
}

/** A running throwaway Redis Cluster. */
export interface RedisClusterHandle extends RedisServerHandle {
  /** Seeds for a cluster client: every master. */
  hosts: {
    /** The master's address. */
    host: string;
    /** The master's port. */
    port: number;
  }[];
}

/** Options of {@link startRedisCluster}. */
export interface StartRedisClusterOptions {
  /** Number of masters. Default 3 (the minimum Redis accepts). */
  masters?: number;
  /** Replicas per master (`redis-cli --cluster create --cluster-replicas`). Default 0. */
  replicas?: number;
  /** Milliseconds to wait for `cluster_state:ok`. Default 20000. */
  timeoutMs?: number;
  /** cluster-node-timeout in ms (how fast a dead node is noticed). Default 1000. */
  nodeTimeoutMs?: number;
  /** cluster-require-full-coverage. Default false, so surviving masters keep serving their slots. */
  requireFullCoverage?: boolean;
}

/** Starts a Redis Cluster of `masters` nodes on 127.0.0.1 and waits until every node reports cluster_state:ok. */
export async function startRedisCluster(opts: StartRedisClusterOptions = {}): Promise<RedisClusterHandle> {
  checkRedisInstalled();
  const masters = opts.masters ?? 3;
  if (!Number.isInteger(masters) || masters < 3) throw new Error(`Expected masters to be an integer >= 3 but received ${masters}`);
  const replicas = opts.replicas ?? 0;
  if (!Number.isInteger(replicas) || replicas < 0 || replicas > 4) throw new Error(`Expected replicas to be an integer in [0, 4] but received ${replicas}`);
  const total = masters * (1 + replicas);
  const timeoutMs = opts.timeoutMs ?? 20000;
  const dir = mkdtempSync(join(tmpdir(), 'embedstack-redis-cluster-'));
  const nodes: Node[] = [];
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await killAll(nodes, dir);
  };
  try {
    const used = new Set<number>();
    const pick = async () => {
      for (;;) {
        const p = await freePort();
        if (!used.has(p)) {
          used.add(p);
          return p;
        }
      }
    };
    for (let i = 0; i < total; i++) {
      const choose = async () => {
        const port = await pick();
        const bus = await pick();
        return {
          port,
          extra: [
          '--cluster-enabled', 'yes',
          '--cluster-config-file', join(dir, `nodes-${port}.conf`),
          '--cluster-node-timeout', String(opts.nodeTimeoutMs ?? 1000),
          '--cluster-port', String(bus),
          '--cluster-require-full-coverage', opts.requireFullCoverage ? 'yes' : 'no',
          // replicas sync at once (Redis 7 waits 5 s for more replicas before a diskless full sync)
          '--repl-diskless-sync-delay', '0',
          ],
        };
      };
      nodes.push(await spawnAnswering(dir, timeoutMs, choose));
    }
    await new Promise<void>((resolve, reject) => {
      execFile(
        'redis-cli',
        ['--cluster', 'create', ...nodes.map((n) => `${HOST}:${n.port}`), '--cluster-replicas', String(replicas), '--cluster-yes'],
        { timeout: timeoutMs },
        (err, stdout, stderr) => (err ? reject(new Error(`redis-cli --cluster create failed: ${err.message}\n${stdout}\n${stderr}`)) : resolve()),
      );
    });
    for (const n of nodes) {
      await waitFor(`cluster_state:ok on port ${n.port}`, timeoutMs, nodes, async () => {
        const info = await rawCommand(n.port, ['CLUSTER', 'INFO']);
        return info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${total}`);
      });
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    host: HOST,
    port: nodes[0]!.port,
    ports: nodes.map((n) => n.port),
    hosts: nodes.map((n) => ({ host: HOST, port: n.port })),
    dir,
    stop,
    killNode: (i = 0) => {
      const n = nodes[i];
      if (!n) throw new Error(`Expected a node index in [0, ${nodes.length}) but received ${i}`);
      n.proc.kill('SIGKILL');
    },
  };
}
