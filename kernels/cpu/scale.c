/* out = s * x, both act types (a demonstration op). */
#include "bf16.h"
#include "cpu_backend.h"

void cpu_scale_forward(boost_backend *be, boost_act *out, cact *x, float s, size_t n) {
  if (be->act_dtype == BOOST_BF16)
    for (size_t i = 0; i < n; i++) ((bf16_t *)out)[i] = f32_to_bf16(s * bf16_to_f32(((const bf16_t *)x)[i]));
  else
    for (size_t i = 0; i < n; i++) ((float *)out)[i] = s * ((const float *)x)[i];
}
