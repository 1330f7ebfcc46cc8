# The references a checkpoint read is measured against, shared by
# bench_ckpt_load.sh (the trainer's resume) and bench_ckpt_tools.sh (the
# offline tools): the disk (dd of the checkpoint), and a zstd file of the
# same tensors read (cat) and decoded on every core (zstd -d -T0), each from
# a cold page cache. Sourced; the caller sets BUILD, PRESET, PY, tmp and
# the checkpoint f, and names itself in BENCH_NAME.

cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }

secs() { # command...: its wall time; a failure stops the bench
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$tmp/cmd.log" 2>&1 || { echo "$BENCH_NAME: failed: $* : $(tail -3 "$tmp/cmd.log")" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}

# The zstd file of f's weights and moments (boost-inspect --dump-category,
# plain `zstd -1 -T0`: no shuffle, so larger than the checkpoint) in
# $tmp/state.zst, its raw size in $raw, and the machine and sizes printed
# (ARG: what the caller adds to the sizes' line).
reference_prepare() {
  local cat
  for cat in weights moments; do "$BUILD/tools/boost-inspect" --dump-category $cat "$tmp/$cat.raw" "$f" >/dev/null; done
  cat "$tmp/weights.raw" "$tmp/moments.raw" | zstd -1 -T0 -q -c >"$tmp/state.zst"
  raw=$(($(stat -c %s "$tmp/weights.raw") + $(stat -c %s "$tmp/moments.raw")))
  rm -f "$tmp/weights.raw" "$tmp/moments.raw"
  echo "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) | disk: $(df -h "$tmp" | awk 'NR==2{print $1}')"
  echo "$PRESET: tensors $raw bytes raw, checkpoint $(stat -c %s "$f") bytes, zstd -1 file $(stat -c %s "$tmp/state.zst") bytes${1:-}"
}

reference_round() { # one cold read of each reference into $tmp/times
  cold; echo "dd $(secs dd if="$f" of=/dev/null bs=8M status=none)" >>"$tmp/times"
  cold; echo "cat $(secs sh -c "cat '$tmp/state.zst' >/dev/null")" >>"$tmp/times"
  cold; echo "zstd $(secs zstd -d -T0 -q -c "$tmp/state.zst" -o /dev/null)" >>"$tmp/times"
}

# The table of $tmp/times: per row the median (and the runs), GB/s of
# tensors, the ratio to the slower of zstd and cat, and with `before` the
# ratio to the row's "_before" twin. ARGS: the rows in order.
reference_table() {
  "$PY" - "$tmp/times" "$raw" "${BEFORE_COLUMN:-0}" "$@" <<'PYEOF'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    t.setdefault(k, []).append(float(v))
raw, before = float(sys.argv[2]), sys.argv[3] == "1"
med = {k: statistics.median(v) for k, v in t.items()}
ref = max(med["zstd"], med["cat"])
print("| | median s (runs) | GB/s of tensors | / the slower of zstd -d and cat |" + (" / before |" if before else ""))
print("|---|---:|---:|---:|" + ("---:|" if before else ""))
for k in sys.argv[4:]:
    if k not in med:
        continue
    row = "| %s | %.2f (%s) | %.2f | %.2fx |" % (k, med[k], " ".join("%.2f" % x for x in t[k]), raw / med[k] / 1e9,
                                               med[k] / ref)
    if before:
        b = med.get(k + "_before")
        row += " %s |" % ("%.2fx" % (med[k] / b) if b else "")
    print(row)
PYEOF
}
