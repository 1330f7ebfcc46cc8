#!/usr/bin/env bash
# The local level on a node shared with another user (docs/LOCAL.md,
# "Security"). The victim's runs go as an unprivileged uid (so its default
# directory /dev/shm/boost-<uid> is its own and no other test's); the other
# user is nobody (65534), and root plants what no other user could (links
# inside the victim's own private folders). Each attempt is refused at the
# start with one line naming the path and what is wrong (the planted
# things left as they are), or passed over; a canary folder of the victim's,
# that every planted link points at, is the same byte for byte afterwards,
# and no checkpoint file is ever set aside (*.superseded).
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/local_common.bash"
[ "$(id -u)" = 0 ] || { echo "SKIP: acting as two local users needs root (setpriv)"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
[ -d /dev/shm ] || { echo "SKIP: no /dev/shm"; exit 77; }
V=64242 A=65534 # the victim, the other user
as_victim() { setpriv --reuid=$V --regid=$V --clear-groups env HOME="$vt" "$@"; }
as_other() { setpriv --reuid=$A --regid=$A --clear-groups "$@"; }
parent=/dev/shm/boost-$V
CLEANUP="rm -rf $parent"
rm -rf "$parent"
chmod 711 "$tmp"
make_data
chmod 644 "$tmp/f.tok"
vt=$tmp/victim
mkdir -p "$vt" && chown $V:$V "$vt"
as_victim test -r "$tmp/f.tok" -a -x "$TRAIN" ||
  { echo "SKIP: uid $V cannot reach $tmp or the build (a folder above them closed to other users)"; exit 77; }

# The canary: a folder of the victim's with files and a subfolder.
canary=$vt/canary
as_victim mkdir -p "$canary/sub"
for f in a b sub/c; do as_victim sh -c "head -c 4096 /dev/urandom >$canary/$f"; done
fingerprint() {
  (cd "$canary" && find . -printf '%p %y %m %u %s\n' | LC_ALL=C sort &&
    find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum
}
before=$(fingerprint)
intact() { # TAG: the canary unchanged, no checkpoint file set aside
  [ "$(fingerprint)" = "$before" ] || fail "$1: the canary folder changed: $(ls -lR "$canary")"
  [ -z "$(find "$vt" -name '*.superseded')" ] || fail "$1: a checkpoint set aside: $(find "$vt" -name '*.superseded')"
}

# vtrain LOG ARGS...: boost-train as the victim (one rank).
vtrain() {
  local log=$1
  shift
  as_victim "$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" --set ckpt.local_every=1 --set ckpt.every=2 "$@" \
    >"$log" 2>&1
}

# refused TAG WANT ARGS...: the start refused, non-zero, WANT the one error
# line, said once, nothing trained, the canary intact.
refused() {
  local tag=$1 want=$2 log=$tmp/$1.log
  shift 2
  if vtrain "$log" "$@"; then fail "$tag: the run started: $(grep checkpoint "$log" | head -3)"; fi
  # one line, the only error (stdout's last lines may follow it in the log)
  grep -qxF -- "boost-train: $want" "$log" || fail "$tag: $(grep -v '^ ' "$log" | tail -3)"
  [ "$(grep -cF -- "$want" "$log")" = 1 ] || fail "$tag: said more than once: $(grep -F -- "$want" "$log")"
  [ "$(grep -c "^boost-train: " "$log")" = 1 ] || fail "$tag: more than one error: $(grep "^boost-train: " "$log")"
  ! grep -q "^step " "$log" || fail "$tag: trained: $(grep "^step " "$log" | head -2)"
  intact "$tag"
  echo "ok: $tag: $(grep "^boost-train: " "$log")"
}

# The default directory: /dev/shm/boost-<uid>/<hash of ckpt.dir>, made 0700
# at both levels; the finished run leaves only its (empty) parent.
ck=$vt/ck
vtrain "$tmp/first.log" --set train.steps=2 --set ckpt.dir="$ck" || fail "first run: $(tail -3 "$tmp/first.log")"
root=$(sed -n 's/^checkpoint: local level every 1 step in \([^:]*\): .*/\1/p' "$tmp/first.log")
case "$root" in "$parent"/????????????????) ;; *) fail "default directory: '$root'" ;; esac
[ "$(stat -c '%u %a' "$parent")" = "$V 700" ] || fail "default parent: $(stat -c '%u %a' "$parent")"
[ ! -e "$root" ] || fail "the finished run left $root"
hash=${root##*/}
echo "ok: the default directory is $root, its parent 0700 and the victim's"

# plant DIR: rank_00000/step_00000001 in DIR a link to the canary (the
# retirement of step 1 would have emptied it).
plant() { mkdir -p "$1/rank_00000" && ln -s "$canary" "$1/rank_00000/step_00000001"; }

# 1. The other user made the parent first (mode 0777) and put the run's
#    folder in it, with a link at a step.
rm -rf "$parent"
as_other mkdir -m 0777 "$parent"
as_other bash -c "umask 0; $(declare -f plant); canary=$canary; plant $parent/$hash"
refused other-parent "ckpt.local_dir $parent: owned by uid $A, not by you (uid $V): remove it or set another ckpt.local_dir" \
  --set train.steps=4 --set ckpt.dir="$ck"
[ -L "$parent/$hash/rank_00000/step_00000001" ] || fail "other-parent: the planted link was removed"

# 2. The parent is the victim's but open to everyone (0777): the other user's folder in it.
rm -rf "$parent"
mkdir -m 0777 "$parent" && chown $V:$V "$parent" && chmod 0777 "$parent"
as_other bash -c "umask 0; $(declare -f plant); canary=$canary; plant $parent/$hash"
refused open-parent "ckpt.local_dir $parent: mode 0777 lets other users in (group or other permission bits): remove it or set another ckpt.local_dir" \
  --set train.steps=4 --set ckpt.dir="$ck"

# 3. A private parent, the run's folder in it owned by the other user (0777;
#    root plants it, as the other user could not get in).
rm -rf "$parent"
as_victim mkdir -m 0700 "$parent"
(umask 0 && plant "$parent/$hash") && chown -hR $A:$A "$parent/$hash"
refused other-root "ckpt.local_dir $parent/$hash: owned by uid $A, not by you (uid $V): remove it or set another ckpt.local_dir" \
  --set train.steps=4 --set ckpt.dir="$ck"
rm -rf "$parent/$hash"

# 4. A ckpt.local_dir in a shared folder, made first by the other user.
shared=$tmp/shared
mkdir -m 1777 "$shared" && chmod 1777 "$shared"
as_other bash -c "umask 0; $(declare -f plant); canary=$canary; mkdir $shared/lvl; plant $shared/lvl"
refused other-local-dir "ckpt.local_dir $shared/lvl: owned by uid $A, not by you (uid $V): remove it or set another ckpt.local_dir" \
  --set train.steps=4 --set ckpt.dir="$ck" --set ckpt.local_dir="$shared/lvl"

# ... and on two ranks as root (the other user's folder is refused by both
# ranks, which agree: one line).
refused_ranks() {
  # both ranks fail alike: the lowest one's line, with its rank
  local want="boost-train: rank 0: ckpt.local_dir $shared/lvl: owned by uid $A, not by you (uid 0): remove it or set another ckpt.local_dir"
  if train 2 "$tmp/ranks.log" --set ckpt.local_every=1 --set train.steps=4 --set ckpt.dir="$tmp/ck.ranks" \
    --set ckpt.local_dir="$shared/lvl"; then fail "ranks: the run started"; fi
  [ "$(grep -cxF -- "$want" "$tmp/ranks.log")" = 1 ] || fail "ranks: $(grep "^boost-train" "$tmp/ranks.log")"
  [ "$(grep -c "^boost-train: " "$tmp/ranks.log")" = 1 ] || fail "ranks: more than one error: $(grep "^boost-train" "$tmp/ranks.log")"
  [ -L "$shared/lvl/rank_00000/step_00000001" ] || fail "ranks: the planted link was removed"
  intact ranks
  echo "ok: two ranks: $want"
}
refused_ranks

# 5. Links inside the victim's own private level (root plants them: no
#    other user can get in): at the rank folder, then at a step.
lvl=$vt/lvl
as_victim mkdir -m 0700 "$lvl"
ln -s "$canary" "$lvl/rank_00000"
refused rank-link "ckpt.local_dir $lvl/rank_00000: a symbolic link, not a folder: remove it or set another ckpt.local_dir" \
  --set train.steps=4 --set ckpt.dir="$ck" --set ckpt.local_dir="$lvl"
[ -L "$lvl/rank_00000" ] || fail "rank-link: the planted link was removed"
rm "$lvl/rank_00000"
as_victim mkdir -m 0700 "$lvl/rank_00000"
ln -s "$canary" "$lvl/rank_00000/step_00000001"
refused step-link "ckpt.local_dir $lvl/rank_00000/step_00000001: a symbolic link, not a folder: remove it or set another ckpt.local_dir" \
  --set train.steps=4 --set ckpt.dir="$ck" --set ckpt.local_dir="$lvl"
rm -rf "$lvl"

# 6. A link at a part of a real local step (the run killed -9 after step
#    5): the restart passes the step over, naming the part, resumes from
#    the file and finishes; its retirement removes the link, not the canary.
ck6=$vt/ck6 lvl=$vt/lvl6
# setpriv and env exec: $! is boost-train itself
setpriv --reuid=$V --regid=$V --clear-groups env HOME="$vt" BOOST_TRAIN_TEST_STEP_DELAY_MS=300 "$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" --set ckpt.local_every=1 \
  --set ckpt.every=2 --set train.steps=40 --set ckpt.dir="$ck6" --set ckpt.local_dir="$lvl" \
  --set train.metrics="$vt/m6.jsonl" >"$tmp/part.1.log" 2>&1 &
pid=$!
CLEANUP="kill -9 $pid 2>/dev/null; rm -rf $parent"
wait_step "$vt/m6.jsonl" 5 120 || fail "part: step 5 never logged: $(tail -3 "$tmp/part.1.log")"
kill -9 $pid
wait $pid 2>/dev/null || true
newest=$(ls "$lvl/rank_00000" | grep -v tmp | tail -1)
[ -n "$newest" ] && [ -f "$lvl/rank_00000/$newest/params.bin" ] || fail "part: no local step: $(ls -R "$lvl")"
ln -sf "$canary/a" "$lvl/rank_00000/$newest/params.bin"
vtrain "$tmp/part.2.log" --set train.steps=8 --set ckpt.dir="$ck6" --set ckpt.local_dir="$lvl" ||
  fail "part: relaunch: $(tail -3 "$tmp/part.2.log")"
grep -q "checkpoints: resumed from $ck6/step_[0-9]*.h5 .*local step $((10#${newest#step_})) is damaged: .*$lvl/rank_00000/$newest/params.bin: a symbolic link, not a file" \
  "$tmp/part.2.log" || fail "part: $(grep checkpoints: "$tmp/part.2.log")"
[ ! -e "$lvl" ] || fail "part: the finished run left its local level: $(ls -lR "$lvl")"
intact part
echo "ok: a link at a part passed over ($(grep -o 'local step [0-9]* is damaged' "$tmp/part.2.log")), the file used, the link removed as a link"
echo "PASS: local_security"
