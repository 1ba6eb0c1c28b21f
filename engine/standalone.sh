#!/bin/sh
# engine/standalone.sh OUT — the engine's sources for a package that compiles the engine in (the R
# package, `pip install bindings/python`): each engine/src/*.c written to OUT with the private
# headers it includes expanded in place (each once, as their guards would; #line keeps compiler
# messages on the original files). The copies need only system headers and the public ones in
# engine/include, so a package carries no private header of the engine. A copy is rewritten only
# when its text changes (make rebuilds by time); copies of files gone from engine/src, and headers
# left by older copies, are removed with their objects.
set -e
engine=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: engine/standalone.sh OUT}
mkdir -p "$out"
private=$(cd "$engine/src" && echo *.h)
for c in "$engine"/src/*.c; do
  name=$(basename "$c")
  tmp="$out/.$name.tmp"
  awk -v src="$engine/src" -v private="$private" '
    function expand(path, shown,   line, n, h) {
      n = 0
      printf "#line 1 \"%s\"\n", shown
      while ((getline line < path) > 0) {
        n++
        if (match(line, /^#include "[^"]+"/)) {
          h = substr(line, 11, RLENGTH - 11)
          if (h in is_private) {
            if (!(h in seen)) {
              seen[h] = 1
              expand(src "/" h, "engine/src/" h)
            }
            printf "#line %d \"%s\"\n", n + 1, shown
            continue
          }
        }
        print line
      }
      close(path)
    }
    BEGIN {
      k = split(private, hs, " ")
      for (i = 1; i <= k; i++) is_private[hs[i]] = 1
      expand(ARGV[1], "engine/src/" ARGV[2])
      exit
    }' "$c" "$name" >"$tmp"
  if cmp -s "$tmp" "$out/$name"; then rm -f "$tmp"; else mv "$tmp" "$out/$name"; fi
done
for f in "$out"/*.c "$out"/*.h; do
  [ -e "$f" ] || continue
  case "$f" in *.c) [ -f "$engine/src/$(basename "$f")" ] && continue ;; esac
  rm -f "$f" "${f%.c}.o"
done
