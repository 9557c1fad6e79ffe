#!/usr/bin/env bash
# The test command: everything pcoll is checked by.
#   1. installs what is missing (scripts/setup.sh);
#   2. Rust unit tests and the in-process simulator sweep (no MPI needed);
#   3. the C test programs under MPICH and Open MPI, preloaded and linked,
#      with PCOLL_ENABLE=0, defaults and every algorithm forced, at 1-8 ranks;
#      then, in a smaller matrix, under the PyPI wheels' MPICH 5 and Open
#      MPI 5, with an mpi4py program;
#      and (as root) t_<coll> across 2 hosts of scripts/cluster.sh.
# Ends with the line "N passed, N failed"; exits non-zero on any failure.
# Options are passed to ctests/run.py (e.g. --quick, --mpi mpich).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"

echo "== Rust unit tests and simulator (no MPI)"
CARGO_TARGET_DIR=target/pure cargo test --release --no-default-features --features tool

echo "== C tests under MPICH and Open MPI (Debian's, then the PyPI wheels')"
python3 ctests/run.py "$@"
