// A KServe v2 / Triton inference protocol server for HPS lookups (fastify).
// The request format follows Triton's HPS backend: input "KEYS" (INT64, every table's keys one after the
// other) and "NUMKEYS" (INT32, keys per table); output "OUTPUT0" (FP32, the rows in the same order).
import Fastify from 'fastify';

/** Defaults of buildServer: loopback only, bounded bodies and key counts, slow clients timed out. */
export const DEFAULTS = { host: '127.0.0.1', bodyLimit: 1 << 20, maxKeys: 65536, requestTimeoutMs: 10000, connectionTimeoutMs: 10000 };

class ProtocolError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function findInput(inputs, name) {
  return inputs.find((i) => i && typeof i === 'object' && i.name === name);
}

function int64Keys(input, maxKeys) {
  if (!input) throw new ProtocolError(400, 'missing input "KEYS" (INT64)');
  if (input.datatype !== 'INT64' && input.datatype !== 'INT32') throw new ProtocolError(400, `input "KEYS" must be INT64 but is ${JSON.stringify(input.datatype)}`);
  const data = input.data;
  if (!Array.isArray(data)) throw new ProtocolError(400, 'input "KEYS" must carry "data" as a JSON array');
  if (data.length > maxKeys) throw new ProtocolError(400, `input "KEYS" holds ${data.length} keys, more than this server's limit of ${maxKeys}`);
  const keys = new BigInt64Array(data.length);
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (typeof v === 'number' && Number.isSafeInteger(v)) keys[i] = BigInt(v);
    else if (typeof v === 'string' && /^-?\d{1,20}$/.test(v)) {
      // a string key outside int64 is refused, not wrapped onto another key
      const k = BigInt(v);
      if (BigInt.asIntN(64, k) !== k) throw new ProtocolError(400, `input "KEYS" element ${i} is outside the INT64 range: ${v}`);
      keys[i] = k;
    } else throw new ProtocolError(400, `input "KEYS" element ${i} is not an integer key: ${JSON.stringify(v)?.slice(0, 40)}`);
  }
  return keys;
}

/**
 * A fastify app serving `server` (an @embedstack/hps HPS) over the KServe v2 protocol.
 * Errors answer `{ error }` with 400 / 404 / 413 / 500, never a crash.
 */
export function buildServer(server, options = {}) {
  const o = { ...DEFAULTS, ...options };
  const app = Fastify({ bodyLimit: o.bodyLimit, requestTimeout: o.requestTimeoutMs, connectionTimeout: o.connectionTimeoutMs, logger: false });
  app.setErrorHandler((err, _req, reply) => {
    const status = err instanceof ProtocolError ? err.status : err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : err.code === 'NOT_FOUND' ? 404 : err.code && err.code !== 'INTERNAL' && err.code !== 'STORE_UNAVAILABLE' && err.code !== 'IO_ERROR' ? 400 : 500;
    reply.code(status).send({ error: err.message });
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send({ error: `no route ${req.method} ${req.url}` }));
  app.get('/v2/health/ready', async () => ({ ready: !server.closed }));
  app.get('/v2/health/live', async () => ({ live: true }));
  app.get('/v2', async () => ({ name: 'embedstack-hps', version: '0.1.0', extensions: [] }));
  app.get('/v2/models/:model', async (req) => {
    const info = server.modelInfo(req.params.model);
    return {
      name: info.model,
      versions: [String(info.version)],
      platform: 'hps',
      inputs: [
        { name: 'KEYS', datatype: 'INT64', shape: [-1] },
        { name: 'NUMKEYS', datatype: 'INT32', shape: [info.tables.length] },
      ],
      outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [-1] }],
      tables: info.tables,
    };
  });
  app.get('/v2/models/:model/ready', async (req) => ({ name: server.modelInfo(req.params.model).model, ready: true }));
  app.post('/v2/models/:model/infer', async (req) => {
    const model = req.params.model;
    const info = server.modelInfo(model);
    const body = req.body;
    if (!body || typeof body !== 'object' || !Array.isArray(body.inputs)) throw new ProtocolError(400, 'the request body must be a JSON object with an "inputs" array');
    const keys = int64Keys(findInput(body.inputs, 'KEYS'), o.maxKeys);
    const nk = findInput(body.inputs, 'NUMKEYS');
    let counts = [keys.length];
    if (nk) {
      if (!Array.isArray(nk.data) || nk.data.some((c) => !Number.isSafeInteger(c) || c < 0)) throw new ProtocolError(400, 'input "NUMKEYS" must be non-negative integers');
      if (nk.data.length > info.tables.length) throw new ProtocolError(400, `input "NUMKEYS" has ${nk.data.length} entries but model ${model} has ${info.tables.length} tables`);
      counts = nk.data;
      if (counts.reduce((a, c) => a + c, 0) !== keys.length) throw new ProtocolError(400, `input "NUMKEYS" sums to ${counts.reduce((a, c) => a + c, 0)} but "KEYS" holds ${keys.length} keys`);
    }
    const parts = [];
    let at = 0;
    for (let t = 0; t < counts.length; t++) {
      parts.push(server.lookup(keys.subarray(at, at + counts[t]), model, t));
      at += counts[t];
    }
    const rows = await Promise.all(parts);
    const out = [];
    let total = 0;
    for (const r of rows) {
      total += r.data.length;
      for (let i = 0; i < r.data.length; i++) out.push(r.data[i]);
    }
    return { model_name: model, model_version: String(info.version), id: body.id, outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [total], data: out }] };
  });
  return app;
}
