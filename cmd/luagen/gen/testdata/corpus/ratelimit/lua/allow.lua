-- GCRA: allows n requests at a rate of limit per period.
-- @key bucket the rate limit key
-- @arg burst int burst size
-- @arg rate int requests per period
-- @arg period float period in seconds
-- @arg cost int cost of this request
-- @return []any
-- @flag idempotent
redis.replicate_commands()
local burst, rate, period, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local interval = period / rate
local tolerance = burst * interval
local t = redis.call("TIME")
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local tat = tonumber(redis.call("GET", KEYS[1]) or now)
if tat < now then
  tat = now
end
local new_tat = tat + cost * interval
local allow_at = new_tat - tolerance
local diff = now - allow_at
if diff < 0 then
  return {0, tostring(-diff)}
end
redis.call("SET", KEYS[1], new_tat, "EX", math.ceil(new_tat - now))
return {cost, "0"}
