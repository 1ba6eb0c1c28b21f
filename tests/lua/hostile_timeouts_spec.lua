-- Hostile battery (issue 8): timeouts of every waiting verb. See tests/lua/hostile.lua.
require("tests.lua.hostile").spec("hostile: timeouts", "timeouts", describe, it)
