"""oneDNN's execution time by implementation, from a log with ONEDNN_VERBOSE
lines (bench/bench_onednn_share.sh runs it; usage: onednn_share.py LOG STEPS TOP).

Reads both formats: oneDNN 2.x/3.0-3.2 write
  onednn_verbose,exec,cpu,matmul,IMPL,PROP,MDS,ATTRS,AUX,PROBLEM,MS
(2.x's memory descriptors without strides, e.g. src_bf16::blocked:ab:f0;
3.x's with them when not dense, e.g. src_bf16::blocked:ab:384x1:f0), later
3.x put "primitive" (and with ONEDNN_VERBOSE_TIMESTAMP a time stamp) before
"exec"; older 2.x say dnnl_verbose. The fields are found from "exec" on.
STEPS 0 takes the step count from the trainer's step lines.
"""
import re
import statistics
import sys


def short_md(md):
    """src_bf16::blocked:ab:384x1:f0 -> src_bf16 ab:384x1 (2.x: src_bf16 ab)."""
    md = re.sub(r":*f\d+$", "", md)
    return md.replace("::blocked:", " ")


def strided(mds, version):
    """3.x prints an operand's strides only when they are not the dense ones; 2.x never."""
    if version.startswith("v2"):
        return "?"
    return "yes" if any(re.search(r"::blocked:[a-z]+:\d+(x\d+)+", md) for md in mds.split()) else "-"


def parse(path):
    version, isa, calls, toks, last_step = "?", "?", [], [], 0
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        m = re.match(r"step\s+(\d+)/\d+ \|.*\| ([\d.]+) tok/s", line)
        if m:
            last_step = max(last_step, int(m.group(1)))
            toks.append(float(m.group(2)))
            continue
        if not line.startswith(("onednn_verbose,", "dnnl_verbose,")):
            continue
        f = line.split(",")
        if "info" in f[1:5]:
            v = re.search(r"oneDNN (v[\d.]+)", line)
            version = v.group(1) if v else version
            if "isa:" in line:
                isa = line.split("isa:", 1)[1]
            continue
        if "exec" not in f[1:6]:
            continue
        i = f.index("exec", 1)
        if len(f) < i + 10:
            continue
        try:
            ms = float(f[-1])
        except ValueError:
            continue
        kind, impl, mds, attrs, problem = f[i + 2], f[i + 3], f[i + 5], f[i + 6].strip(), f[i + 8]
        calls.append((kind, impl, mds, attrs, problem, ms))
    return version, isa, calls, toks, last_step


def main():
    path, steps, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    version, isa, calls, toks, last_step = parse(path)
    if not calls:
        print("bench_onednn_share: no oneDNN execution lines in %s (is the build linked to oneDNN, and the run bf16?)"
              % path, file=sys.stderr)
        return 1
    steps = steps or last_step
    note = ""
    if not steps:
        steps, note = 1, " (no step lines: per step means per log)"
    total = sum(c[5] for c in calls)
    print("oneDNN %s, isa: %s" % (version, isa))
    tok = " | step median %.0f tok/s (steps 2.., under verbose)" % statistics.median(toks[1:]) if len(toks) > 1 else ""
    print("%d steps%s | %d calls | oneDNN execution time %.0f ms/step (summed over threads)%s"
          % (steps, note, len(calls), total / steps, tok))
    print()
    by_impl = {}
    for kind, impl, _, _, _, ms in calls:
        e = by_impl.setdefault("%s %s" % (kind, impl), [0, 0.0])
        e[0] += 1
        e[1] += ms
    print("| implementation | share of oneDNN time | calls/step | ms/step |")
    print("|---|---:|---:|---:|")
    for name, (n, ms) in sorted(by_impl.items(), key=lambda kv: -kv[1][1]):
        print("| %s | %.1f %% | %.1f | %.1f |" % (name, 100 * ms / total, n / steps, ms / steps))
    slow = {}
    for kind, impl, mds, attrs, problem, ms in calls:
        if impl.startswith("brg"):
            continue
        e = slow.setdefault((impl, problem, mds, attrs), [0, 0.0])
        e[0] += 1
        e[1] += ms
    if not slow:
        print("\nevery call ran on brgemm")
        return 0
    rows = sorted(slow.items(), key=lambda kv: -kv[1][1])
    print("\ntop %d of %d shapes/layouts outside brgemm (%.1f %% of oneDNN time):"
          % (min(top, len(rows)), len(rows), 100 * sum(v[1] for v in slow.values()) / total))
    print("| implementation | problem | layouts (src wei dst) | strided (2.x: ?) | share | calls/step |")
    print("|---|---|---|---|---:|---:|")
    for (impl, problem, mds, attrs), (n, ms) in rows[:top]:
        layouts = ", ".join(short_md(md) for md in mds.split()) + (" +" + attrs if attrs else "")
        print("| %s | %s | %s | %s | %.1f %% | %.1f |"
              % (impl, problem, layouts, strided(mds, version), 100 * ms / total, n / steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
