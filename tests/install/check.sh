# tests/install/check.sh — sourced by the install suites: check NAME WANT COMMAND... runs COMMAND
# (in $check_dir when set; a program at most 300 s) and passes when its output holds WANT; counts go to
# $pass and $fail, lines are labelled $suite.NAME.
pass=0
fail=0
check() { # name expected-substring command...
  local name=$1 want=$2
  shift 2
  local out
  if declare -F "$1" >/dev/null; then # a shell function of the suite (timeout runs programs only)
    out=$(cd "${check_dir:-.}" && "$@" 2>&1)
  else
    out=$(cd "${check_dir:-.}" && timeout 300 "$@" 2>&1)
  fi
  if [[ "$out" == *"$want"* ]]; then
    echo "ok   $suite.$name"
    pass=$((pass + 1))
  else
    echo "FAIL $suite.$name: expected '$want' in:"
    echo "$out" | tail -8 | sed 's/^/    /'
    fail=$((fail + 1))
  fi
}
