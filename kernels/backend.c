/* The backend object's shared parts: dtype sizes, the op names, the
 * factory over the backends this build has and its completeness check,
 * checked arena allocation, the clip scale. */
#include "backend.h"

#include <string.h>

#include "check.h"
#include "util.h"

const char *const boost_dtype_names[BOOST_DTYPE_COUNT] = {"f32", "bf16", "f64", "i32"};

size_t boost_dtype_size(boost_dtype t) {
  static const size_t sizes[BOOST_DTYPE_COUNT] = {4, 2, 8, 4};
  BOOST_ASSERT((int)t >= 0 && t < BOOST_DTYPE_COUNT);
  return sizes[t];
}

/* Each backend's constructor (cpu/cpu_backend.c, guarded_backend.c,
 * cuda/cuda_backend.cu). */
boost_backend *cpu_backend_create(boost_dtype act_dtype, int threads, boost_status *err);
boost_backend *guarded_backend_create(boost_backend *inner, boost_status *err);
#ifdef BOOST_HAVE_CUDA
boost_backend *cuda_backend_create(boost_dtype act_dtype, int device, boost_status *err);
#endif

#define BOOST_OP_NAME(cpu, ret, name, params, args) #name,
const char *const boost_op_names[BOOST_OP_COUNT] = {BOOST_OP_LIST(BOOST_OP_NAME)};
#undef BOOST_OP_NAME

/* The memory operations, for the completeness check. */
#define BOOST_MEM_LIST(X)                                                                                            \
  X(alloc) X(free) X(host_alloc) X(host_free) X(zero) X(copy) X(copy2d) X(upload) X(download) X(mark)               \
      X(download_async) X(copy_sync) X(sync) X(host_view)

int boost_backend_check(const boost_backend *be, boost_status *err) {
#define BOOST_OP_PRESENT(cpu, ret, op, params, args)                                                                  \
  if (!be->ops->op)                                                                                                  \
    return boost_err(err, "backend %s (%s) has no op %s", be->name, boost_dtype_names[be->act_dtype], #op);
#define BOOST_MEM_PRESENT(op) \
  if (!be->mem->op) return boost_err(err, "backend %s has no memory operation %s", be->name, #op);
  BOOST_OP_LIST(BOOST_OP_PRESENT)
  BOOST_MEM_LIST(BOOST_MEM_PRESENT)
#undef BOOST_OP_PRESENT
#undef BOOST_MEM_PRESENT
  return 0;
}

/* A backend made by its constructor, refused when an entry is missing. */
static boost_backend *checked(boost_backend *be, boost_status *err) {
  if (be && boost_backend_check(be, err) != 0) {
    boost_backend_destroy(be);
    return NULL;
  }
  return be;
}

int boost_backend_built(const char *name) {
  if (!strcmp(name, "cpu") || !strcmp(name, "guarded")) return 1;
#ifdef BOOST_HAVE_CUDA
  if (!strcmp(name, "cuda")) return 1;
#endif
  return 0;
}

static boost_backend *create(const char *name, boost_dtype act_dtype, int threads, int device, boost_status *err) {
  (void)device;
  if (act_dtype != BOOST_F32 && act_dtype != BOOST_BF16) {
    boost_err(err, "backend %s: activations cannot be %s (f32 or bf16)", name, boost_dtype_names[act_dtype]);
    return NULL;
  }
  if (!strcmp(name, "cpu")) return cpu_backend_create(act_dtype, threads, err);
  if (!strcmp(name, "guarded")) {
    boost_backend *inner = cpu_backend_create(act_dtype, threads, err);
    boost_backend *be = inner ? guarded_backend_create(inner, err) : NULL;
    if (inner && !be) boost_backend_destroy(inner);
    return be;
  }
  if (!strcmp(name, "cuda")) {
#ifdef BOOST_HAVE_CUDA
    return cuda_backend_create(act_dtype, device, err);
#else
    boost_err(err, "train.device = cuda: this boost was built without CUDA (no nvcc at configure time)");
    return NULL;
#endif
  }
  boost_err(err, "unknown backend '%s' (cpu, guarded or cuda)", name);
  return NULL;
}

int boost_backend_create(const char *name, boost_dtype act_dtype, int threads, int device, boost_backend **out,
                         boost_status *err) {
  *out = checked(create(name, act_dtype, threads, device, err), err);
  return *out ? 0 : -1;
}

void boost_backend_destroy(boost_backend *be) {
  if (be) be->destroy(be);
}

boost_backend *boost_backend_default(void) {
  static boost_backend *cpu;
  if (!cpu) cpu = cpu_backend_create(BOOST_F32, 0, NULL);
  BOOST_ASSERT(cpu);
  return cpu;
}

void *boost_be_alloc(boost_backend *be, size_t bytes, const char *what) {
  void *p = be->mem->alloc(be, bytes);
  if (!p) boost_fail("out of %s memory allocating %s (%.1f MiB)", be->name, what, (double)bytes / (1 << 20));
  return p;
}

/* min(1, max_norm / norm); 1 when max_norm <= 0 or norm <= max_norm (also
 * for a NaN norm: callers detect non-finite norms themselves). An infinite
 * norm gives 0. */
float boost_clip_scale(double norm, float max_norm) {
  if (!(max_norm > 0.0f)) return 1.0f;
  if (norm > (double)max_norm) return (float)((double)max_norm / norm);
  return 1.0f;
}
