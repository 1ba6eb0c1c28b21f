-- Hostile battery (issue 8): pool options, launchers, env, config scripts. See tests/lua/hostile.lua.
require("tests.lua.hostile").spec("hostile: options", "options", describe, it)
