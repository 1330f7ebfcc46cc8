/* The CPU backend's pieces shared by its float and bf16 tables (not a
 * public interface: the backend is reached through kernels/backend.h). */
#ifndef BOOST_KERNELS_CPU_BACKEND_H
#define BOOST_KERNELS_CPU_BACKEND_H

#include "backend.h"

/* The bf16 table, or NULL when this build has none. */
const boost_ops *cpu_bf16_ops(void);

/* An optimizer plan on the CPU: the segments as given. */
struct boost_optim_plan {
  boost_segment *segs;
  int nseg;
  size_t mom_begin, mom_end;
};

/* Host scratch of the backend (slots 0..CPU_SCRATCH_SLOTS-1), n floats,
 * grown as needed and kept: the bf16 ops widen operands into it. */
#define CPU_SCRATCH_SLOTS 8
float *cpu_scratch(boost_backend *be, int slot, size_t n);

/* Entries that do not depend on the activation type. */
boost_optim_plan *cpu_optim_plan_create(boost_backend *be, const boost_segment *segs, int nseg, size_t mom_begin,
                                        size_t mom_end);
void cpu_optim_plan_free(boost_backend *be, boost_optim_plan *p);
void cpu_grad_sumsq(boost_backend *be, const boost_optim_plan *p, const float *grads, double *out);
void cpu_loss_accumulate(boost_backend *be, const float *losses, int N, double *acc);
void cpu_rope_tables(boost_backend *be, float *cos_t, float *sin_t, int T, int hd, float theta);
void cpu_vocab_ce_losses(boost_backend *be, float *losses, const float *sums, const float *mx, int N);
/* backend.h's attention_decode for either act type (attention_decode.c). */
void cpu_attention_decode(boost_backend *be, boost_act *out, boost_act *k_cache, boost_act *v_cache, cact *q,
                          cact *k, cact *v, const float *cos_t, const float *sin_t, int B, int pos, int max_T, int H,
                          int hd);
/* AdamW's float update over the plan's segments (master weights and moments),
 * and with work (bf16, NULL for none) the working copy rounded in the same pass. */
void cpu_adamw(const boost_optim_plan *p, float *params, const float *grads, float *m, float *v, uint16_t *work,
               adamw_hparams hp, int t, float grad_scale);

#endif
