/* What the GPU check's files share (tests/gpu/gpu_check.c: the memory
 * operations and main; gpu_bench.c: throughput lines). The ops are checked
 * by test-backend-ops' harness (tests/backend_ops/bops.h), the same checks
 * ctest runs on every CPU backend, with the CUDA backend under test; its
 * lines read
 *   ok|FAIL <act> <what> rel_l2 <e> (max <m>) tol <t>
 * with rel_l2 = ||gpu - cpu|| / ||cpu|| and max = max|gpu - cpu| / max|cpu|. */
#ifndef BOOST_TEST_GPU_CHECK_H
#define BOOST_TEST_GPU_CHECK_H

#include "bops.h"

/* gpu_bench.c: g->be is the CUDA backend */
void gpu_bench(gcheck *g);

#endif
