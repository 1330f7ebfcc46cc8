#!/usr/bin/env bash
# The remote level's faults, for real, against SeaweedFS on 127.0.0.1:
#  1. the server killed (-9) in the middle of an upload and back 10 s later:
#     the parts retry with backoff and the upload completes, equal bytes;
#  2. the uploader killed (-9) in the middle of an upload: the newest
#     committed checkpoint is still the previous one (no manifest, no
#     checkpoint), and the next start's orphan clean-up aborts the upload;
#  3. an S3 that answers 503 SlowDown / 500 to every other request (a small
#     proxy, tests/mpi/remote_slowdown.py): the upload and download retry
#     through it;
#  4. retries give up: a server that stays down fails in one line after
#     BOOST_S3_TRIES tries, and no checkpoint counts.
source "$(dirname "$0")/remote_common.bash"
# The server's restart (1.) needs a store that keeps its objects: moto's are in memory.
[ "$BOOST_S3_STORE" = seaweedfs ] ||
  { echo "SKIP: remote_faults restarts the server: SeaweedFS only (BOOST_S3_STORE=$BOOST_S3_STORE keeps objects in memory)"; exit 77; }
open_store s3://boost-fault/run
head -c 4000 /dev/urandom >"$T/ck2"
expect_line "pushed 2" rc "$U" push "$T/ck2" 2
head -c 31457280 /dev/urandom >"$T/ck4" # 30 MiB: 6 parts of 5 MiB

# 1. Server killed mid-upload, back 10 s later.
BOOST_S3_PART_MIB=5 BOOST_S3_TEST_PART_DELAY_MS=400 "$RC" "$U" push "$T/ck4" 4 1 >"$T/push.out" 2>"$T/push.err" &
up=$!
sleep 1.0
stop_server 9
t0=$(date +%s)
sleep 10
start_server
wait $up || fail "the upload did not survive the server's restart: $(cat "$T/push.err")"
echo "ok: upload completed across a server restart ($(( $(date +%s) - t0 )) s down and back)"
expect_line "newest 4 31457280 6 00112233445566778899aabbccddeeff" rc "$U" fetch "$T/got4"
cmp "$T/ck4" "$T/got4" || fail "the checkpoint uploaded across the restart differs"
expect_line "orphans 0" rc "$U" orphans

# 2. The uploader killed -9 mid-upload.
BOOST_S3_PART_MIB=5 BOOST_S3_TEST_PART_DELAY_MS=400 "$RC" "$U" push "$T/ck4" 6 1 >/dev/null 2>&1 &
up=$!
sleep 1.2
kill -9 $up
wait $up 2>/dev/null
expect_line "newest 4 31457280 6 00112233445566778899aabbccddeeff" rc "$U" newest
expect_line "orphans 1" rc "$U" orphans
expect_line "orphans 0" rc "$U" orphans
echo "ok: killed uploader: step 6 never counted, its upload aborted at the next start"

# 3. SlowDown and 500 from a proxy in front of the server.
PROXY_PORT=$((PORT0 + 5))
/usr/bin/python3 "$SRC/tests/mpi/remote_slowdown.py" "$PROXY_PORT" "$S3_PORT" >"$T/proxy.log" 2>&1 &
proxy=$!
for i in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/" && break; sleep 0.1; done
BOOST_S3_ENDPOINT=http://127.0.0.1:$PROXY_PORT BOOST_S3_PART_MIB=5 expect_line "pushed 8" rc "$U" push "$T/ck4" 8 3
BOOST_S3_ENDPOINT=http://127.0.0.1:$PROXY_PORT expect_line "newest 8 31457280 6 00112233445566778899aabbccddeeff" rc "$U" fetch "$T/got8" 3
cmp "$T/ck4" "$T/got8" || fail "the checkpoint through the proxy differs"
n503=$(grep -c SlowDown "$T/proxy.log")
[ "$n503" -ge 5 ] || fail "the proxy answered SlowDown only $n503 times"
kill $proxy; wait $proxy 2>/dev/null
echo "ok: through $n503 SlowDown and $(grep -c ' 500 ' "$T/proxy.log") HTTP 500 answers"

# 4. A server that stays down: one line after the tries, nothing committed.
stop_server 9
BOOST_S3_TRIES=3 "$RC" "$U" push "$T/ck2" 10 >/dev/null 2>"$T/err" && fail "a push to a dead server succeeded"
[ "$(wc -l <"$T/err")" = 1 ] && grep -q "after 3 tries" "$T/err" || fail "dead server: $(cat "$T/err")"
echo "ok: $(cat "$T/err")"
start_server
expect_line "newest 8 31457280 6 00112233445566778899aabbccddeeff" rc "$U" newest
echo "remote_faults: all passed"
