/* The training log's samples (train.sample_every): rank 0 prints a short
 * greedy continuation of a fixed prompt, as llm.c does, on a KV cache over
 * the trainer's own weights (trainer/model/model_decode.h); the training's
 * activations are left as they are. */
#ifndef BOOST_TRAIN_SAMPLE_H
#define BOOST_TRAIN_SAMPLE_H

#include <stdio.h>

#include "model.h"

/* New tokens per sample (fewer when model.seq_len is shorter). */
#define TRAIN_SAMPLE_TOKENS 64

/* One line "sample: ..." on f: the greedy continuation of end-of-text (the
 * byte tokenizer's 256 where the vocabulary has it, else token 0), bytes
 * shown as text (escaped where not printable) for vocabularies under 1024,
 * else token ids. m must hold the whole model (tp = pp = 1). */
void train_sample_print(const model *m, FILE *f);

#endif
