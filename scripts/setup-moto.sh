#!/usr/bin/env bash
# The second S3-compatible server the remote level's tests run against:
# moto's server (PyPI `moto`, an S3 emulation written to test S3 clients; it
# checks SigV4 signatures once its IAM authentication is switched on) in a
# virtual environment OUTSIDE the repository,
# ${BOOST_MOTO_HOME:-~/.cache/boost/moto}, shared by every worktree and CI
# clone. Only the S3 part and the server's web framework are installed
# (moto[s3] + flask + flask-cors: 140 MB, seconds), not moto[server]'s
# every service.
#
#   bash scripts/setup-moto.sh            install (does nothing when present)
#   bash scripts/setup-moto.sh --python   print the venv's python (exit 1: none)
#
# Never fails the caller: where it cannot be installed it says so and exits
# 0, and tests/mpi/remote_store_moto.sh skips (77) with the reason.
set -uo pipefail
home=${BOOST_MOTO_HOME:-${HOME:-/root}/.cache/boost/moto}
pins=("moto[s3]==5.2.5" "flask==3.1.3" "flask-cors==6.0.5")
py=$home/venv/bin/python
ready() { [ -x "$py" ] && "$py" -c 'import moto, moto.server, boto3' >/dev/null 2>&1; }
if [ "${1:-}" = --python ]; then
  ready && { echo "$py"; exit 0; }
  exit 1
fi
ready && { echo "setup-moto: $py ready"; exit 0; }
give_up() { echo "setup-moto: $* (tests/mpi/remote_store_moto.sh will skip)"; exit 0; }
mkdir -p "$home" || give_up "cannot create $home"
rm -rf "$home/venv"
/usr/bin/python3 -m venv "$home/venv" || give_up "cannot create a virtual environment in $home"
echo "setup-moto: installing ${pins[*]} into $home/venv"
"$home/venv/bin/pip" install -q --disable-pip-version-check --timeout 30 --retries 2 "${pins[@]}" ||
  give_up "pip could not install ${pins[*]} (is PyPI reachable?)"
ready || give_up "moto does not import in $home/venv"
echo "setup-moto: $py ready"
