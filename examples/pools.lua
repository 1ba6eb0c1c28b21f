-- pools.lua — a config script: named pools for examples/pipeline.lua.
return {
  parse = { workers = 2, timeout = "30s", env = { PIPELINE_STAGE = "parse" } },
  score = { workers = 1, launcher = "lua", start_timeout = "5s" },
}
