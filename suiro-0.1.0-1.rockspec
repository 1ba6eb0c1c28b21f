-- LuaRocks package of suiro's Lua face: `luarocks make` in a checkout builds and installs the
-- `suiro` module (lua/suiro/*.lua), `suiro.core` (the engine and the Lua binding), `suiro.mpi`
-- where Open MPI's mpicc is installed, and the `suiro` command (the CLI and Lua worker).
-- Offline, from the checkout:  luarocks --lua-version=5.4 make --tree=DIR suiro-0.1.0-1.rockspec
rockspec_format = "3.0"
package = "suiro"
version = "0.1.0-1"
source = {
  url = "git+file:///dev/null", -- built from a checkout with `luarocks make`; no release is published
}
description = {
  summary = "Embeddable task engine: worker pools over shared memory, driven by Lua",
  detailed = [[
    Pools of Lua, Python and R worker processes that talk through shared memory, parallel maps
    over a shared cursor, zero-copy large values, config scripts and the suiro command.
  ]],
  license = "MIT",
  labels = { "parallel", "multiprocessing", "shared-memory" },
}
supported_platforms = { "linux" }
dependencies = { "lua >= 5.4, < 5.5" }
external_dependencies = {
  -- LPeg's C library (Debian: lua-lpeg-dev); the module and the command link it.
  LPEG = { library = "lua5.4-lpeg" },
}
build = {
  type = "command",
  -- premake writes the makefiles; the C projects of the release configuration are built
  -- (not the Python and R faces, which their own package managers build).
  build_command = [[
    set -e
    if command -v premake5 >/dev/null 2>&1; then premake5 --file=premake5.lua gmake2 >/dev/null;
    else premake4 --file=premake5.lua gmake >/dev/null; fi
    make -s -C build/make config=release -j"$(nproc 2>/dev/null || echo 2)"
  ]],
  install_command = [[
    set -e
    mkdir -p "$(LUADIR)/suiro" "$(LIBDIR)/suiro" "$(BINDIR)"
    cp lua/suiro/*.lua engine/conf/suiro/*.lua "$(LUADIR)/suiro/"
    cp build/lib/suiro/core.so "$(LIBDIR)/suiro/"
    if [ -f build/lib/suiro/mpi.so ]; then cp build/lib/suiro/mpi.so "$(LIBDIR)/suiro/"; fi
    if [ -f build/lib/suiro/cluster.so ]; then cp build/lib/suiro/cluster.so "$(LIBDIR)/suiro/"; fi
    cp build/bin/suiro "$(BINDIR)/suiro"
  ]],
}
