/* boost-reshard internals shared by its files: the options, the target
 * layout's registry and the --plan report (reshard_plan.c), the command
 * line (reshard_args.c). The rewrite itself is boost_reshard.c. */
#ifndef BOOST_RESHARD_H
#define BOOST_RESHARD_H

#include <hdf5.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"
#include "model.h"
#include "status.h"

typedef struct {
  const char *in, *out;
  int dp, tp, pp, plan, json, quiet, no_optim, bf16;
  int have_layout;         /* --layout given (else, with --rank, IN's layout) */
  int rank_attn, rank_mlp; /* --rank: the new bottleneck ranks, 0 = unchanged */
  int rank_all;            /* --rank R: every low-rank projection the model has */
  int rank, nranks; /* of MPI_COMM_WORLD: > 1 under mpirun (the parallel rewrite) */
  tp_mode mode;
} options;

/* reshard_args.c: the usage text (returns status) and the command line
 * into o; -1 with a one-line err on a usage error. */
int reshard_usage(FILE *f, int status);
int reshard_parse_args(int argc, char **argv, options *o, boost_status *err);

/* The target layout's tensor registry (tp rank 0, whole model, no arenas)
 * and its tp mode. Returns -1 with err when the layout does not fit. */
int reshard_target_registry(const train_config *cfg, const options *o, model *m, tp_mode *mode, boost_status *err);

/* --plan: what every tensor-parallel rank and stage of the target layout
 * would read of IN as it is (bytes needed vs chunk bytes decoded), printed
 * (--json: one document). Returns -1 with err. */
int reshard_plan(hid_t in, const train_config *cfg, const options *o, boost_status *err);

#endif
