#!/usr/bin/env bash
# Runs a command on this Debian machine as if it were a GPU machine without
# boost's Debian libraries: in a private mount namespace (unshare -m, root),
# every file of the packages boost links directly (Open MPI, parallel HDF5,
# OpenBLAS, cJSON, inih, xxhash, Criterion, pkgconf, and the -dev packages
# of zstd and libcurl), of what Open MPI loads in turn that the GPU machine's image
# lacks (PMIx and the munge library it links; oneDNN), and of the ssh client (the
# image has no rsh/ssh agent, which Open MPI's default launcher wants even
# on one node) is covered by /dev/null, so only tests/gpu/carry can provide
# the libraries; the ssh and rsh programs are removed from an overlay of
# their folder, so `ssh` is not on PATH at all. Packages the build tools themselves load (curl, ssl, zstd's
# library, ...) stay. Nothing outside the namespace changes.
#
#   tests/gpu/without_debian_libs.sh CMD [ARGS...]
#
# Where namespaces are not allowed (not root, a container that forbids
# them), the command runs as it is and a note says so.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }
if [ "${BOOST_IN_HIDDEN_NS:-0}" != 1 ]; then
  if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    BOOST_IN_HIDDEN_NS=1 exec unshare -m "$0" "$@"
  fi
  echo "without_debian_libs: no private mount namespace here: running with the system's libraries visible" >&2
  exec "$@"
fi
HIDE="libopenmpi3 libopenmpi-dev openmpi-common openmpi-bin libhdf5-openmpi-103-1 libhdf5-openmpi-dev
libopenblas0-openmp libopenblas-openmp-dev libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev libopenblas0
libcjson1 libcjson-dev libinih1 libinih-dev libxxhash0 libxxhash-dev libcriterion3 libcriterion-dev libzstd-dev
pkgconf pkgconf-bin libpkgconf3 pkg-config libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libgfortran5
libpmix2 libpmix-dev libmunge2 libdnnl2 libdnnl-dev libpcre2-dev libcurl4-openssl-dev"
# the remote-shell clients: gone from PATH (an overlay of each folder
# holding one, the programs deleted in it: the files below stay untouched)
NOSHELL="openssh-client rsh-client rsh-redone-client"
progs=$(for p in $NOSHELL; do dpkg -L "$p" 2>/dev/null | grep -E '/s?bin/[^/]+$' || true; done)
k=0
for d in $(for f in $progs; do dirname "$f"; done | sort -u); do
  t=/tmp/.boost-noshell-$k # one empty folder left in /tmp (mounted on only in here)
  k=$((k + 1))
  if mkdir -p "$t" && mount -t tmpfs tmpfs "$t" && mkdir "$t/up" "$t/work" &&
    mount -t overlay overlay -o "lowerdir=$d,upperdir=$t/up,workdir=$t/work" "$d"; then
    for f in $progs; do [ "$(dirname "$f")" != "$d" ] || rm -f "$f"; done
  else # no overlay here: covered by /dev/null instead (found, but nothing to execute)
    echo "without_debian_libs: no overlay of $d here: its remote-shell programs covered by /dev/null" >&2
    for f in $progs; do [ "$(dirname "$f")" != "$d" ] || [ ! -f "$f" ] || mount --bind /dev/null "$f"; done
  fi
done
n=0
for p in $HIDE; do
  dpkg -L "$p" >/dev/null 2>&1 || continue
  while read -r f; do
    if [ -f "$f" ] && [ ! -L "$f" ]; then mount --bind /dev/null "$f" && n=$((n + 1)); fi
  done < <(dpkg -L "$p")
done
echo "without_debian_libs: $n files of boost's Debian packages hidden" >&2
exec "$@"
