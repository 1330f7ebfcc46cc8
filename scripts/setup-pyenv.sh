#!/usr/bin/env bash
# The Python packages the tests check boost's outputs with: boost-export's
# folders (docs/EXPORT.md) need Debian's CPU-only PyTorch (python3-torch
# 1.13, via apt: 755 MB installed, no CUDA libraries) and, in a virtual
# environment on top of it (.cache/pyenv, git-ignored; BOOST_PYENV
# overrides), the transformers release tested with it and safetensors from
# PyPI (159 MB); the tokenizer tests compare with tiktoken and the
# TensorBoard tests read boost's event files with tensorboard's own reader.
# PyPI's default torch wheel would bring several GB of CUDA libraries.
# It also fetches GPT-2's BPE rank file (the BPE tests and examples/ use it)
# into .cache/tokenizers/gpt2.tiktoken: PyPI's openai-whisper source archive
# (800 KB, downloaded without dependencies and never built) holds it as
# whisper/assets/gpt2.tiktoken; its SHA-256 is the one tiktoken pins for
# r50k_base.tiktoken.
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
ranks=${BOOST_GPT2_RANKS:-$root/.cache/tokenizers/gpt2.tiktoken}
ranks_sha=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
# GPT-2's rank file from the openai-whisper sdist; says why where it cannot.
fetch_gpt2_ranks() {
  if [ -s "$ranks" ] && echo "$ranks_sha  $ranks" | sha256sum -c --status; then
    echo "setup-pyenv: $ranks ready"
    return 0
  fi
  local d
  d=$(mktemp -d) || return 0
  if "$env/bin/pip" download -q --disable-pip-version-check --timeout 30 --retries 2 --no-deps --no-binary=:all: \
    openai-whisper==20250625 -d "$d" >/dev/null 2>&1 &&
    tar -xzf "$d/openai_whisper-20250625.tar.gz" -C "$d" openai_whisper-20250625/whisper/assets/gpt2.tiktoken 2>/dev/null &&
    echo "$ranks_sha  $d/openai_whisper-20250625/whisper/assets/gpt2.tiktoken" | sha256sum -c --status; then
    mkdir -p "$(dirname "$ranks")" && mv "$d/openai_whisper-20250625/whisper/assets/gpt2.tiktoken" "$ranks" &&
      echo "setup-pyenv: $ranks fetched"
  else
    echo "setup-pyenv: could not fetch GPT-2's rank file from PyPI's openai-whisper (the BPE tests will skip)"
  fi
  rm -rf "$d"
}

if [ -x "$env/bin/python" ] && "$env/bin/python" -c "$probe" 2>/dev/null; then
  echo "setup-pyenv: $env ready"
  fetch_gpt2_ranks
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
fetch_gpt2_ranks
