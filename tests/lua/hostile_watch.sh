#!/usr/bin/env bash
# hostile_watch.sh STDERR_FILE COMMAND... — runs a battery child (tests/lua/hostile_child.lua) and
# passes its stdout through, killing it when a case overruns its deadline.
#
# The child announces each case with a line "BEGIN <index> <deadline seconds>" before running it
# and "RESULT <index> ..." after. When no line arrives within the announced deadline, the child
# (and its process group) is killed with SIGKILL and "HUNG <index>" is printed. The last line is
# always "EXIT <status>" (128 + signal for a child that died of one).
set -u
errf=$1
shift
# No case may take more than 1 GB (issue 17, acceptance 3): the child and its workers run under a
# 1 GiB data limit (RLIMIT_DATA: the heap and private mappings; not the address space, since pool
# regions are large sparse shared mappings); under AddressSanitizer (which reserves terabytes of
# private shadow) the engine's budget is 1 GiB instead and ASan kills a process whose resident
# memory passes 1 GiB.
if [[ "${LD_PRELOAD:-}" == *asan* ]]; then
  export SUIRO_MAX_BYTES=1G ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=1024"
else
  ulimit -d $((1 << 20))
fi
coproc CHILD { exec setsid "$@" 2>"$errf"; }
pid=$CHILD_PID
exec {out}<&"${CHILD[0]}"
deadline=30
current=
while true; do
  if IFS= read -r -t "$deadline" -u "$out" line; then
    printf '%s\n' "$line"
    case $line in
    BEGIN\ *)
      set -- $line
      current=$2
      deadline=$3
      ;;
    RESULT\ *) deadline=30 ;;
    esac
  else
    rc=$?
    if ((rc > 128)); then
      printf 'HUNG %s\n' "$current"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    fi
    break
  fi
done
wait "$pid" 2>/dev/null
status=$?
printf 'EXIT %s\n' "$status"
