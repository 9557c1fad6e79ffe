#!/usr/bin/env bash
# Installs what pcoll needs, only where it is missing: MPICH and Open MPI
# (both: pcoll is built and tested against each), libclang (bindgen),
# gfortran, g++ (the tests compile include/pcoll.h as C++), python3 and
# matplotlib (the benchmark's plots),
# valgrind (the tests check docs/debugging.md's advice
# under it), and a Rust toolchain. Safe to run repeatedly.
set -euo pipefail

packages=(mpich libmpich-dev openmpi-bin libopenmpi-dev libclang-dev gfortran python3 python3-matplotlib pkg-config gcc g++ make valgrind)
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
