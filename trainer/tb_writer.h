/* TensorBoard event files: what train.tensorboard writes (docs/TENSORBOARD.md).
 *
 * A file is a sequence of TFRecords, each
 *   uint64 length | uint32 masked CRC32C of the 8 length bytes | data | uint32 masked CRC32C of data
 * (little endian; masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8), and
 * each record's data one serialized tensorflow.Event: wall_time = 1
 * (double), step = 2 (int64), file_version = 3 (string), summary = 5
 * (Summary: repeated value = 1 of tag = 1, simple_value = 2 (float)),
 * session_log = 7 (SessionLog: status = 1, START = 1). The first record is
 * the Event with file_version "brain.Event:2"; then a SessionLog START at
 * the first step the file holds: TensorBoard's reader drops every value an
 * earlier file holds at that step or later (a resumed or rolled-back run
 * trains those steps again), so a step shows the values of the last file
 * that trained it. */
#ifndef BOOST_TB_WRITER_H
#define BOOST_TB_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* CRC32C (Castagnoli) of n bytes, continued from crc (0 to start). */
uint32_t tb_crc32c(uint32_t crc, const void *data, size_t n);
/* The TFRecord mask over a CRC32C. */
uint32_t tb_masked_crc(uint32_t crc);
/* data framed as one TFRecord into out (n + 16 bytes); returns n + 16. */
size_t tb_frame(const void *data, size_t n, uint8_t *out);

/* Event messages, serialized into out (cap bytes); each returns the length,
 * or 0 when it does not fit. */
size_t tb_event_file_version(double wall_time, uint8_t *out, size_t cap);
size_t tb_event_session_start(double wall_time, int64_t step, uint8_t *out, size_t cap);
/* One scalar value under tag at step. */
size_t tb_event_scalar(double wall_time, int64_t step, const char *tag, float value, uint8_t *out, size_t cap);

typedef struct tb_writer tb_writer;

/* Creates dir (and its parents) when missing and a new event file in it,
 * events.out.tfevents.<unix time>.<hostname>.<pid>, whose time is past
 * every event file's there (TensorBoard reads a folder's files in name
 * order: a new file must sort last), with the file_version record and a
 * SessionLog START at first_step. 0, or -1 with one line naming the folder. */
int tb_writer_open(const char *dir, int64_t first_step, tb_writer **out, boost_status *err);
/* A scalar, buffered; tb_writer_flush writes what is buffered. -1 with one
 * line naming the file when a write fails (a full disk): the writer then
 * writes nothing more (every later call returns -1 without a message). */
int tb_writer_scalar(tb_writer *w, int64_t step, const char *tag, double value, boost_status *err);
int tb_writer_flush(tb_writer *w, boost_status *err);
/* The file's path. */
const char *tb_writer_path(const tb_writer *w);
/* Flushes (errors ignored: a failure was reported at the last flush) and frees. */
void tb_writer_close(tb_writer *w);

#endif
