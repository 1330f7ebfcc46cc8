#!/usr/bin/env bash
# The Python packages the tests check boost's outputs with: boost-export's
# folders (docs/EXPORT.md) need Debian's CPU-only PyTorch (python3-torch
# 1.13, via apt: 755 MB installed, no CUDA libraries) and, in a virtual
# environment on top of it (.cache/pyenv, git-ignored; BOOST_PYENV
# overrides), the transformers release tested with it and safetensors from
# PyPI (159 MB); the tokenizer tests compare with tiktoken and the
# TensorBoard tests read boost's event files with tensorboard's own reader.
# PyPI's default torch wheel would bring several GB of CUDA libraries.
#
# Never fails: where a package cannot be installed (no network, no root)
# it says so and exits 0, and the test skips (exit 77) with the reason.
# Does nothing when the environment already works.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
env=${BOOST_PYENV:-$root/.cache/pyenv}
py=/usr/bin/python3 # Debian's python3-torch, -h5py and -numpy belong to this interpreter
pins=(transformers==4.44.2 safetensors==0.8.0 tiktoken==0.14.0 tensorboard==2.21.0)
probe='import torch, transformers, safetensors, h5py, numpy, tiktoken, tensorboard'
give_up() { echo "setup-pyenv: $* (the tests that need it will skip)"; exit 0; }

if [ -x "$env/bin/python" ] && "$env/bin/python" -c "$probe" 2>/dev/null; then
  echo "setup-pyenv: $env ready"
  exit 0
fi
if ! "$py" -c 'import torch' 2>/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup-pyenv: installing python3-torch (Debian, CPU only)"
  $sudo apt-get update -qq >/dev/null 2>&1
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-torch python3-venv \
    >/dev/null || give_up "apt-get could not install python3-torch"
fi
if [ ! -x "$env/bin/pip" ]; then
  rm -rf "$env"
  mkdir -p "$(dirname "$env")"
  "$py" -m venv --system-site-packages "$env" || give_up "cannot create the virtual environment $env"
fi
echo "setup-pyenv: installing ${pins[*]} into $env"
"$env/bin/pip" install -q --disable-pip-version-check --timeout 30 --retries 2 "${pins[@]}" ||
  give_up "pip could not install ${pins[*]} (is PyPI reachable?)"
"$env/bin/python" -c "$probe" || give_up "$env does not import: $probe"
echo "setup-pyenv: $env ready"
