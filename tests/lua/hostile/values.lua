-- Values the battery feeds to the API, each with a label for case names.
local suiro = require "suiro"

local V = {}

local function co() return coroutine.create(function() end) end

--- durations that are valid and short: a wait on a task that never runs returns nil, "timeout"
V.short_timeouts = {
  { "0", 0 }, { "0.0", 0.0 }, { "-0.0", -0.0 }, { "0.05", 0.05 }, { '"50ms"', "50ms" }, { '"0.05"', "0.05" },
  { '".05s"', ".05s" }, { '"50000us"', "50000us" }, { '"  50ms  "', "  50ms  " }, { '"0s"', "0s" },
  { '"50000000ns"', "50000000ns" }, { '"50µs"', "50µs" },
}
--- the same, a few (for waits that each cost a deadline while maps ignore timeouts)
V.few_short_timeouts = { { "0.05", 0.05 }, { '"50ms"', "50ms" }, { '"0"', "0" } }

--- durations that are valid and long (or forever): a wait on a finished task returns its values
V.long_timeouts = {
  { "math.huge", math.huge }, { '"inf"', "inf" }, { '"forever"', "forever" }, { "1e12", 1e12 },
  { "1e300", 1e300 }, { "math.maxinteger", math.maxinteger }, { '"1h"', "1h" }, { '"2d"', "2d" },
  { "30", 30 }, { '"1m30s"', "1m30s" }, { "2^53", 2 ^ 53 },
}

--- not durations: refused with an error naming the timeout (docs/config-strings.md: negative
--- durations do not exist; issue 8 item 14: NaN and -inf are refused)
V.bad_timeouts = {
  { "NaN", 0 / 0 }, { "-inf", -math.huge }, { "-1", -1 }, { "-0.001", -0.001 },
  { "math.mininteger", math.mininteger }, { "-math.maxinteger", -math.maxinteger },
  { '"garbage"', "garbage" }, { '""', "" }, { '"   "', "   " }, { '"1m30"', "1m30" }, { '"-1s"', "-1s" },
  { '"1 s"', "1 s" }, { '"10S"', "10S" }, { '"1e3"', "1e3" }, { '"nan"', "nan" }, { '"-inf"', "-inf" },
  { '"0x10"', "0x10" }, { '"1,5s"', "1,5s" }, { '"1s\\0"', "1s\0" }, { '"∞"', "∞" }, { '"inf ms"', "inf ms" },
  { "true", true }, { "false", false }, { "{}", {} }, { "{1}", { 1 } }, { "a function", print },
  { "a coroutine", co() }, { "io.stdout", io.stdout }, { "suiro.NA", suiro.NA }, { "suiro.f64{1}", suiro.f64 { 1 } },
  { "suiro.range(1, 2)", suiro.range(1, 2) },
}
--- a few of them (for verbs where each costs a child)
V.few_bad_timeouts = {
  { "NaN", 0 / 0 }, { "-inf", -math.huge }, { "-1", -1 }, { '"garbage"', "garbage" }, { '"1m30"', "1m30" },
  { "{}", {} }, { "true", true }, { "io.stdout", io.stdout },
}

--- the seconds a valid duration stands for (for timing checks)
function V.seconds(t)
  if type(t) == "number" then return t end
  return require("suiro.parse").duration(t)
end

--- values that are not integers, or not in any sane range of counts
V.bad_counts = {
  { "-1", -1 }, { "1.5", 1.5 }, { "NaN", 0 / 0 }, { "math.huge", math.huge }, { "-math.huge", -math.huge },
  { "2^31", 2 ^ 31 }, { "2^31 (integer)", 1 << 31 }, { "2^53", 2 ^ 53 }, { "2^63", 2 ^ 63 },
  { "math.maxinteger", math.maxinteger }, { "math.mininteger", math.mininteger }, { '"2"', "2" },
  { '"x"', "x" }, { "true", true }, { "{}", {} }, { "a function", print },
}

--- values that cannot cross to another process, with a word their error must contain
V.unsendable = {
  { "io.stdout", function() return io.stdout end, "userdata" },
  { "a coroutine", co, "coroutine" },
  { "a pool", function(E) return E.P end, "cannot be sent" },
  { "a task", function(E) return E.P:submit(E.F.one) end, "cannot be sent" },
  { "a range iterator (userdata of lpeg)", function() return require("lpeg").P(1) end, "cannot be sent" },
}

return V
