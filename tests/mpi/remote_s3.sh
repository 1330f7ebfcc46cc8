#!/usr/bin/env bash
# The remote level against a real S3-compatible server (SeaweedFS, or the
# store BOOST_S3_STORE names, see remote_common.bash, on
# 127.0.0.1): a checkpoint file uploaded in parts by several connections
# with its manifest last, found as the newest, downloaded by ranged GETs and
# checked; a data object without a manifest never counts; retention; paged
# listings (2 keys a page); orphaned multipart uploads aborted; a corrupted
# part refused; one line each for a missing bucket, wrong credentials, no
# credentials, a bad URL, and no secret in any of them.
source "$(dirname "$0")/remote_common.bash"
open_store s3://boost-test/run-a
expect_line "newest none" rc "$U" newest
head -c 23000000 /dev/urandom >"$T/ck4"
BOOST_S3_PART_MIB=5 expect_line "pushed 4" rc "$U" push "$T/ck4" 4 3
expect_line "newest 4 23000000 5 00112233445566778899aabbccddeeff" rc "$U" newest
expect_line "newest 4 23000000 5 00112233445566778899aabbccddeeff" rc "$U" fetch "$T/got4" 3
cmp "$T/ck4" "$T/got4" || fail "the downloaded checkpoint differs from the uploaded one"
echo "ok: 23 MB in 5 parts over 3 connections, downloaded and equal"

# A data object without its manifest is not a checkpoint.
head -c 1000 /dev/urandom >"$T/small"
rc "$U" put run-a/step_000000000009/ckpt.h5 "$T/small" || fail "put"
expect_line "newest 4 23000000 5 00112233445566778899aabbccddeeff" rc "$U" newest
echo "ok: step 9's data without a manifest is not taken"

# Retention keeps the 2 newest committed ones; the manifest-less step 9 is not one.
head -c 3000 /dev/urandom >"$T/ck6"
head -c 5000 /dev/urandom >"$T/ck8"
rc "$U" push "$T/ck6" 6 >/dev/null && rc "$U" push "$T/ck8" 8 >/dev/null || fail "push 6, 8"
rc "$U" retain 2 || fail "retain"
expect_line "count 5" rc "$U" count run-a/
expect_line "newest 8 5000 1 00112233445566778899aabbccddeeff" rc "$U" newest
echo "ok: retention kept steps 6 and 8"

# A part that does not match its checksum is refused, nothing left behind.
head -c 5000 /dev/urandom >"$T/bad8"
rc "$U" put run-a/step_000000000008/ckpt.h5 "$T/bad8" || fail "put"
rc "$U" fetch "$T/got8" 2>"$T/err" && fail "a corrupted part was taken"
grep -q "part 1 does not match its checksum" "$T/err" || fail "corrupt: $(cat "$T/err")"
[ ! -e "$T/got8" ] && [ ! -e "$T/got8.part" ] || fail "a refused download left a file"
echo "ok: corrupted part refused: $(cat "$T/err")"

# Listings past a page: 7 keys, 2 a page; 3 orphaned uploads, 2 a page.
for i in 1 2 3 4 5 6 7; do rc "$U" put "run-a/many/k$i" "$T/small" || fail "put k$i"; done
BOOST_S3_LIST_MAX=2 expect_line "count 7" rc "$U" count run-a/many/
pages() { grep -c "GET /boost-test/?$1" "$T/server.log"; } # moto logs every request it answers
if [ "$BOOST_S3_STORE" = moto ]; then
  [ "$(pages '.*list-type=2&max-keys=2&prefix=run-a/many/ ')" = 4 ] ||
    fail "7 keys at 2 a page were not listed in 4 pages: $(grep 'run-a/many/ ' "$T/server.log")"
