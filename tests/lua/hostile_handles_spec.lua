-- Hostile battery (issue 8): handles after stop, misuse, kills, deaths. See tests/lua/hostile.lua.
require("tests.lua.hostile").spec("hostile: handles", "handles", describe, it)
