/* A checkpoint's model on this process: the config the checkpoint stores,
 * the model it describes built whole (tp = 1, every layer, the embedding and
 * the head) on a backend of the caller's choice, and the weights read from
 * /model — the fp32 masters, or the bfloat16 of a `boost-reshard --bf16`
 * export, widened exactly. Tensors are stored as global logical tensors, so
 * the layout that wrote the file does not matter.
 *
 * What boost-generate, boost-eval, boost-reshard --rank and verify's
 * recomputation share. Training state (gradients, moments, the optimizer
 * plan) is not allocated. */
#ifndef BOOST_CKPT_MODEL_H
#define BOOST_CKPT_MODEL_H

#include <stddef.h>

#include "config.h"
#include "ckpt_reader.h"
#include "model.h"
#include "status.h"

typedef struct {
  train_config cfg;      /* the stored config */
  tp_mode mode;          /* its tp mode resolved for one process */
  boost_backend *be;     /* owned */
  model m;               /* the layout and the checkpoint's weights */
  model_acts acts;        /* the activation state its forwards use (evaluation) */
  int bf16_weights;      /* the file holds bf16 weights (a --bf16 export) */
  int bf16_run;          /* the run that wrote it trained in bf16 (root attribute `precision`) */
} ckpt_model;

/* Which backend the model runs on: device "cpu", "guarded" or "cuda";
 * precision "fp32", "bf16", or NULL / "auto" for the checkpoint's own. */
typedef struct {
  const char *device;
  const char *precision;
  int threads; /* 0: the OpenMP default */
} ckpt_model_options;

/* Parses the stored config and builds the model on the requested backend
 * without reading any weight. Returns 0, or -1 with one line in err. */
int ckpt_model_build(const ckr_ckpt *c, const ckpt_model_options *opt, ckpt_model *cm, boost_status *err);
/* Reads every parameter of the registry from /model into the model's
 * arenas (and refreshes the bf16 working copy). Returns 0, or -1 with one
 * line naming the tensor in err. */
int ckpt_model_read_weights(const ckr_ckpt *c, model *m, boost_status *err);
/* Both. On failure nothing is left allocated. */
int ckpt_model_load(const ckr_ckpt *c, const ckpt_model_options *opt, ckpt_model *cm, boost_status *err);
void ckpt_model_free(ckpt_model *cm);

#endif
