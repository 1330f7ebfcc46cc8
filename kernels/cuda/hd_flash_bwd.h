/* The backward phases of the flash attention (included by hd_flash.h,
 * which explains the scheme). */
#ifndef BOOST_CUDA_HD_FLASH_BWD_H
#define BOOST_CUDA_HD_FLASH_BWD_H

/* ---- dQ and D (a block = a tile of queries) ------------------------------------ */

typedef struct {
  const fa_args *a;
  fa_dims d;
  size_t base;
  int bh, r0, ntiles, pass2; /* key tiles per pass; pass2: dQ wanted */
  void *Q, *dO, *K, *V, *P;
  float *S, *dP, *dQ, *m, *inv, *D;
} fa_dq_blk;

BOOST_HD size_t fa_dq_carve(fa_dq_blk *c, const fa_dims *d, unsigned char *base) {
  fa_carver cv = {base, 0};
  c->Q = fa_take(&cv, fa_act_tile(d, d->rows));
  c->dO = fa_take(&cv, fa_act_tile(d, d->rows));
  c->K = fa_take(&cv, fa_act_tile(d, d->cols));
  c->V = fa_take(&cv, fa_act_tile(d, d->cols));
  c->S = (float *)fa_take(&cv, (size_t)d->rows * d->ldf * 4);
  c->dP = (float *)fa_take(&cv, (size_t)d->rows * d->ldf * 4);
  c->P = fa_take(&cv, (size_t)d->rows * d->ldp * hd_act_size(d->bf16));
  c->dQ = (float *)fa_take(&cv, (size_t)d->rows * d->ldo * 4);
  c->m = (float *)fa_take(&cv, (size_t)d->rows * 4);
  c->inv = (float *)fa_take(&cv, (size_t)d->rows * 4);
  c->D = (float *)fa_take(&cv, (size_t)d->rows * 4);
  return cv.off;
}

/* Phases: 0 load; pass 1: 4 per key tile; 1 store D; pass 2 (dQ wanted): 5
 * per key tile; 1 store dQ. */
BOOST_HD int fa_dq_begin(fa_dq_blk *c, const fa_args *a, unsigned char *smem, int tile_x, int bh) {
  c->a = a;
  c->d = a->d;
  fa_dq_carve(c, &c->d, smem);
  c->bh = bh;
  c->base = ((size_t)(bh / a->H) * a->T * a->H + (size_t)(bh % a->H)) * a->d.hd;
  c->r0 = tile_x * a->d.rows;
  const int last = (c->r0 + a->d.rows < a->T ? c->r0 + a->d.rows : a->T) - 1;
  c->ntiles = last / a->d.cols + 1;
  c->pass2 = a->need_dq;
  return 1 + 4 * c->ntiles + 1 + (c->pass2 ? 5 * c->ntiles + 1 : 0);
}

/* The key-tile steps shared by both passes: K and V, S = scale Q K^T, dP = dO V^T. */
BOOST_HD void fa_dq_tile_step(const fa_dq_blk *c, int c0, int step, int warp, int lane) {
  const fa_args *a = c->a;
  const fa_dims *d = &c->d;
  const int tid = warp * 32 + lane, nth = fa_threads(d), strip = warp * 16;
  const size_t as = hd_act_size(d->bf16), so = (size_t)strip * d->ldt * as;
  if (step == 0) {
    fa_load_rows(c->K, d, a->k, c->base, a->H, c0, d->cols, a->T, tid, nth);
    fa_load_rows(c->V, d, a->v, c->base, a->H, c0, d->cols, a->T, tid, nth);
  } else if (step == 1) {
    fa_mm_nt(c->S + (size_t)strip * d->ldf, d->ldf, (const char *)c->Q + so, d->ldt, c->K, d->ldt, d->cols, d->hdp,
             a->scale, d->bf16, lane);
  } else {
    fa_mm_nt(c->dP + (size_t)strip * d->ldf, d->ldf, (const char *)c->dO + so, d->ldt, c->V, d->ldt, d->cols, d->hdp,
             1.0f, d->bf16, lane);
  }
}

