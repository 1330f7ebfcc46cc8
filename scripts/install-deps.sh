#!/usr/bin/env bash
# Installs the Debian 12 packages boost builds, tests and trains with.
# Runs as root (or through sudo); does nothing when everything is present.
set -euo pipefail
pkgs=(build-essential cmake pkg-config git
      libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools
      libzstd-dev zstd libcriterion-dev libopenblas-dev libopenblas-openmp-dev
      libdnnl-dev
      libcjson-dev libinih-dev libxxhash-dev
      libpcre2-dev # BPE pre-tokenizers (Unicode properties)
      libcurl4-openssl-dev curl # the remote level: HTTP, TLS, SigV4 (ckpt/remote/s3_client.h)
      fortunes python3-h5py python3-numpy
      gnuplot-nox) # boost-inspect plot
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
else
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# On CPUs with AMX tiles the bf16 GEMMs want oneDNN 3.x (scripts/fetch-onednn3.sh
# says why); BOOST_ONEDNN=debian keeps Debian's everywhere.
if [ "${BOOST_ONEDNN:-auto}" != debian ] && grep -qw amx_bf16 /proc/cpuinfo; then
  bash "$(dirname "$0")/fetch-onednn3.sh" ||
    echo "install-deps: the build keeps Debian's oneDNN 2.6 (bf16 GEMMs mostly without AMX)" >&2
fi
