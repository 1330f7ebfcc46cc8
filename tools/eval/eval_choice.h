/* boost-eval's multiple-choice accuracy on a JSONL file in HellaSwag's
 * layout (the format llm.c evaluates): one JSON object per line with the
 * context `ctx` (or `context`), a list `endings` of at least two strings and
 * the index of the right one, `label` (a number, or a string holding one,
 * as in the Hugging Face copy).
 *
 * Each ending is scored by the log-likelihood of its tokens, " " + ending
 * (the space that joins it to the context, as llm.c and lm-eval-harness
 * do), after the context's tokens: the context is cut from the left when the
 * whole does not fit the model's sequence length. acc: the ending with the
 * highest summed log-likelihood is the prediction; acc_norm: the highest
 * log-likelihood divided by the number of scored tokens, which under the
 * byte tokenizer is the ending's length in bytes (llm.c's normalisation;
 * lm-eval-harness divides by characters, the same for ASCII text). Ties go
 * to the first ending. Text is tokenized with the byte tokenizer (byte-v1),
 * or with the model's BPE tokenizer (bpe.h: the context and each " " +
 * ending encoded apart, as lm-eval-harness does; acc_norm then divides by
 * the ending's tokens, as llm.c does); an empty context is the end-of-text
 * token. */
#ifndef BOOST_EVAL_CHOICE_H
#define BOOST_EVAL_CHOICE_H

#include <stddef.h>
#include <stdint.h>

#include "bpe.h"
#include "model.h"
#include "status.h"

#define EVAL_CHOICE_MAX 64 /* endings per example */

typedef struct {
  int32_t *tokens; /* context then every ending's " " + text, concatenated */
  int ctx_len, n_endings, label;
  int *end_len; /* tokens of each ending */
} eval_choice_item;

typedef struct {
  eval_choice_item *items;
  int64_t n;
} eval_choice_set;

/* Reads and tokenizes every line of path (blank lines skipped) for a model
 * of vocab tokens and seq_len positions, with bpe (NULL: byte-v1). Returns
 * 0, or -1 with one line naming the line and what is wrong. */
int eval_choice_load(const char *path, const bpe_tokenizer *bpe, int vocab, int seq_len, eval_choice_set *set,
                     boost_status *err);
void eval_choice_free(eval_choice_set *set);

/* Scores item i = first, first + stride, ...: pred[i] (acc) and
 * pred_norm[i] (acc_norm), the index of the ending each picks. */
void eval_choice_run(const model *m, model_acts *r, const eval_choice_set *set, int64_t first, int64_t stride, int *pred, int *pred_norm,
                     void (*tick)(void *), void *tick_ctx);

#endif