BOOST_HD void fa_dq_phase(const fa_dq_blk *c, int ph, int warp, int lane) {
  const fa_args *a = c->a;
  const fa_dims *d = &c->d;
  const int tid = warp * 32 + lane, nth = fa_threads(d), strip = warp * 16;
  const size_t as = hd_act_size(d->bf16);
  if (ph == 0) {
    fa_load_rows(c->Q, d, a->q, c->base, a->H, c->r0, d->rows, a->T, tid, nth);
    fa_load_rows(c->dO, d, a->dout, c->base, a->H, c->r0, d->rows, a->T, tid, nth);
    fa_zero_f32(c->dQ, (size_t)d->rows * d->ldo, tid, nth);
    for (int r = tid; r < d->rows; r += nth) {
      const int qi = c->r0 + r;
      const size_t si = 2 * ((size_t)c->bh * a->T + qi);
      c->m[r] = qi < a->T ? a->stats[si] : 0.0f;
      c->inv[r] = qi < a->T ? a->stats[si + 1] : 0.0f;
      c->D[r] = 0.0f;
    }
    return;
  }
  ph -= 1;
  if (ph < 4 * c->ntiles) { /* pass 1: D */
    const int c0 = (ph / 4) * d->cols, step = ph % 4;
    if (step < 3) {
      fa_dq_tile_step(c, c0, step, warp, lane);
    } else if (lane < 16) {
      const int r = strip + lane, lim = fa_causal_lim(c->r0 + r, c0, d->cols, a->T);
      const float *s = c->S + (size_t)r * d->ldf, *dp = c->dP + (size_t)r * d->ldf;
      float acc = c->D[r];
      for (int j = 0; j < lim; j++) acc += fa_prob(s[j], c->m[r], c->inv[r], j, 0, lim) * dp[j];
      c->D[r] = acc;
    }
    return;
  }
  ph -= 4 * c->ntiles;
  if (ph == 0) {
    for (int r = tid; r < d->rows; r += nth)
      if (c->r0 + r < a->T) a->D[(size_t)c->bh * a->T + c->r0 + r] = c->D[r];
    return;
  }
  ph -= 1;
  if (ph < 5 * c->ntiles) { /* pass 2: dS and dQ */
    const int c0 = (ph / 5) * d->cols, step = ph % 5;
    if (step < 3) {
      fa_dq_tile_step(c, c0, step, warp, lane);
    } else if (step == 3) {
      if (lane < 16) {
        const int r = strip + lane, lim = fa_causal_lim(c->r0 + r, c0, d->cols, a->T);
        const float *s = c->S + (size_t)r * d->ldf, *dp = c->dP + (size_t)r * d->ldf;
        void *ds = (char *)c->P + (size_t)r * d->ldp * as;
        for (int j = 0; j < d->cols; j++) {
          const float p = fa_prob(s[j], c->m[r], c->inv[r], j, 0, lim);
          hd_st(ds, (size_t)j, p * (dp[j] - c->D[r]), d->bf16);
        }
      }
    } else {
      fa_mm_nn(c->dQ + (size_t)strip * d->ldo, d->ldo, (const char *)c->P + (size_t)strip * d->ldp * as, d->ldp, c->K,
               d->ldt, d->hdp, d->cols, d->bf16, lane);
    }
    return;
  }
  fa_store_rows(a->dq, d, c->dQ, NULL, a->scale, c->base, a->H, c->r0, d->rows, a->T, tid, nth);
}

/* ---- dK and dV (a block = a tile of keys) -------------------------------------- */

typedef struct {
  const fa_args *a;
  fa_dims d;
  size_t base;
  int bh, k0, q_first, ntiles; /* query tiles from q_first (the tile holding row k0) to T */
  void *K, *V, *Q, *dO, *P;
  float *S, *dP, *dK, *dV, *qm, *qinv, *qD;
} fa_dkv_blk;

BOOST_HD size_t fa_dkv_carve(fa_dkv_blk *c, const fa_dims *d, unsigned char *base) {
  fa_carver cv = {base, 0};
  c->K = fa_take(&cv, fa_act_tile(d, d->rows));
  c->V = fa_take(&cv, fa_act_tile(d, d->rows));
  c->Q = fa_take(&cv, fa_act_tile(d, d->cols));
  c->dO = fa_take(&cv, fa_act_tile(d, d->cols));
  c->S = (float *)fa_take(&cv, (size_t)d->rows * d->ldf * 4);
  c->dP = (float *)fa_take(&cv, (size_t)d->rows * d->ldf * 4);
  c->P = fa_take(&cv, (size_t)d->rows * d->ldp * hd_act_size(d->bf16));
  c->dK = (float *)fa_take(&cv, (size_t)d->rows * d->ldo * 4);
  c->dV = (float *)fa_take(&cv, (size_t)d->rows * d->ldo * 4);
  c->qm = (float *)fa_take(&cv, (size_t)d->cols * 4);
  c->qinv = (float *)fa_take(&cv, (size_t)d->cols * 4);
  c->qD = (float *)fa_take(&cv, (size_t)d->cols * 4);
  return cv.off;
}

/* Phases: 0 load; 7 per query tile; 1 store. */
BOOST_HD int fa_dkv_begin(fa_dkv_blk *c, const fa_args *a, unsigned char *smem, int tile_x, int bh) {
  c->a = a;
  c->d = a->d;
  fa_dkv_carve(c, &c->d, smem);
  c->bh = bh;
  c->base = ((size_t)(bh / a->H) * a->T * a->H + (size_t)(bh % a->H)) * a->d.hd;
  c->k0 = tile_x * a->d.rows;
  c->q_first = c->k0 / a->d.cols * a->d.cols;
  c->ntiles = (a->T - c->q_first + a->d.cols - 1) / a->d.cols;
  return 1 + 7 * c->ntiles + 1;
}

