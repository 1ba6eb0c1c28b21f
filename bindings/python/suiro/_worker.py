"""The Python worker: started by the engine as

    python3 -I <this file> --suiro-worker TOKEN

(-I: isolated, so PYTHONPATH and the user's site do not leak in; the host passes the paths its
functions are imported from in SUIRO_PYTHONPATH). Serves the pool until it stops.
"""

import os
import sys


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    pkg_parent = os.path.dirname(here)
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]  # never import the package's own modules as top-level ones
    # The host's path (SUIRO_PYTHONPATH), then the PYTHONPATH this worker was given (its pool's or
    # launcher's env, or the host's environment): -I made Python itself ignore the latter.
    extra = [p for var in ("SUIRO_PYTHONPATH", "PYTHONPATH")
             for p in os.environ.get(var, "").split(os.pathsep) if p]
    for p in reversed([pkg_parent] + extra):
        if p not in sys.path:
            sys.path.insert(0, p)
    try:
        i = argv.index("--suiro-worker")
        token = argv[i + 1]
    except (ValueError, IndexError):
        sys.stderr.write("suiro worker: usage: python3 -I %s --suiro-worker TOKEN\n" % __file__)
        return 2
    cwd = os.environ.get("SUIRO_CWD")
    if cwd:
        try:
            os.chdir(cwd)
        except OSError:
            pass
    from suiro import _core

    return _core.worker_run(token)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
