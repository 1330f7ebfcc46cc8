#!/usr/bin/env bash
# The peer a user would install: PyPI's torch wheel and transformers, in a
# virtual environment OUTSIDE the repository, for the benchmarks that
# compare boost against PyTorch (bench_vs_torch.sh, bench_generate.sh,
# bench_step_limits.sh). Several GB to download (the default Linux wheel
# carries CUDA libraries), so neither CI nor the test suite runs this;
# Debian's python3-torch stays what the export test uses.
#
#   bash bench/install_peer.sh [VENV]
#
# VENV (or BOOST_PEER_VENV) defaults to /opt/boost-peer. Versions:
# BOOST_PEER_TORCH (default 2.15.0), BOOST_PEER_TRANSFORMERS (default
# 5.25.0); an empty value takes the newest. Idempotent: an environment that
# already imports both at the asked versions is left as it is. Prints the
# environment's python on success, which the benches take as
# BOOST_PEER_PYTHON (their default is /opt/boost-peer/bin/python when it
# exists).
set -euo pipefail
VENV=${1:-${BOOST_PEER_VENV:-/opt/boost-peer}}
TORCH=${BOOST_PEER_TORCH-2.15.0}
TRANSFORMERS=${BOOST_PEER_TRANSFORMERS-5.25.0}
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "install_peer: $*" >&2; exit 1; }
case "$(cd "$(dirname "$VENV")" 2>/dev/null && pwd)/" in
  "$root"/*) die "$VENV is inside the repository; pick a folder outside it" ;;
esac
spec() { [ -n "$2" ] && echo "$1==$2" || echo "$1"; }
want_torch=$(spec torch "$TORCH")
want_tf=$(spec transformers "$TRANSFORMERS")

have() { # have: the venv imports torch and transformers at the wanted versions
  "$VENV/bin/python" - "$TORCH" "$TRANSFORMERS" 2>/dev/null <<'PY'
import sys, torch, transformers
t, f = sys.argv[1], sys.argv[2]
ok = (not t or torch.__version__.split("+")[0] == t) and (not f or transformers.__version__ == f)
sys.exit(0 if ok else 1)
PY
}
if have; then
  echo "$VENV/bin/python"
  exit 0
fi
command -v python3 >/dev/null || die "no python3 on PATH"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || die "could not create a virtual environment at $VENV"
echo "install_peer: installing $want_torch and $want_tf into $VENV (several GB, once)" >&2
"$VENV/bin/pip" install -q --upgrade pip >/dev/null 2>&1 || true
"$VENV/bin/pip" install -q "$want_torch" "$want_tf" safetensors ||
  die "pip could not install $want_torch $want_tf into $VENV"
have || die "$VENV does not import torch and transformers at the asked versions after installing"
"$VENV/bin/python" -c 'import torch, transformers; print("install_peer: torch", torch.__version__, "transformers", transformers.__version__, "oneDNN bf16:", torch.backends.mkldnn.is_available())' >&2
echo "$VENV/bin/python"
