/* boost-reshard --rank: a checkpoint's low-rank projections converted to
 * other bottleneck ranks (docs/CHECKPOINT_FORMAT.md, "Changing the rank").
 *
 * Growing keeps every channel where it is and appends new ones: their B
 * columns are zero, their A rows are the values a run of the new rank draws
 * there at initialisation (model_init_params: a function of train.seed, the
 * tensor's name and the element's index in the new shape, with the new
 * rank's init std), so the model computes the same function. Shrinking keeps
 * the channels i with the largest ||B[:,i]|| * ||A[i,:]|| (per projection of
 * a group; ties keep the lower index), in their order. The AdamW moments
 * follow the channels; those of new channels are zero. */
#ifndef BOOST_RESHARD_RANK_H
#define BOOST_RESHARD_RANK_H

#include <hdf5.h>
#include <stddef.h>

#include "config.h"
#include "reshard.h"
#include "status.h"

typedef struct rank_change rank_change;

/* The change IN (stored config `from`) needs for o->rank_attn / o->rank_mlp
 * (0: unchanged): *to is `from` with the new ranks, checked against the
 * model's dimensions and the target layout (o->tp, o->mode). Reads IN's
 * factors to choose the channels a shrink keeps. Into *out; -1 (and *out
 * NULL) with one line in err. */
int reshard_rank_plan(hid_t in, const train_config *from, const options *o, train_config *to, rank_change **out,
                      boost_status *err);
void reshard_rank_free(rank_change *rc);

/* Converts one tensor of IN's group (CKPT_GROUP_MODEL, _ADAM_M, _ADAM_V):
 * when its rank changes, *buf (*n values of shape dims[ndim]) is replaced
 * by the converted values and dims by the new shape. Returns 0, or -1. */
int reshard_rank_tensor(const rank_change *rc, const char *group, const char *name, float **buf, size_t *n, int ndim,
                        hsize_t *dims, boost_status *err);

/* /activations of IN into OUT without the layer activations (their widths
 * and values follow the weights): the group's attributes, the tokens and
 * the sample indices. reshard_rank_finish writes the rest. */
int reshard_rank_copy_acts(hid_t in, hid_t out, boost_status *err);

/* After the rewrite into tmp: the loss on the stored batch under IN's
 * weights and under tmp's (printed, unless quiet), and every layer
 * activation IN stores recomputed with tmp's weights on one process and
 * written into tmp. Returns 0, or -1 with one line. */
int reshard_rank_finish(const rank_change *rc, const char *in_path, const char *tmp, const options *o, boost_status *err);

#endif
