#!/usr/bin/env bash
# Quick start: install what is needed, build, tokenize the Debian `fortunes`
# corpus and train the tiny CoLA model on it (a few minutes on 2 cores).
# Extra arguments go to boost-train, e.g. --set train.steps=50.
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
exec "$build/trainer/boost-train" --config examples/quickstart.ini "$@"
