#!/usr/bin/env bash
# Packs what a GPU machine lacks to build and run boost: the Debian
# libraries boost links (Open MPI, parallel HDF5, OpenBLAS, zstd, cJSON,
# inih, xxhash, PCRE2, libcurl and what they link in turn), their headers and pkg-config
# files, Criterion's headers (configure asks for them), and pkgconf -- as
# installed on this Debian machine, into one compressed tarball:
#
#   tests/gpu/prepare_carry.sh [BUILD_DIR]      (default: build)
#   -> tests/gpu/carry/prefix.tar.xz, tests/gpu/carry/MANIFEST
#
# The runtime libraries are found, not listed: every library the built
# programs (trainer/boost-train, tools/boost-data, tools/boost-inspect,
# tests/gpu/boost-gpu-check in BUILD_DIR) load, by ldd, mapped to its
# Debian package, less what every GPU machine has (the C and C++ runtimes,
# libgomp, the CUDA toolkit's own). The development packages are the ones
# in DEV below. Files come from the installed packages (dpkg -L): no
# download, the same versions the build used; documentation, man pages and
# static archives are left out. The tarball travels with the working tree
# (tracked and untracked-not-ignored files), 64 MiB in all: the script
# fails if the two together come within 2 MiB of that.
#
# nccl.h (the header the build compiled against, from BUILD_DIR's CMake
# cache) goes in as opt/boost-nccl/include: a GPU machine whose only NCCL is
# PyTorch's wheel (a library without a header) builds against it. Open
# MPI's mpirun (openmpi-bin) runs the multi-rank stage.
#
# The tarball and MANIFEST are written under temporary names and renamed
# into place at the end, so an interrupted preparation leaves the previous
# carry (or none), never a truncated one.
#
# tests/gpu/carry/ is ignored by git; the device tool carries it with
# carry=["tests/gpu/carry"]. run_gpu_check.sh unpacks it (carry_unpack.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=$root/tests/gpu/carry
limit_mib=64 margin_mib=2
DEV="openmpi-bin libopenmpi-dev libhdf5-openmpi-dev libopenblas-openmp-dev libzstd-dev libcjson-dev libinih-dev libxxhash-dev libpcre2-dev
libcurl4-openssl-dev
libcriterion-dev libcriterion3 pkgconf-bin libpkgconf3 openmpi-common"
# present on any machine that builds CUDA code (and ABI-bound to its compiler)
BASE="libc6 libgcc-s1 libstdc++6 libgomp1 gcc-12-base"

progs=("$build/trainer/boost-train" "$build/tools/boost-data" "$build/tools/boost-inspect" "$build/tests/gpu/boost-gpu-check")
for p in "${progs[@]}"; do [ -x "$p" ] || { echo "prepare_carry: $p is not built (cmake --build $build)" >&2; exit 1; }; done
command -v dpkg-query >/dev/null || { echo "prepare_carry: needs a Debian machine (dpkg)" >&2; exit 1; }

# runtime packages: the libraries the programs and Open MPI's components load
libs=$( (ldd "${progs[@]}"; find /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 -name 'mca_*.so' \
  -exec ldd {} \; 2>/dev/null) | awk '$3 ~ /^\// {print $3}' | sort -u)
runtime=""
for l in $libs; do
  p=$(dpkg -S "$(readlink -f "$l")" 2>/dev/null | head -1 | cut -d: -f1) || true
  [ -n "$p" ] || p=$(dpkg -S "$l" 2>/dev/null | head -1 | cut -d: -f1) || true
  [ -n "$p" ] && runtime="$runtime $p" # not from a package: the CUDA toolkit's, left to the GPU machine
