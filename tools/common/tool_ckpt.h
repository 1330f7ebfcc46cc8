/* What the programs over the checkpoint reader share for their output: a
 * checkpoint opened or its error said in one line, a JSON object printed. */
#ifndef BOOST_TOOL_CKPT_H
#define BOOST_TOOL_CKPT_H

#include <cJSON.h>

#include "ckpt_reader.h"

/* ckr_open, printing its error (one line on stderr). With need_complete, a
 * file whose group walk failed is refused as well: every subcommand but
 * tensors and verify (which report the walk themselves) would otherwise
 * print a silently shortened result. Returns 0, or 1 (c closed). */
int tool_open_or_say(const char *arg, ckr_ckpt *c, int need_complete);
/* o printed on stdout (then freed). */
void tool_print_json(cJSON *o);

#endif
