#!/usr/bin/env bash
# Builds pcoll in release mode.
#   scripts/build.sh mpich     libpcoll.so for MPICH     (target/mpich/release/libpcoll-mpich.so)
#   scripts/build.sh openmpi   libpcoll.so for Open MPI  (target/openmpi/release/libpcoll-openmpi.so)
#   scripts/build.sh tool      the `pcoll` command-line tool, which needs no MPI
#                              (feature `tool`: with the simulator and tuner,
#                              which libpcoll.so does not contain)
#   scripts/build.sh mpich test-wrong-algorithm
#                              with extra cargo features (test variants, in
#                              target/<mpi>-<features>; see Cargo.toml)
# The last line of output is the absolute path of what was built.
# One library per MPI: MPICH and Open MPI differ in ABI (integer handles
# against pointers), so each build has its own target directory, and the
# library carries its family's name: its SONAME is libpcoll-<mpi>.so.0 (set
# by build.rs), and next to cargo's libpcoll.so (which scripts and -lpcoll
# use) are libpcoll-<mpi>.so (for -lpcoll-<mpi> and LD_PRELOAD) and
# libpcoll-<mpi>.so.0 (what the loader looks for in a linked program).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
what=${1:-}
features=${2:-}

case "$what" in
  mpich) mpicc=mpicc.mpich; pkg="mpich libmpich-dev" ;;
  openmpi) mpicc=mpicc.openmpi; pkg="openmpi-bin libopenmpi-dev" ;;
  tool)
    CARGO_TARGET_DIR="$root/target/pure" cargo build --release --quiet --no-default-features --features tool --bin pcoll >&2
    echo "$root/target/pure/release/pcoll"
    exit 0 ;;
  *) echo "usage: $0 mpich|openmpi|tool" >&2; exit 2 ;;
esac

if ! command -v "$mpicc" >/dev/null 2>&1; then
  echo "pcoll: no $what found ($mpicc is missing). Install it with: apt-get install $pkg" >&2
  echo "       (or run scripts/setup.sh, which installs everything pcoll needs)" >&2
  exit 1
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "pcoll: cargo is missing. Install Rust (https://rustup.rs) or run scripts/setup.sh" >&2
  exit 1
fi

target="$root/target/$what${features:+-${features//,/-}}"
MPICC=$mpicc CARGO_TARGET_DIR="$target" cargo build --release --quiet --lib ${features:+--features "$features"} >&2
for name in "libpcoll-$what.so" "libpcoll-$what.so.0"; do
  ln -sfn libpcoll.so "$target/release/$name"
done
echo "$target/release/libpcoll-$what.so"
