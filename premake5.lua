-- suiro build description.
-- Runs under premake5 (gmake2) and under Debian's premake4 4.3 (`premake4 --file=premake5.lua gmake`).
-- premake4 embeds Lua 5.1 and lacks workspace/filter; premake5 dropped `configuration`.
-- The shim below lets one file speak to both.

if not workspace then                       -- premake4
  workspace = solution
end
if not configuration then                   -- premake5 without the deprecated call
  configuration = function(t)
    if type(t) == "string" then t = { t } end
    filter("configurations:" .. table.concat(t, " or "))
  end
end

local root = os.getcwd()

-- Each configuration writes to its own tree; release is the default and lives at build/bin, build/lib.
local configs = {
  release = { dir = "build",       opts = { "-O2", "-g", "-DNDEBUG", "-falign-functions=64", "-falign-loops=64" } },
  debug   = { dir = "build/debug", opts = { "-O0", "-g3" } },
  asan    = { dir = "build/asan",  opts = { "-O1", "-g", "-fsanitize=address,undefined",
                                           "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined" },
              link = { "-fsanitize=address,undefined" } },
  tsan    = { dir = "build/tsan",  opts = { "-O1", "-g", "-fsanitize=thread", "-DSUIRO_TSAN=1" },
              link = { "-fsanitize=thread" } },
}
local order = { "release", "debug", "asan", "tsan" }

-- premake4 strips binaries unless told to keep symbols (premake5 spells it `symbols "On"`);
-- every configuration keeps them so crashes and profiles have names.
local function keep_symbols()
  if symbols then symbols "On" else flags { "Symbols" } end
end

local function per_config(kind_dir)
  for _, name in ipairs(order) do
    local c = configs[name]
    configuration(name)
      keep_symbols()
      targetdir(root .. "/" .. c.dir .. "/" .. kind_dir)
      objdir(root .. "/" .. c.dir .. "/obj")
      buildoptions(c.opts)
      if c.link then linkoptions(c.link) end
  end
  configuration({})
end

local common_c = { "-std=gnu11", "-fPIC", "-D_POSIX_C_SOURCE=200809L", "-D_GNU_SOURCE",
                   "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror=implicit-function-declaration", "-pthread" }

workspace "suiro"
  configurations(order)
  location(root .. "/build/make")
  language "C"

-- The engine is compiled with hidden visibility: only what engine/include declares (inside its
-- `#pragma GCC visibility push(default)`) is default-visible, so no internal function leaves a
-- shared object or executable that links the engine.
local engine_c = { "-fvisibility=hidden" }