done
# libraries Open MPI's components need that a machine without InfiniBand and
# friends does without (the components fail to load and are skipped), and
# oneDNN, which the CPU build links but the GPU machine's build cannot (its
# headers are not carried). PMIx and munge stay: Debian's Open MPI 4.1
# starts every multi-process job through PMIx (mca_pmix_ext3x loads
# libpmix.so.2, which links libmunge.so.2).
SKIP="ibverbs-providers libucx0 libfabric1 libibverbs1 librdmacm1 libpsm2-2 libpsm-infinipath1 libnuma1 libnl-3-200
libnl-route-3-200 libxnvctrl0 libx11-6 libxext6 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0 libltdl7
libpciaccess0 libcap2 ocl-icd-libopencl1 libdnnl2 libdnnl3"
# shellcheck disable=SC2086 # the lists split into words
pkgs=$(for p in $runtime $DEV; do echo "$p"; done | sort -u | grep -vxF -f <(printf '%s\n' $BASE $SKIP))

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/root" "$out"
: >"$stage/MANIFEST"
for p in $pkgs; do
  dpkg-query -W -f='${Package} ${Version} ${Installed-Size}\n' "$p" >>"$stage/MANIFEST"
  dpkg -L "$p" | while read -r f; do
    case "$f" in
    /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/* | *.a | /etc/*) continue ;;
    esac
    if [ -L "$f" ] || [ -f "$f" ]; then cp -a --parents "$f" "$stage/root/" 2>/dev/null || true; fi
  done
done
nccl_inc=$(grep '^BOOST_NCCL_INCLUDE_DIR:' "$build/CMakeCache.txt" 2>/dev/null | cut -d= -f2)
if [ -f "$nccl_inc/nccl.h" ]; then
  mkdir -p "$stage/root/opt/boost-nccl/include"
  cp "$nccl_inc/nccl.h" "$stage/root/opt/boost-nccl/include/"
  echo "nccl.h $(awk '/define NCCL_(MAJOR|MINOR|PATCH) /{printf "%s%s", s, $3; s="."}' "$nccl_inc/nccl.h") (header only)" >>"$stage/MANIFEST"
else
  echo "prepare_carry: note: $build was configured without NCCL: the carry has no nccl.h" >&2
fi
echo "# packages (version, installed KiB) copied from this machine by tests/gpu/prepare_carry.sh" |
  cat - "$stage/MANIFEST" >"$stage/MANIFEST.out"
echo "# glibc $(ldd --version | head -1 | awk '{print $NF}'); highest glibc symbol version needed:" \
  "$(find "$stage/root" -name '*.so*' -type f -exec objdump -T {} \; 2>/dev/null | grep -o 'GLIBC_[0-9.]*' |
    sort -t. -k1,1 -k2,2n -k3,3n -u | tail -1)" >>"$stage/MANIFEST.out"
# written beside its final name (same file system), renamed when whole
tmp=$out/.prefix.tar.xz.$$
trap 'rm -rf "$stage" "$tmp"' EXIT
tar -C "$stage/root" -cJf "$tmp" .
size=$(stat -c %s "$tmp")
# what travels beside it: the working tree as git sees it (shared/ too, where there is one)
tree=$(cd "$root" && { git ls-files -z -c -o --exclude-standard; if [ -d shared ]; then find shared -type f -print0; fi; } |
  du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1) || true
total=$((size + ${tree:-0}))
echo "prepare_carry: $(echo "$pkgs" | wc -w) packages, $(du -sh "$stage/root" | cut -f1) unpacked," \
  "tests/gpu/carry/prefix.tar.xz $((size / 1048576)) MiB + working tree $((${tree:-0} / 1048576)) MiB =" \
  "$((total / 1048576)) MiB (limit $limit_mib MiB, $margin_mib MiB kept free)"
[ "$total" -lt $(((limit_mib - margin_mib) * 1048576)) ] ||
  { echo "prepare_carry: the carry and the working tree come to over $((limit_mib - margin_mib)) MiB" >&2; exit 1; }
cp "$stage/MANIFEST.out" "$out/.MANIFEST.$$"
mv -f "$out/.MANIFEST.$$" "$out/MANIFEST"
mv -f "$tmp" "$out/prefix.tar.xz"
