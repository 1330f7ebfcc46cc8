"""Reads a run's TensorBoard folder with tensorboard's own reader and checks
it against what the run logged elsewhere (tests/mpi/tensorboard.sh).

  tensorboard_check.py same DIR METRICS JOURNAL LOG   every scalar = the metrics JSONL,
                                                      checkpoints.jsonl and the step lines
  tensorboard_check.py resumed DIR METRICS STEPS      a killed and resumed run
  tensorboard_check.py local DIR METRICS STEPS FROM   two ranks resumed from the local level at FROM
  tensorboard_check.py rollback DIR METRICS STEPS STARTS   a run the guard rolled back (its files' first steps)
Exit 0 when it holds; an AssertionError names what does not."""
import glob
import json
import os
import re
import struct
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def scalars(d):
    ea = EventAccumulator(d, size_guidance={"scalars": 0})  # 0: keep every value
    ea.Reload()
    return {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}


def by_step(values, tag):
    steps = [s for s, _ in values]
    assert len(steps) == len(set(steps)), f"{tag}: a step twice: {steps}"
    return dict(values)


def metrics(path):
    """The metrics JSONL's last line per step (a resumed run appends), and every line."""
    rows = [json.loads(l) for l in open(path)]
    return {r["step"]: r for r in rows}, rows


def files(d):
    paths = sorted(glob.glob(os.path.join(d, "events.out.tfevents.*")))
    per_file = []
    for p in paths:
        evs = list(EventFileLoader(p).Load())  # checks both CRCs of every record
        assert evs[0].file_version == "brain.Event:2", f"{p}: first record {evs[0]}"
        assert evs[1].session_log.status == 1, f"{p}: no SessionLog START second"
        tags = {}
        for e in evs[2:]:
            for v in e.summary.value:
                tags.setdefault(v.tag, []).append(e.step)
        for tag, steps in tags.items():  # the guard's: a rollback's file rewrites the abandoned steps' first
            if not tag.startswith("guard/"):
                assert all(a < b for a, b in zip(steps, steps[1:])), f"{p}: {tag} steps not increasing: {steps}"
        per_file.append((p, evs[1].step, tags))
    return per_file


def same(d, metrics_path, journal_path, log_path):
    tb = scalars(d)
    last, rows = metrics(metrics_path)
    assert len(rows) == len(last), "the run logged a step twice"
    pairs = [("train/loss", "loss"), ("train/lr", "lr"), ("train/grad_norm", "grad_norm"),
             ("perf/tokens_per_s", "tokens_per_s"), ("perf/mfu", "mfu"), ("perf/step_ms", "step_ms")]
    for tag, key in pairs:
        got = by_step(tb[tag], tag)
        assert sorted(got) == sorted(last), f"{tag}: steps {sorted(got)} vs the metrics' {sorted(last)}"
        for s, r in last.items():
            assert got[s] == f32(r[key]), f"{tag} at step {s}: {got[s]} vs {r[key]}"
    got = by_step(tb["perf/tflops"], "perf/tflops")
    for s, r in last.items():
        assert got[s] == f32(r["gflops"] / 1e3), f"perf/tflops at {s}: {got[s]} vs {r['gflops']}"
    got = by_step(tb["val/loss"], "val/loss")
    want = {s: r["val_loss"] for s, r in last.items() if "val_loss" in r}
    assert len(want) >= 2 and sorted(got) == sorted(want), f"val/loss steps {sorted(got)} vs {sorted(want)}"
    assert all(got[s] == f32(v) for s, v in want.items()), "val/loss values"
    got = by_step(tb["mem/peak_rss_mib"], "mem/peak_rss_mib")
    for s, r in last.items():  # the high-water mark, read a moment after the metrics line's
        assert r["peak_rss_mib"] * 0.999 <= got[s] <= r["peak_rss_mib"] * 1.05 + 1, f"peak RSS at {s}"
    saves = [json.loads(l) for l in open(journal_path)]
    saves = {j["step"]: j for j in saves if "committed" in j}
    assert len(saves) >= 2, f"checkpoints.jsonl: {saves}"
    for tag, key in [("ckpt/stall_s", "stall_s"), ("ckpt/write_s", "write_s"), ("ckpt/wait_prev_s", "wait_prev_s")]:
        got = by_step(tb[tag], tag)
        assert sorted(got) == sorted(saves), f"{tag}: steps {sorted(got)} vs checkpoints.jsonl's {sorted(saves)}"
        assert all(got[s] == f32(j[key]) for s, j in saves.items()), f"{tag} values"
    assert by_step(tb["ckpt/committed"], "c") == {s: 1.0 for s in saves}
    assert tb["restart/level"] == [(1, 0.0)], tb["restart/level"]  # a fresh start
    # the step line's MFU is the metrics' (rounded as printed)
    line_mfu = {int(m.group(1)): m.group(2) for m in re.finditer(r"^step +(\d+)/\d+ .*\| MFU ([0-9.]+)% \|", open(log_path).read(), re.M)}
    assert sorted(line_mfu) == sorted(last), f"step lines with MFU: {sorted(line_mfu)}"
    assert all(line_mfu[s] == f"{last[s]['mfu']:.1f}" for s in last), "the step line's MFU"
    assert len(files(d)) == 1
    print(f"ok: {len(tb)} tags, {len(last)} steps, {len(saves)} checkpoints: every value as logged")


