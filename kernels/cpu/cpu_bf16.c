/* The CPU backend's bf16 table (train.precision = bf16). */
#include "cpu_backend.h"

const boost_ops *cpu_bf16_ops(void) { return NULL; }