fi
for i in 1 2 3; do rc "$U" start-upload "run-a/step_00000000002$i/ckpt.h5" >/dev/null || fail "start-upload"; done
rc s3://boost-test/other start-upload other/x >/dev/null || fail "start-upload other"
BOOST_S3_LIST_MAX=2 expect_line "orphans 3" rc "$U" orphans
expect_line "orphans 0" rc "$U" orphans
expect_line "orphans 1" rc s3://boost-test/other orphans
if [ "$BOOST_S3_STORE" = moto ]; then
  # moto 5.2.5 ignores max-uploads: all 3 uploads in one page (not truncated), then the empty pass.
  [ "$(pages 'max-uploads=2&prefix=run-a/&uploads= ')" = 2 ] ||
    fail "moto paged the uploads: $(grep 'max-uploads=2' "$T/server.log") (docs/REMOTE.md says it does not)"
  echo "ok: paged listing (7 keys in 4 pages); 3 uploads (moto answers them in one page); only the prefix's orphans aborted"
else
  echo "ok: paged listings (7 keys, 3 uploads at 2 a page); only the prefix's orphans aborted"
fi

# A prefix with characters that URLs and signatures encode: uploaded,
# found, downloaded, listed one key a page (its continuation tokens and
# markers carry them), its orphans aborted.
odd="exp=1+lr/a b/q&r;s,t'u(v)w*!~ü"
V="s3://boost-test/$odd"
rc "$V" push "$T/ck6" 6 >/dev/null || fail "push under '$odd'"
rc "$V" fetch "$T/got6" >/dev/null && cmp "$T/ck6" "$T/got6" || fail "the download under '$odd' differs"
for i in 1 2 3; do rc "$V" put "$odd/many/k$i" "$T/small" || fail "put under '$odd'"; done
BOOST_S3_LIST_MAX=1 expect_line "count 3" rc "$V" count "$odd/many/"
for i in 1 2; do rc "$V" start-upload "$odd/step_00000000003$i/ckpt.h5" >/dev/null || fail "start-upload"; done
BOOST_S3_LIST_MAX=1 expect_line "orphans 2" rc "$V" orphans
echo "ok: prefix '$odd': push, fetch, listings at 1 a page, orphans"

# One line each, no secret in any.
one_line() { # WANT-REGEX CMD...
  local want=$1
  shift
  "$@" >"$T/out" 2>"$T/err" && fail "$* succeeded"
  [ "$(wc -l <"$T/err")" = 1 ] || fail "$*: not one line: $(cat "$T/err")"
  grep -qE "$want" "$T/err" || fail "$*: $(cat "$T/err")"
  ! grep -qF -e "$S3_SECRET" -e wrongsecret "$T/err" "$T/out" || fail "a secret was printed"
  echo "ok: $(cat "$T/err")"
}
one_line "bucket 'no-such-bucket' does not exist" rc s3://no-such-bucket/x newest
AWS_SECRET_ACCESS_KEY=wrongsecret one_line "access denied \(HTTP 403" rc "$U" newest
AWS_ACCESS_KEY_ID= AWS_SECRET_ACCESS_KEY= HOME=$T/nohome one_line "no S3 credentials" rc "$U" newest
one_line "is not an s3://BUCKET/PREFIX URL" rc http://x/y newest
one_line "a bucket name has only" rc s3://Bad_Bucket/x newest
BOOST_S3_ENDPOINT=ftp://x one_line "is not an http:// or https:// URL" rc "$U" newest
BOOST_S3_REGION='us east' one_line "is not a region name" rc "$U" newest

# Credentials from a shared credentials file and a profile.
mkdir -p "$T/home/.aws"
printf '[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n[ci]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
  "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$T/home/.aws/credentials"
AWS_ACCESS_KEY_ID= AWS_SECRET_ACCESS_KEY= HOME=$T/home AWS_PROFILE=ci expect_line "newest 8 5000 1 00112233445566778899aabbccddeeff" rc "$U" newest
AWS_ACCESS_KEY_ID= AWS_SECRET_ACCESS_KEY= HOME=$T/home one_line "access denied" rc "$U" newest
echo "ok: credentials from ~/.aws/credentials, profile chosen by AWS_PROFILE"
echo "remote_s3: all passed"
