-- Hostile battery (issue 8): suiro.call misuse. See tests/lua/hostile.lua.
require("tests.lua.hostile").spec("hostile: calls", "calls", describe, it)
