/* boost-data's token shard writer (boost format only; the trainer only
 * reads shards, data.h): tokens buffered and hashed as they come, the
 * header written last, the shard renamed into place. docs/DATA_FORMAT.md. */
#ifndef BOOST_DATA_WRITER_H
#define BOOST_DATA_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"
#include "status.h"

typedef struct data_writer data_writer;

/* Creates "<path>.tmp" and the writer into *out (0, or -1 with err); nothing
 * appears at path until data_writer_finish. token_bytes 2 or 4; vocab_size
 * >= 1 and must fit token_bytes; eot_token may be DATA_NO_EOT. */
int data_writer_open(const char *path, uint32_t token_bytes, uint32_t vocab_size, const char *tokenizer,
                     uint32_t eot_token, data_writer **out, boost_status *err);
/* Record the tokenizer's hash (bpe_hash): the shard is written as v2. */
void data_writer_set_tokenizer_hash(data_writer *w, uint64_t hash);
/* One document already encoded: EOT (if the writer has one) then tokens
 * (each < vocab_size). Counts one document. */
int data_writer_add_encoded(data_writer *w, const int32_t *tokens, size_t count, boost_status *err);
/* Append tokens (each < vocab_size). */
int data_writer_add(data_writer *w, const int32_t *tokens, size_t count, boost_status *err);
/* Byte tokenizer: append EOT (if the writer has one) then one token per byte.
 * Counts one document. */
int data_writer_add_document(data_writer *w, const void *bytes, size_t len, boost_status *err);
uint64_t data_writer_num_tokens(const data_writer *w);
uint64_t data_writer_num_documents(const data_writer *w);
/* Write the header, fsync, rename to path, fsync the directory, free w. On
 * failure the temp file is removed. Optionally returns the payload checksum. */
int data_writer_finish(data_writer *w, uint64_t *checksum, boost_status *err);
/* Remove the temp file and free w. */
void data_writer_abort(data_writer *w);
/* The temp path ("<path>.tmp") for signal handlers that must unlink it. */
const char *data_writer_tmp_path(const data_writer *w);

#endif
