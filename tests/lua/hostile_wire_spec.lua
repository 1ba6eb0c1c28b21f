-- Hostile battery (issue 8): suiro.wire.decode of hostile bytes, encode misuse. See tests/lua/hostile.lua.
require("tests.lua.hostile").spec("hostile: wire", "wire", describe, it)
