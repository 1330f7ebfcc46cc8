#!/usr/bin/env bash
# Quick start: install what is needed, build, tokenize the Debian `fortunes`
# corpus and train the tiny CoLA model on it (under a minute on 2 cores).
# Extra arguments go to boost-train, e.g. --set train.steps=50. It checkpoints
# into runs/quickstart/ckpt, so running it again resumes where it stopped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
build=${BOOST_BUILD_DIR:-$root/build}
mkdir -p "$root/data" "$root/runs/quickstart"
if [ ! -f "$root/data/fortunes.tok" ]; then
  "$build/tools/boost-data" -o "$root/data/fortunes.tok" /usr/share/games/fortunes
fi
cd "$root"
status=0
"$build/trainer/boost-train" --config examples/quickstart.ini "$@" || status=$?
cat <<EOF

Checkpoints: runs/quickstart/ckpt (the newest is named in runs/quickstart/ckpt/latest).
  look inside:     $build/tools/boost-inspect summary runs/quickstart/ckpt
  see the run:     $build/tools/boost-inspect plot runs/quickstart/ckpt -o runs/quickstart/loss.png
                   (training and validation loss, checkpoints, restarts, tokens/s)
  train further:   bash examples/quickstart.sh --set train.steps=600   (resumes at the last checkpoint)
  start over:      bash examples/quickstart.sh --set ckpt.resume=none
EOF
exit $status