-- libsuiro: the engine (static, position independent so it can go into Lua/Python/R modules).
-- In an archive, hidden symbols are still global (nm -g lists them, and an embedder's own
-- `pool_attach` would clash with the engine's), so the archive everything links and
-- scripts/install ships holds one object: the engine's objects linked together (ld -r) with
-- their hidden symbols made local (objcopy --localize-hidden); only suiro_* stay global.
-- The objects as compiled stay in libsuiro_internal.a, for the C tests that reach into the
-- engine's private headers. The postbuild step moves what ar wrote aside and writes the public
-- archive in its place; on a rebuild ar adds every object to that public archive again (all of
-- them: premake's rule), so taking out its one member restores the internal archive exactly.
project "suiro"
  kind "StaticLib"
  files { root .. "/engine/src/*.c" }
  includedirs { root .. "/engine/include", root .. "/engine/src" }
  buildoptions(common_c)
  buildoptions(engine_c)
  per_config("lib")
  for _, name in ipairs(order) do
    local lib = root .. "/" .. configs[name].dir .. "/lib"
    configuration(name)
      postbuildcommands {
        "ar d " .. lib .. "/libsuiro.a suiro_engine.o",
        "mv " .. lib .. "/libsuiro.a " .. lib .. "/libsuiro_internal.a",
        "ld -r --whole-archive " .. lib .. "/libsuiro_internal.a -o " .. lib .. "/suiro_engine.o",
        "objcopy --localize-hidden " .. lib .. "/suiro_engine.o",
        "ar rcs " .. lib .. "/libsuiro.a " .. lib .. "/suiro_engine.o",
        "rm -f " .. lib .. "/suiro_engine.o" }
  end
  configuration({})

-- The C tests link the internal archive (before -lsuiro, which is then never searched).
local function link_internal()
  for _, name in ipairs(order) do
    configuration(name)
      linkoptions { root .. "/" .. configs[name].dir .. "/lib/libsuiro_internal.a" }
  end
  configuration({})
end

-- libsuiro.so for host applications that link dynamically: the same sources, the soname of the
-- major version, and only the public API exported (engine/libsuiro.map).
project "suiro_shared"
  kind "SharedLib"
  targetname "suiro"
  files { root .. "/engine/src/*.c" }
  includedirs { root .. "/engine/include", root .. "/engine/src" }
  buildoptions(common_c)
  buildoptions(engine_c)
  links { "pthread", "m" }
  linkoptions { "-pthread", "-Wl,-soname,libsuiro.so.0", "-Wl,--version-script=" .. root .. "/engine/libsuiro.map" }
  per_config("lib/shared") -- apart from libsuiro.a, which everything in the tree links statically
  for _, name in ipairs(order) do
    configuration(name)
      objdir(root .. "/" .. configs[name].dir .. "/obj/shared")
  end
  configuration({})

-- C tests: one executable per tests/c/test_*.c; each test case runs in its own process.
for _, f in ipairs(os.matchfiles(root .. "/tests/c/test_*.c")) do
  local name = path.getbasename(f)
  project(name)
    kind "ConsoleApp"
    files { f, root .. "/tests/c/harness.c" }
    includedirs { root .. "/engine/include", root .. "/engine/src", root .. "/tests/c" }
    buildoptions(common_c)
    links { "suiro", "pthread", "m" }
    linkoptions { "-pthread" }
    per_config("tests")
    link_internal()
end

-- The config readers (engine/conf/conf.c, suiro_conf.h), tested from C as Python and R use them:
-- public engine headers only, nothing of lua/.
project "test_embed"
  kind "ConsoleApp"
  files { root .. "/tests/c/embed/test_embed.c", root .. "/tests/c/harness.c", root .. "/engine/conf/conf.c" }
  includedirs { root .. "/engine/include", root .. "/tests/c", "/usr/include/lua5.4" }
  buildoptions(common_c)
  links { "suiro", "lua5.4", "lua5.4-lpeg", "pthread", "m", "dl" }
  linkoptions { "-pthread" }
  per_config("tests")

-- Benchmarks
for _, f in ipairs(os.matchfiles(root .. "/bench/bench_*.c")) do
  local name = path.getbasename(f)
  project(name)
    kind "ConsoleApp"
    files { f }
    includedirs { root .. "/engine/include" }
    buildoptions(common_c)
    links { "suiro", "pthread", "m" }
    linkoptions { "-pthread" }
    per_config("bin")
end

-- A host application that embeds the engine and re-executes itself as its workers.
project "embed_example"
  kind "ConsoleApp"
  files { root .. "/examples/embed/*.c" }
  includedirs { root .. "/engine/include" }
  buildoptions(common_c)
  links { "suiro", "pthread", "m" }
  linkoptions { "-pthread" }
  per_config("bin")


-- The Lua binding as a module for stock lua5.4: build/lib/suiro/core.so (require "suiro.core").
local lua_inc = "/usr/include/lua5.4"
local lua_sources = { root .. "/lua/lpool.c", root .. "/lua/ltask.c", root .. "/lua/lenc.c", root .. "/lua/ldec.c",
                      root .. "/lua/lrecord.c", root .. "/lua/lfunc.c", root .. "/lua/lerror.c", root .. "/lua/lworker.c",
                      root .. "/lua/larray.c", root .. "/lua/lkind.c", root .. "/lua/lmap.c", root .. "/lua/lrange.c",
                      root .. "/lua/lvalues.c", root .. "/lua/lframe.c", root .. "/engine/conf/conf.c",
                      root .. "/lua/linit.c", root .. "/lua/lbuf.c", root .. "/lua/lchan.c" }

project "suiro_lua"
  kind "SharedLib"
  targetname "core"
  targetprefix ""
  files(lua_sources)
  includedirs { root .. "/engine/include", root .. "/lua", lua_inc }
  buildoptions(common_c)
  links { "suiro", "lua5.4-lpeg", "pthread", "m", "dl" }
  linkoptions { "-pthread" }
  per_config("lib/suiro")

-- Test hooks live in test builds only (tests/probe/), as Lua's ltests.c: neither the CLI, nor
-- suiro.core, nor the Python or R packages carry them.
-- suiro.probe: measurements for the Lua specs and benches (build/tests/lua/suiro/probe.so; .busted
-- and scripts/bench put build/tests/lua on the cpath).
project "suiro_probe"
  kind "SharedLib"
  targetname "probe"
  targetprefix ""
  files { root .. "/tests/probe/lprobe.c" }
  includedirs { lua_inc }
  buildoptions(common_c)
  per_config("tests/lua/suiro")

-- suiro_probe for the Python benches (build/tests/python/suiro_probe.so), where Python's headers are.
local function py_include()
  local f = io.popen("/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()[\"include\"])' 2>/dev/null")
  if not f then return nil end
  local s = (f:read("*a") or ""):gsub("%s+$", "")
  f:close()
  if s == "" or not os.isfile(s .. "/Python.h") then return nil end
  return s
end
local py_inc = py_include()
if py_inc then
  project "suiro_pyprobe"
    kind "SharedLib"
    targetname "suiro_probe"
    targetprefix ""
    files { root .. "/tests/probe/pyprobe.c" }
    includedirs { py_inc }
    buildoptions(common_c)
    buildoptions { "-fvisibility=hidden" }
    per_config("tests/python")
end

-- The same floor for the R benches (build/tests/r/suiro_probe.so, loaded with dyn.load), where R's
-- headers are.
local function r_include()
  local f = io.popen("R CMD config --cppflags 2>/dev/null")
  if not f then return nil end
  local s = (f:read("*a") or ""):gsub("%s+$", "")
  f:close()
  local dir = s:match("^%-I(%S+)$")
  if not dir or not os.isfile(dir .. "/R.h") then return nil end
  return dir
end
local r_inc = r_include()
if r_inc then
  project "suiro_rprobe"
    kind "SharedLib"
    targetname "suiro_probe"
    targetprefix ""
    files { root .. "/tests/probe/rprobe.c" }
    includedirs { r_inc }
    buildoptions(common_c)
    per_config("tests/r")
end

-- The suiro CLI: Lua 5.4 with LPeg and the engine built in; also the Lua worker executable.
project "suiro_cli"
  kind "ConsoleApp"
  targetname "suiro"
  files(lua_sources)
  files { root .. "/lua/suiro_cli.c" }
  includedirs { root .. "/engine/include", root .. "/lua", lua_inc }
  buildoptions(common_c)
  links { "suiro", "lua5.4", "lua5.4-lpeg", "pthread", "m", "dl" }
  linkoptions { "-pthread", "-Wl,-E" }
  per_config("bin")

-- The MPI tier (build/lib/suiro/mpi.so): links Open MPI; the engine and the Lua face come from
-- the process that loads it (the suiro command exports them), so libsuiro, the CLI and the
-- workers stay MPI-free. Built only where mpicc and libopenmpi-dev are installed.
local function mpi_flags(what)
  local f = io.popen("mpicc -showme:" .. what .. " 2>/dev/null")
  if not f then return nil end
  local s = f:read("*a") or ""
  f:close()
  s = s:gsub("%s+$", "")
  if s == "" then return nil end
  return s
end
local mpi_compile, mpi_link = mpi_flags("compile"), mpi_flags("link")
if mpi_compile and mpi_link then
  project "suiro_mpi"
    kind "SharedLib"
    targetname "mpi"
    targetprefix ""
    -- engine/cluster: the tier, C over the public engine headers only; lua/lmpi.c: rank 0's Lua face
    files { root .. "/engine/cluster/comm.c", root .. "/engine/cluster/xwire.c", root .. "/engine/cluster/serve.c",
            root .. "/engine/cluster/deal.c", root .. "/engine/cluster/reap.c", root .. "/lua/lmpi.c" }
    includedirs { root .. "/engine/include", root .. "/engine/cluster", root .. "/lua", lua_inc }
    buildoptions(common_c)
    buildoptions { mpi_compile }
    linkoptions { "-pthread", mpi_link }
    per_config("lib/suiro")

  -- The same tier for the Python and R faces (build/lib/suiro/cluster.so): the table of
  -- engine/include/suiro_cluster.h, loaded with dlopen only for backend = "mpi"; no Lua in it
  project "suiro_cluster"
    kind "SharedLib"
    targetname "cluster"
    targetprefix ""
    files { root .. "/engine/cluster/comm.c", root .. "/engine/cluster/xwire.c", root .. "/engine/cluster/serve.c",
            root .. "/engine/cluster/deal.c", root .. "/engine/cluster/reap.c", root .. "/engine/cluster/api.c" }
    includedirs { root .. "/engine/include", root .. "/engine/cluster" }
    buildoptions(common_c)
    buildoptions { mpi_compile }
    linkoptions { "-pthread", mpi_link }
    per_config("lib/suiro")
end
