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

/**
 * Accumulation on a static table, where every row exists (an absent field holds its
 * initial value). KEYS[1] = bucket hash. ARGV[1] = dim, then triples (field, delta
 * bytes, initial value bytes), all with exists = true: value = (stored or initial) + delta.
 */
const accumStatic = `
local dim = tonumber(ARGV[1])
for i = 2, #ARGV, 3 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i]) or ARGV[i + 2]
  local d = ARGV[i + 1]
  local out = {}
  for c = 0, dim - 1 do
    out[c + 1] = struct.pack('<f', struct.unpack('<f', cur, 4 * c + 1) + struct.unpack('<f', d, 4 * c + 1))
  end
  redis.call('HSET', KEYS[1], ARGV[i], table.concat(out))
end
return 0
`;

/** Presence flags. KEYS[1] = bucket hash; ARGV = fields. Returns 1/0 per field. */
const present = `
local out = {}
for i = 1, #ARGV do out[i] = redis.call('HEXISTS', KEYS[1], ARGV[i]) end
return out
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
 * KEYS[2] = scores hash (decimal uint64 strings). ARGV[1] = mode:
 * 'all' ARGV[2] = score, then fields: each gets that score;
 * 'set' then (field, score) pairs; 'incr' then (field, increment) pairs;
 * 'elfu' ARGV[2] = epoch, then (field, occurrences) pairs: epochLfu, i.e.
 * epoch * 2^32 + (count in this epoch + occurrences, capped at 2^32 - 1), with the
 * 64-bit value split into two exact 32-bit halves (Lua numbers are doubles).
 */
const touch = `
local mode = ARGV[1]
local W = 4294967296
local function parse64(s)
  local hi, lo = 0, 0
  for i = 1, #s do
    lo = lo * 10 + (string.byte(s, i) - 48)
    local carry = math.floor(lo / W)
    lo = lo - carry * W
    hi = hi * 10 + carry
  end
  return hi, lo
end
local function fmt64(hi, lo)
  local digits = {}
  repeat
    local rhi = hi % 10
    hi = (hi - rhi) / 10
    local cur = rhi * W + lo
    local r = cur % 10
    lo = (cur - r) / 10
    digits[#digits + 1] = string.char(48 + r)
  until hi == 0 and lo == 0
  return string.reverse(table.concat(digits))
end
if mode == 'all' then
  for i = 3, #ARGV do
    if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then redis.call('HSET', KEYS[2], ARGV[i], ARGV[2]) end
  end
elseif mode == 'elfu' then
  local epoch = tonumber(ARGV[2])
  for i = 3, #ARGV, 2 do
    if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then
      local count = tonumber(ARGV[i + 1])
      local old = redis.call('HGET', KEYS[2], ARGV[i])
      if old then
        local hi, lo = parse64(old)
        if hi == epoch then count = count + lo end
      end
      if count > W - 1 then count = W - 1 end
      redis.call('HSET', KEYS[2], ARGV[i], fmt64(epoch, count))
    end
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
  /** TFRA bp_v2 accumulation of a dynamic table's bucket (KEYS: bucket hash). */
  embedstackAccum: {
    /** The Lua source. */
    lua: accum,
    /** Number of KEYS arguments. */
    numberOfKeys: 1,
  },
  /** Accumulation on a static table, absent rows read as their initial value (KEYS: bucket hash). */
  embedstackAccumStatic: {
    /** The Lua source. */
    lua: accumStatic,
    /** Number of KEYS arguments. */
    numberOfKeys: 1,
  },
  /** Overwrites existing fields only (KEYS: bucket hash). */
  embedstackAssign: {
    /** The Lua source. */
    lua: assign,
    /** Number of KEYS arguments. */
    numberOfKeys: 1,
  },
  /** Inserts absent fields with their initial value and returns every stored value (KEYS: bucket hash). */
  embedstackInsertMissing: {
    /** The Lua source. */
    lua: insertMissing,
    /** Number of KEYS arguments. */
    numberOfKeys: 1,
  },
  /** Presence flags of fields (KEYS: bucket hash). */
  embedstackPresent: {
    /** The Lua source. */
    lua: present,
    /** Number of KEYS arguments. */
    numberOfKeys: 1,
  },
  /** Score update of the fields present in a bucket (KEYS: bucket hash, scores hash). */
  embedstackTouch: {
    /** The Lua source. */
    lua: touch,
    /** Number of KEYS arguments. */
    numberOfKeys: 2,
  },
} as const satisfies Record<string, ScriptDef>;

export type ScriptName = keyof typeof SCRIPTS;
