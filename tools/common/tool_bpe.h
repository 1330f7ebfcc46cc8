/* The BPE tokenizer a checkpoint was trained with (trainer/data/bpe.h), for
 * the programs that encode text for a model: boost-generate --prompt,
 * boost-eval --choice, boost-export --hf. A checkpoint records it as root
 * attribute `tokenizer` ("bpe-NAME:HASH", docs/CHECKPOINT_FORMAT.md). */
#ifndef BOOST_TOOL_BPE_H
#define BOOST_TOOL_BPE_H

#include "bpe.h"
#include "status.h"

/* Whether path starts as llm.c's gpt2_tokenizer.bin does (decoding only). */
int tool_is_llmc_tokenizer(const char *path);

/* The tokenizer for a checkpoint that records `recorded` (NULL or "": none)
 * at ckpt_path. With `path` (a tiktoken rank file): that file under the
 * recorded pre-tokenizer (gpt2 when none is recorded), refused when the
 * checkpoint records another tokenizer. Without: the first *.tiktoken file
 * whose hash is the recorded one in the folders of $BOOST_TOKENIZER_PATH
 * (colon-separated), then the checkpoint's folder and its parent. *out is
 * NULL (0 returned) when neither a path nor a recorded BPE tokenizer is
 * there; -1 with one line when none fits. */
int tool_bpe_open(const char *recorded, const char *path, const char *ckpt_path, bpe_tokenizer **out,
                  boost_status *err);

/* "NAME:HASH" of an open tokenizer, as checkpoints record it. */
void tool_bpe_id(const bpe_tokenizer *t, char *out, size_t outlen);

#endif
