#!/usr/bin/env bash
# The remote level against a second S3-compatible store, moto's server
# (scripts/setup-moto.sh; signatures checked), with the same checks as
# against SeaweedFS: tests/mpi/remote_s3.sh (a multipart upload of 5 parts
# over 3 connections downloaded by ranged GETs and equal byte for byte, a
# data object without manifest ignored, retention, a corrupted part refused,
# paged listings at 2 keys a page, orphaned uploads aborted, one line each
# for a missing bucket, wrong credentials and bad settings) and
# tests/mpi/remote_train.sh (a 2-rank run uploading, its ckpt.dir deleted,
# a fresh 1-rank start downloading from the remote, losses equal to the
# resume from the file; the tools on s3:// URLs; refusals at start).
# The fault tests (server killed and restarted) stay on SeaweedFS: moto
# keeps its objects in memory.
export BOOST_S3_STORE=moto
here=$(dirname "$0")
bash "$here/remote_s3.sh" || exit $?
bash "$here/remote_train.sh" || exit $?
echo "remote_store_moto: all passed"
