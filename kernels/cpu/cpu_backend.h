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

/* The names of the CPU tables' entries by the op list's cpu column
 * (kernels/op_list.h): RAW and OWN lines are <prefix>_<name> (f: the float
 * table, b: the bf16 one), ANY lines cpu_<name> in both tables. */
#define CPU_ENTRY_RAW(prefix, name) prefix##_##name
#define CPU_ENTRY_OWN(prefix, name) prefix##_##name
#define CPU_ENTRY_ANY(prefix, name) cpu_##name

/* The ANY entries, declared from the list (attention_decode.c,
 * cpu_backend.c). */
#define CPU_DECLARE_RAW(ret, name, params)
#define CPU_DECLARE_OWN(ret, name, params)
#define CPU_DECLARE_ANY(ret, name, params) ret cpu_##name params;
#define CPU_DECLARE(cpu, ret, name, params, args) CPU_DECLARE_##cpu(ret, name, params)
BOOST_OP_LIST(CPU_DECLARE)
#undef CPU_DECLARE

/* AdamW's float update over the plan's segments (master weights and moments),
 * and with work (bf16, NULL for none) the working copy rounded in the same pass. */
void cpu_adamw(const boost_optim_plan *p, float *params, const float *grads, float *m, float *v, uint16_t *work,
               adamw_hparams hp, int t, float grad_scale);

#endif
