/* The peak a run's MFU is measured against: the backend's own GEMM (the op
 * every projection runs through) on a square problem in the run's precision,
 * timed on this rank with its threads (docs/TENSORBOARD.md, "MFU"). */
#ifndef BOOST_GEMM_PEAK_H
#define BOOST_GEMM_PEAK_H

#include "backend.h"

/* FLOP/s of the best n x n x n be->ops->gemm call (2 n^3 FLOPs, synchronised)
 * within about budget_s seconds after one warm-up call; n <= 0 picks 1024
 * on a CPU backend, 4096 on a GPU. 0 when the memory cannot be had. */
double gemm_peak_flops(boost_backend *be, int n, double budget_s);

#endif
