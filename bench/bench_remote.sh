#!/usr/bin/env bash
# The remote level's transfers against the S3 transfer a user would
# otherwise use: boto3's multipart transfer (upload_file / download_file with
# a TransferConfig of the same part size and connections), same SeaweedFS
# server on 127.0.0.1, same file, same machine.
#
#   bash bench/bench_remote.sh [BUILD] [--mib N] [--rounds R] [--threads T]
#
# BUILD (default build/) holds tests/mpi/remote_check, which drives the
# remote level's library: `push` (multipart upload, 16 MiB parts, XXH3 per
# part, manifest last) and `fetch` (ranged GETs, every part checked against
# the manifest). A random file of N MiB (default 256) goes up and comes back
# R times (default 3) each way and by each side, interleaved; the best
# (shortest) of the R times is reported, in MiB/s, and the ratios ours /
# boto3. boto3 comes from PyPI into ~/.cache/boost/boto3 (outside the
# repository) the first time; SeaweedFS from scripts/setup-seaweedfs.sh.
# Exit 0, 1 when a transfer failed, 2 on bad arguments.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build mib=256 rounds=3 threads=4
while [ $# -gt 0 ]; do
  case $1 in
  --mib) mib=$2; shift ;;
  --rounds) rounds=$2; shift ;;
  --threads) threads=$2; shift ;;
  -*) echo "bench_remote: unknown option $1" >&2; exit 2 ;;
  *) build=$(cd "$1" && pwd) ;;
  esac
  shift
done
[[ $mib =~ ^[0-9]+$ && $rounds =~ ^[0-9]+$ && $threads =~ ^[0-9]+$ ]] || { echo "bench_remote: numbers only" >&2; exit 2; }
venv=$HOME/.cache/boost/boto3
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import boto3" 2>/dev/null; then
  python3 -m venv "$venv" && "$venv/bin/pip" install -q boto3 || { echo "bench_remote: cannot install boto3 into $venv" >&2; exit 1; }
fi
export BOOST_BINARY_DIR=$build BOOST_SOURCE_DIR=$root
tmp=$(mktemp -d /tmp/bench_remote.XXXXXX)
cleanup() { rm -rf "$tmp"; }
source "$root/tests/mpi/remote_common.bash"
start_server
rc s3://bench/ours mkbucket >/dev/null
head -c $((mib << 20)) /dev/urandom >"$tmp/file"
cat >"$tmp/boto.py" <<'PYEOF'
import os, sys, time, boto3
from boto3.s3.transfer import TransferConfig
what, path, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
s3 = boto3.client("s3", endpoint_url=os.environ["BOOST_S3_ENDPOINT"], region_name="us-east-1")
cfg = TransferConfig(multipart_threshold=16 << 20, multipart_chunksize=16 << 20, max_concurrency=threads)
t0 = time.monotonic()
if what == "up":
    s3.upload_file(path, "bench", "boto/ckpt.h5", Config=cfg)
else:
    s3.download_file("bench", "boto/ckpt.h5", path, Config=cfg)
print("%.3f" % (time.monotonic() - t0))
PYEOF
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
best() { printf '%s\n' "$@" | sort -g | head -1; }
ou=() od=() bu=() bd=()
ours_up() { ou+=("$(secs "$RC" s3://bench/ours push "$tmp/file" "$1" "$threads")"); }
boto_up() { bu+=("$("$venv/bin/python" "$tmp/boto.py" up "$tmp/file" "$threads")"); }
ours_down() {
  rm -f "$tmp/back"
  od+=("$(secs "$RC" s3://bench/ours fetch "$tmp/back" "$threads")")
  cmp -s "$tmp/file" "$tmp/back" || { echo "bench_remote: our download differs from the file" >&2; exit 1; }
}
boto_down() {
  rm -f "$tmp/back"
  bd+=("$("$venv/bin/python" "$tmp/boto.py" down "$tmp/back" "$threads")")
  cmp -s "$tmp/file" "$tmp/back" || { echo "bench_remote: boto3's download differs from the file" >&2; exit 1; }
}
# Each side goes first in every other round, so that neither always meets
# the server right after the other's upload.
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then
    ours_up "$r"; boto_up; sleep 2; ours_down; boto_down
  else
    boto_up; ours_up "$r"; sleep 2; boto_down; ours_down
  fi
done
rate() { echo "scale=1; $mib / $1" | bc -l; }
echo "bench_remote: $mib MiB, $threads connections, 16 MiB parts, best of $rounds; $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load $(cut -d' ' -f1-3 /proc/loadavg)"
U=$(best "${ou[@]}") BU=$(best "${bu[@]}") D=$(best "${od[@]}") BD=$(best "${bd[@]}")
printf "upload:   ours %7.1f MiB/s  boto3 %7.1f MiB/s  ratio ours/boto3 %.2f\n" "$(rate "$U")" "$(rate "$BU")" "$(echo "$BU / $U" | bc -l)"
printf "download: ours %7.1f MiB/s  boto3 %7.1f MiB/s  ratio ours/boto3 %.2f\n" "$(rate "$D")" "$(rate "$BD")" "$(echo "$BD / $D" | bc -l)"
echo "all times (s): ours up ${ou[*]} | boto3 up ${bu[*]} | ours down ${od[*]} | boto3 down ${bd[*]}"