def steps_once(d, metrics_path, steps):
    tb = scalars(d)
    last, rows = metrics(metrics_path)
    for tag, key in [("train/loss", "loss"), ("train/grad_norm", "grad_norm"), ("train/lr", "lr")]:
        got = by_step(tb[tag], tag)
        assert sorted(got) == list(range(1, steps + 1)), f"{tag}: steps {sorted(got)}"
        for s in got:  # the last training of each step
            assert got[s] == f32(last[s][key]), f"{tag} at {s}: {got[s]} vs the last logged {last[s][key]}"
    return tb, rows


def resumed(d, metrics_path, steps):
    steps = int(steps)
    tb, rows = steps_once(d, metrics_path, steps)
    per_file = files(d)
    assert len(per_file) == 2, f"{len(per_file)} event files, expected one per start"
    (_, start1, tags1), (_, start2, tags2) = per_file
    first_run = max(tags1["train/loss"])
    assert start1 == 1 and start2 < first_run, f"the resume starts at {start2}, the killed run reached {first_run}"
    assert min(tags2["train/loss"]) == start2 and max(tags2["train/loss"]) == steps
    redone = [r["step"] for r in rows].count(start2)
    assert redone == 2, f"step {start2} trained {redone} times: the test did not redo steps"
    assert by_step(tb["restart/level"], "l") == {1: 0.0, start2: 3.0}, tb["restart/level"]  # fresh, then the file
    assert by_step(tb["restart/from_step"], "f") == {1: 0.0, start2: start2 - 1.0}
    print(f"ok: killed at step {first_run}, resumed from {start2 - 1}: steps 1-{steps} once each, "
          f"steps {start2}-{first_run} from the resumed run")


def local(d, metrics_path, steps, resumed_from):
    steps, r = int(steps), int(resumed_from)
    tb, rows = steps_once(d, metrics_path, steps)
    per_file = files(d)
    assert len(per_file) == 2 and per_file[1][1] == r + 1, f"files start at {[f[1] for f in per_file]}, resumed from {r}"
    assert by_step(tb["restart/level"], "l") == {1: 0.0, r + 1: 1.0}, tb["restart/level"]  # fresh, then the local level
    stalls = by_step(tb["ckpt/local_stall_s"], "s")
    # every save of the resumed run (the killed run's last one may not have been known when it died)
    assert set(range(r + 1, steps + 1)) <= set(stalls) and all(1 <= s <= steps and v >= 0 for s, v in stalls.items()), stalls
    print(f"ok: two ranks, resumed from the local level at step {r}: steps 1-{steps} once each, "
          f"{len(stalls)} local saves' stalls")


def rollback(d, metrics_path, steps, starts):
    steps = int(steps)
    tb, rows = steps_once(d, metrics_path, steps)
    per_file = files(d)
    want = [int(x) for x in starts.split(",")]
    assert [f[1] for f in per_file] == want, f"files start at {[f[1] for f in per_file]}, not {want}: one per start and rollback"
    # first branch: batch 7 flagged (it would have been step 8), batch 8 step 8, batches 9 and 10 flagged at
    # step 9: back to 4; second branch: batch 13 at step 7, batches 15 and 16 at step 8: back to 4 again.
    # Every flagged step of both abandoned branches, each step once.
    assert by_step(tb["guard/flagged"], "g") == {7: 1.0, 8: 3.0, 9: 2.0}, tb["guard/flagged"]
    assert by_step(tb["guard/rollback_to"], "r") == {8: 4.0, 9: 4.0}, tb["guard/rollback_to"]
    # GUARD_LOSS_RATIO (8): the spiked loss is far above the window's largest (the z-scores are still warming up)
    assert by_step(tb["guard/flag_reasons"], "r") == {7: 8.0, 8: 8.0, 9: 8.0}, tb["guard/flag_reasons"]
    print(f"ok: rolled back twice to step 4: steps 1-{steps} once each, every flagged step and rollback kept")


if __name__ == "__main__":
    {"same": same, "resumed": resumed, "local": local, "rollback": rollback}[sys.argv[1]](*sys.argv[2:])
