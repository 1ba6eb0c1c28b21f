-- Hostile battery (issue 8): submit, what crosses, results, errors. See tests/lua/hostile.lua.
require("tests.lua.hostile").spec("hostile: submit", "submit", describe, it)
