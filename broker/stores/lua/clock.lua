-- clock.lua: time helpers shared by admit.lua, lookup.lua and settle.lua. It is not run on its
-- own: the loader (broker/stores/redis.py) prepends it, after a line that defines GC_MARGIN_S and
-- UNKNOWN_HOLD_S from the Python constants of the same names.
--
-- KEYS: none. ARGV: none of its own.
--
-- Times are the caller's clock in seconds. The caller sends ``now`` as an exact decimal (17
-- significant digits, so tonumber() gives back the very same double) and every other instant is
-- computed here as now plus or minus an offset: the same IEEE-754 sum Python would compute, so
-- decisions match MemoryStore's bit for bit, and the broker formats one float per call instead
-- of four (the formatting was a noticeable part of its CPU per proposal).

-- A double as an exact decimal, for storing or sending on: tostring() keeps only 14 digits.
local function exact(x)
  return string.format('%.17g', x)
end

-- A PEXPIRE argument: whole milliseconds plus the clock-skew margin. TTLs only collect garbage;
-- decisions use the timestamps stored in the values.
local function expire_ms(seconds)
  return string.format('%d', math.max(1, math.ceil((seconds + GC_MARGIN_S) * 1000)))
end