/* Queries of key row kj that attend to it in the tile at q0: [lo, hi). */
BOOST_HD void fa_key_range(int kj, int q0, int ncols, int T, int *lo, int *hi) {
  if (kj >= T) {
    *lo = *hi = 0;
    return;
  }
  *lo = kj - q0 > 0 ? kj - q0 : 0;
  *hi = T - q0 < ncols ? T - q0 : ncols;
  if (*hi < *lo) *hi = *lo;
}

BOOST_HD void fa_dkv_phase(const fa_dkv_blk *c, int ph, int warp, int lane) {
  const fa_args *a = c->a;
  const fa_dims *d = &c->d;
  const int tid = warp * 32 + lane, nth = fa_threads(d), strip = warp * 16;
  const size_t as = hd_act_size(d->bf16), so = (size_t)strip * d->ldt * as, po = (size_t)strip * d->ldp * as;
  if (ph == 0) {
    fa_load_rows(c->K, d, a->k, c->base, a->H, c->k0, d->rows, a->T, tid, nth);
    fa_load_rows(c->V, d, a->v, c->base, a->H, c->k0, d->rows, a->T, tid, nth);
    fa_zero_f32(c->dK, (size_t)d->rows * d->ldo, tid, nth);
    fa_zero_f32(c->dV, (size_t)d->rows * d->ldo, tid, nth);
    return;
  }
  ph -= 1;
  if (ph >= 7 * c->ntiles) {
    if (a->need_dk) fa_store_rows(a->dk, d, c->dK, NULL, a->scale, c->base, a->H, c->k0, d->rows, a->T, tid, nth);
    if (a->need_dv) fa_store_rows(a->dv, d, c->dV, NULL, 1.0f, c->base, a->H, c->k0, d->rows, a->T, tid, nth);
    return;
  }
  const int q0 = c->q_first + (ph / 7) * d->cols, step = ph % 7;
  const int r = strip + lane;
  int lo = 0, hi = 0;
  if (step == 3 || step == 5) fa_key_range(c->k0 + r, q0, d->cols, a->T, &lo, &hi);
  switch (step) {
  case 0: /* the query tile, its stats and D */
    fa_load_rows(c->Q, d, a->q, c->base, a->H, q0, d->cols, a->T, tid, nth);
    fa_load_rows(c->dO, d, a->dout, c->base, a->H, q0, d->cols, a->T, tid, nth);
    for (int i = tid; i < d->cols; i += nth) {
      const int qi = q0 + i;
      const size_t si = 2 * ((size_t)c->bh * a->T + qi);
      c->qm[i] = qi < a->T ? a->stats[si] : 0.0f;
      c->qinv[i] = qi < a->T ? a->stats[si + 1] : 0.0f;
      c->qD[i] = (qi < a->T && a->need_dk) ? a->D[(size_t)c->bh * a->T + qi] : 0.0f;
    }
    break;
  case 1: /* S^T = scale K Q^T */
    fa_mm_nt(c->S + (size_t)strip * d->ldf, d->ldf, (const char *)c->K + so, d->ldt, c->Q, d->ldt, d->cols, d->hdp,
             a->scale, d->bf16, lane);
    break;
  case 2: /* dP^T = V dO^T */
    if (a->need_dk)
      fa_mm_nt(c->dP + (size_t)strip * d->ldf, d->ldf, (const char *)c->V + so, d->ldt, c->dO, d->ldt, d->cols, d->hdp,
               1.0f, d->bf16, lane);
    break;
  case 3: /* P^T, kept in float (S) and as act (P) */
    if (lane < 16) {
      float *s = c->S + (size_t)r * d->ldf;
      void *p = (char *)c->P + (size_t)r * d->ldp * as;
      for (int i = 0; i < d->cols; i++) {
        s[i] = fa_prob(s[i], c->qm[i], c->qinv[i], i, lo, hi);
        hd_st(p, (size_t)i, s[i], d->bf16);
      }
    }
    break;
  case 4: /* dV += P^T dO */
    if (a->need_dv)
      fa_mm_nn(c->dV + (size_t)strip * d->ldo, d->ldo, (const char *)c->P + po, d->ldp, c->dO, d->ldt, d->hdp, d->cols,
               d->bf16, lane);
    break;
  case 5: /* dS^T = P^T (dP^T - D) over P */
    if (lane < 16 && a->need_dk) {
      const float *s = c->S + (size_t)r * d->ldf, *dp = c->dP + (size_t)r * d->ldf;
      void *p = (char *)c->P + (size_t)r * d->ldp * as;
      for (int i = 0; i < d->cols; i++) hd_st(p, (size_t)i, i >= lo && i < hi ? s[i] * (dp[i] - c->qD[i]) : 0.0f, d->bf16);
    }
    break;
  default: /* dK += dS^T Q */
    if (a->need_dk)
      fa_mm_nn(c->dK + (size_t)strip * d->ldo, d->ldo, (const char *)c->P + po, d->ldp, c->Q, d->ldt, d->hdp, d->cols,
               d->bf16, lane);
    break;
  }
}

#endif
