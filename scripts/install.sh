#!/usr/bin/env bash
# Installs pcoll under a prefix, or removes what it installed there.
#
#   bash scripts/install.sh --prefix DIR [mpich|openmpi|all]
#   bash scripts/install.sh --prefix DIR --uninstall [mpich|openmpi|all]
#
# For each MPI family asked for (default: all, i.e. both), builds the
# library (scripts/build.sh) and installs
#   DIR/lib/libpcoll-<mpi>.so.0        the library (its SONAME)
#   DIR/lib/libpcoll-<mpi>.so          a link to it, for -lpcoll-<mpi>
#   DIR/lib/pkgconfig/pcoll-<mpi>.pc   flags that link a program ahead of
#                                      its MPI: mpicc ... $(pkg-config
#                                      --cflags --libs pcoll-<mpi>)
# and, once, DIR/include/pcoll.h, DIR/bin/pcoll (the command-line tool)
# and DIR/share/doc/pcoll (README, docs/, licences, changelog).
# --uninstall removes exactly those files, and the directories it leaves
# empty; the shared files go with the last family installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

prefix="" uninstall=0 which=all
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=${2:?--prefix needs a directory}; shift ;;
    --prefix=*) prefix=${1#--prefix=} ;;
    --uninstall) uninstall=1 ;;
    mpich|openmpi|all) which=$1 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$prefix" ] || { echo "install.sh: --prefix DIR is required (see --help)" >&2; exit 2; }
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac
families=(mpich openmpi)
[ "$which" = all ] || families=("$which")
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
docs=(README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE)
# The pages of docs/ and their pictures (not docs/templates/, the sources
# `pcoll config|algorithms --markdown` fill in).
doc_pages() { (cd "$root" && ls docs/*.md docs/img/*); }

# The files of one family, relative to the prefix.
family_files() { echo "lib/libpcoll-$1.so.0 lib/libpcoll-$1.so lib/pkgconfig/pcoll-$1.pc"; }
# The files every family shares.
shared_files() {
  printf "%s\n" include/pcoll.h bin/pcoll
  for d in "${docs[@]}"; do echo "share/doc/pcoll/$d"; done
  doc_pages | sed 's|^|share/doc/pcoll/|'
}
# Whether a family other than those being removed stays installed.
others_installed() {
  for m in mpich openmpi; do
    case " ${families[*]} " in *" $m "*) continue ;; esac
    [ -e "$prefix/lib/libpcoll-$m.so.0" ] && return 0
  done
  return 1
}

if [ "$uninstall" = 1 ]; then
  files=()
  for m in "${families[@]}"; do read -ra f <<< "$(family_files "$m")"; files+=("${f[@]}"); done
  others_installed || mapfile -t -O "${#files[@]}" files < <(shared_files)
  for f in "${files[@]}"; do rm -f "$prefix/$f"; done
  # the directories install.sh makes, deepest first, where now empty
  for d in share/doc/pcoll/docs/img share/doc/pcoll/docs share/doc/pcoll share/doc share lib/pkgconfig lib include bin; do
    rmdir "$prefix/$d" 2>/dev/null || true
  done
  echo "install.sh: removed pcoll (${families[*]}) from $prefix"
  exit 0
fi

for m in "${families[@]}"; do
  lib=$(bash "$root/scripts/build.sh" "$m" | tail -1)
  install -d "$prefix/lib/pkgconfig"
  install -m 0755 "$(readlink -f "$lib")" "$prefix/lib/libpcoll-$m.so.0"
  ln -sfn "libpcoll-$m.so.0" "$prefix/lib/libpcoll-$m.so"
  name="MPICH"; [ "$m" = openmpi ] && name="Open MPI"
  # -rpath: the program finds the library where it was installed; the
  # MPI's compiler wrapper puts its own libraries after these flags, so
  # pcoll's MPI_* come before the MPI's.
  cat > "$prefix/lib/pkgconfig/pcoll-$m.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: pcoll-$m
Description: pcoll, faster MPI_Allreduce, MPI_Reduce, MPI_Bcast and MPI_Gatherv for the $name family (link ahead of the MPI)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lpcoll-$m
EOF
done
tool=$(bash "$root/scripts/build.sh" tool | tail -1)
install -D -m 0755 "$tool" "$prefix/bin/pcoll"
install -D -m 0644 "$root/include/pcoll.h" "$prefix/include/pcoll.h"
for d in "${docs[@]}"; do install -D -m 0644 "$root/$d" "$prefix/share/doc/pcoll/$d"; done
doc_pages | while read -r d; do
  install -D -m 0644 "$root/$d" "$prefix/share/doc/pcoll/$d"
done
echo "install.sh: installed pcoll $version (${families[*]}) in $prefix"
echo "  build:   mpicc ... \$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs pcoll-${families[0]})"
echo "  preload: LD_PRELOAD=$prefix/lib/libpcoll-${families[0]}.so mpiexec ..."
