-- Hostile battery (issue 17): huge counts in every constructor. See tests/lua/hostile.lua.
require("tests.lua.hostile").spec("hostile: counts", "counts", describe, it)
