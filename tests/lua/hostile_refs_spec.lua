-- Hostile battery (issue 8 item 4): forged region references. See tests/lua/hostile.lua.
require("tests.lua.hostile").spec("hostile: refs", "refs", describe, it)
