/* The decode step's attention over a KV cache (hd_decode.h has the
 * arithmetic and the phases): one block of HD_DEC_THREADS threads per
 * (sequence, head); the scores and exponentials of the slice live in op
 * scratch ([B*H, pos+1] floats), the rotated q in shared memory. */
#include "cuda_internal.cuh"
#include "hd_decode.h"

template <int BF16>
__global__ void __launch_bounds__(HD_DEC_THREADS) decode_kernel(hd_decode_args a) {
  extern __shared__ float qs[]; /* hd floats */
  __shared__ float red[HD_DEC_WARPS];
  hd_regs r;
  RUN_PHASES(HD_DEC_PHASES, hd_decode_sync, r, hd_decode_phase(&a, BF16, HD_IX_HERE(), ph, &r, red, qs));
}

void cu_attention_decode(boost_backend *be, boost_act *out, boost_act *k_cache, boost_act *v_cache, cact *q, cact *k,
                         cact *v, const float *cos_t, const float *sin_t, int B, int pos, int max_T, int H, int hd) {
  BOOST_ASSERT(pos >= 0 && pos < max_T && hd % 2 == 0);
  if (B * H == 0) return;
  hd_decode_args a;
  a.out = out, a.kc = k_cache, a.vc = v_cache, a.q = q, a.k = k, a.v = v, a.cos_t = cos_t, a.sin_t = sin_t;
  a.scores = (float *)cuda_scratch(CB(be), (size_t)B * H * (pos + 1) * sizeof(float));
  a.H = H, a.pos = pos, a.max_T = max_T, a.hd = hd, a.scale = 1.0f / sqrtf((float)hd);
  ACT_LAUNCH(be, decode_kernel, (unsigned)(B * H), HD_DEC_THREADS, (size_t)hd * sizeof(float), a);
}
