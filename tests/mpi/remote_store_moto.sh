#!/usr/bin/env bash
# The remote level against a second S3-compatible store, moto's server
# (scripts/setup-moto.sh; signatures checked), with the same checks as
# against SeaweedFS:
#  - remote_s3.sh: a multipart upload of 5 parts over 3 connections,
#    downloaded by ranged GETs and equal byte for byte; a data object
#    without manifest ignored; retention; a corrupted part refused; paged
#    listings at 2 keys a page; orphaned uploads aborted; a prefix with
#    characters URLs and signatures encode; one line each for a missing
#    bucket, wrong credentials and bad settings;
#  - remote_train.sh: a 2-rank run uploading, its ckpt.dir deleted, a fresh
#    1-rank start downloading from the remote, losses equal to the resume
#    from the file; the tools on s3:// URLs; refusals at start;
#  - remote_ranks.sh: one upload's parts sent by both ranks; a rank's share
#    failing aborts it;
#  - remote_kill9.sh: every rank killed mid-upload, the next start cleans
#    the orphaned upload and resumes from the newest complete checkpoint;
#    a stop signal's grace.
# remote_faults.sh stays on SeaweedFS: it restarts the server, and moto
# keeps its objects in memory.
export BOOST_S3_STORE=moto
here=$(dirname "$0")
for t in remote_s3 remote_train remote_ranks remote_kill9; do
  bash "$here/$t.sh" || exit $?
done
echo "remote_store_moto: all passed"
