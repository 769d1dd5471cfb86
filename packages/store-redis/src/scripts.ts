/**
 * Server-side Lua scripts. Each runs atomically on the node that owns its bucket
 * (all its keys share the bucket's hash tag). ioredis sends EVALSHA and falls back
 * to EVAL when the server does not know the script (NOSCRIPT).
 *
 * Floats: values are `dim` float32 little-endian; Lua decodes them with
 * `struct.unpack('<f', ...)` into doubles, adds in double, and `struct.pack('<f', ...)`
 * rounds the sum back to float32: exactly float32 addition (a + b of two float32
 * values is exact in double before the one rounding).
 */

export interface ScriptDef {
  lua: string;
  numberOfKeys: number;
}

/**
 * TFRA bp_v2 accumulation. KEYS[1] = bucket hash. ARGV[1] = dim, then triples
 * (field, delta bytes, exists '1'|'0'), applied in order:
 * present & exists -> value += delta; absent & !exists -> value = delta; else no-op.
 * Returns the number of fields inserted.
 */
const accum = `
local dim = tonumber(ARGV[1])
local inserted = 0
for i = 2, #ARGV, 3 do
  local f = ARGV[i]
  local d = ARGV[i + 1]
  local e = ARGV[i + 2] == '1'
  local cur = redis.call('HGET', KEYS[1], f)
  if cur then
    if e then
      local out = {}
      for c = 0, dim - 1 do
        local a = struct.unpack('<f', cur, 4 * c + 1)
        local b = struct.unpack('<f', d, 4 * c + 1)
        out[c + 1] = struct.pack('<f', a + b)
      end
      redis.call('HSET', KEYS[1], f, table.concat(out))
    end
  elseif not e then
    redis.call('HSET', KEYS[1], f, d)
    inserted = inserted + 1
  end
end
return inserted
`;

/** Overwrites existing fields only. KEYS[1] = bucket hash; ARGV = (field, value) pairs. Returns how many were written. */
const assign = `
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    n = n + 1
  end
end
return n
`;

/**
 * Inserts absent fields, returns the stored value of each. KEYS[1] = bucket hash;
 * ARGV = (field, initial value) pairs. Returns a flat array: for each pair, '1' if
 * this call inserted it else '0', then the stored value.
 */
const insertMissing = `
local out = {}
for i = 1, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then
    out[#out + 1] = '1'
    out[#out + 1] = ARGV[i + 1]
  else
    out[#out + 1] = '0'
    out[#out + 1] = redis.call('HGET', KEYS[1], ARGV[i])
  end
end
return out
`;

/**
 * Score update of the fields present in the bucket. KEYS[1] = bucket hash,
 * KEYS[2] = scores hash. ARGV[1] = mode:
 * 'all' ARGV[2] = score, then fields: each gets that score;
 * 'set' then (field, score) pairs; 'incr' then (field, increment) pairs.
 */
const touch = `
local mode = ARGV[1]
if mode == 'all' then
  for i = 3, #ARGV do
    if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then redis.call('HSET', KEYS[2], ARGV[i], ARGV[2]) end
  end
else
  for i = 2, #ARGV, 2 do
    if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then
      if mode == 'set' then redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
      else redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1]) end
    end
  end
end
return 0
`;

/** Every script, by the name it is defined under on the ioredis client. */
export const SCRIPTS = {
  embedstackAccum: { lua: accum, numberOfKeys: 1 },
  embedstackAssign: { lua: assign, numberOfKeys: 1 },
  embedstackInsertMissing: { lua: insertMissing, numberOfKeys: 1 },
  embedstackTouch: { lua: touch, numberOfKeys: 2 },
} as const satisfies Record<string, ScriptDef>;

export type ScriptName = keyof typeof SCRIPTS;
