/* parallel_check comm: the tensor-parallel all-reduce bytes of one forward
 * and backward against the formulas of docs/PARALLELISM.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "parallel_check.h"

/* Expected tp all-reduce floats (see docs/PARALLELISM.md). N = b*s. */
static void expected_floats(const model *m, uint64_t N, uint64_t *fwd_layer, uint64_t *bwd_layer, uint64_t *fwd_head,
                            uint64_t *bwd_head) {
  const model_config *c = &m->cfg;
  const uint64_t d = (uint64_t)c->d_model, F = (uint64_t)c->ffn, ra = (uint64_t)c->rank_attn,
                 rm = (uint64_t)c->rank_mlp;
  switch (m->mode) {
  case TP_BTP: /* q,k,v,o at r_attn; gate,up,down at r_mlp; 2 fused norm scalars */
    *fwd_layer = N * (4 * ra + 3 * rm) + 2 * N;
    *bwd_layer = N * (4 * ra + 3 * rm);
    break;
  case TP_VANILLA: /* fwd: every projection's full-width output; bwd: each group's input gradient */
    *fwd_layer = N * (5 * d + 2 * F);
    *bwd_layer = N * (3 * d + F);
    break;
  case TP_MEGATRON: /* fwd: o and down outputs; bwd: qkv's and gate/up's input gradients */
    *fwd_layer = 2 * N * d;
    *bwd_layer = 2 * N * d;
    break;
  default: *fwd_layer = *bwd_layer = 0;
  }
  /* head: parallel cross-entropy (max; sum of exp and target logit) forward,
   * the replicated final-norm output's gradient backward */
  *fwd_head = 3 * N;
  *bwd_head = N * d;
}

typedef struct {
  char preset[64];
  int mode, recompute;
  double fwd_layer, bwd_layer;
} comm_record;

static void check_comm_case(const options *o, const char *preset, const char *mode, const char *recompute,
                            comm_record *rec) {
  train_config *cfg = calloc(1, sizeof *cfg);
  boost_status err = {0};
  char what[160];
  const int rc = strcmp(recompute, "none") != 0;
  snprintf(what, sizeof what, "comm %s mode=%s%s%s tp=%d b=%d s=%d", preset, mode, rc ? " recompute=" : "",
           rc ? recompute : "", g_size, o->b, o->s);
  options oo = *o;
  char seq[64];
  snprintf(seq, sizeof seq, "model.seq_len=%d", o->s);
  oo.sets[oo.nsets++] = seq;
  trainer *t = NULL;
  layout l;
  parse_layout("dp=1", &l);
  l.tp = g_size;
  snprintf(l.mode, sizeof l.mode, "%s", mode);
  snprintf(l.recompute, sizeof l.recompute, "%s", recompute);
  if (make_config(&oo, preset, &l, o->b, 1, cfg, &err) != 0 ||
      trainer_create(cfg, MPI_COMM_WORLD, &t, &err) != 0) {
    verdict(0, "%s: cannot start: %s", what, err.msg);
    free(cfg);
    return;
  }
  model *m = trainer_model(t);
  model_acts *acts = trainer_acts(t);
  comm_ctx *c = trainer_comm(t);
  const int B = o->b, T = o->s, N = B * T, L = m->cfg.n_layers;
  int32_t *tok = malloc((size_t)N * sizeof *tok), *tgt = malloc((size_t)N * sizeof *tgt);
  for (int i = 0; i < N; i++) tok[i] = (i * 37 + 11) % 257, tgt[i] = (i * 53 + 7) % 257;

  comm_reset_counts(c);
  model_forward(m, acts, tok, tgt, B, T);
  const comm_ctx fwd = *c;
  comm_reset_counts(c);
  model_backward(m, acts, trainer_train_state(t), 1.0f / N);
  const comm_ctx bwd = *c;

  uint64_t fl, bl, fh, bh;
  expected_floats(m, (uint64_t)N, &fl, &bl, &fh, &bh);
  /* Recompute re-runs each layer's forward in backward: full repeats its
   * collectives; lowrank reuses the saved bottleneck, which under btp skips
   * the A GEMM and its all-reduce (no extra collective at all), while
   * vanilla still all-reduces the B outputs and full-rank layers have no
   * bottleneck to reuse. */
  const uint64_t bl_none = bl;
  if (acts->recompute == RECOMPUTE_FULL || (acts->recompute == RECOMPUTE_LOWRANK && m->mode != TP_BTP)) bl += fl;
  const uint64_t f_got = fwd.count[COMM_TP][COMM_ALLREDUCE].bytes, b_got = bwd.count[COMM_TP][COMM_ALLREDUCE].bytes;
  const double f_layer = ((double)f_got - 4.0 * fh) / L, b_layer = ((double)b_got - 4.0 * bh) / L;
  verdict(f_got == 4 * (L * fl + fh),
          "%s forward: tp all-reduce %llu bytes = %d layers x %.0f + head %llu; want per layer %llu (%s)", what,
          (unsigned long long)f_got, L, f_layer, (unsigned long long)(4 * fh), (unsigned long long)(4 * fl),
          m->mode == TP_BTP       ? "4 B x (7 b s r + 2 b s)"
          : m->mode == TP_VANILLA ? "4 B x b s (5d + 2 ffn)"
                                  : "4 B x 2 b s d");
  verdict(b_got == 4 * (L * bl + bh),
          "%s backward: tp all-reduce %llu bytes = %d layers x %.0f + head %llu; want per layer %llu (%s)", what,
          (unsigned long long)b_got, L, b_layer, (unsigned long long)(4 * bh), (unsigned long long)(4 * bl),
          bl != bl_none           ? "the forward's again (recompute) + the backward's"
          : m->mode == TP_BTP     ? "4 B x 7 b s r"
          : m->mode == TP_VANILLA ? "4 B x b s (3d + ffn)"
                                  : "4 B x 2 b s d");
  /* btp: one collective per norm+projection group (4 per layer) plus the
   * head's two; the head input gathered once (bytes = this rank's shard). */
  const uint64_t gat = fwd.count[COMM_TP][COMM_ALLGATHER].bytes, calls = fwd.count[COMM_TP][COMM_ALLREDUCE].calls,
                 bcalls = bwd.count[COMM_TP][COMM_ALLREDUCE].calls;
  const uint64_t gat_want = m->mode == TP_BTP ? 4ull * N * (uint64_t)(m->cfg.d_model / g_size) : 0;
  int ok = gat == gat_want && gat + bwd.count[COMM_TP][COMM_ALLGATHER].bytes == gat_want;
  const int btp_plain = m->mode == TP_BTP && acts->recompute != RECOMPUTE_FULL;
  if (m->mode == TP_BTP) ok &= calls == 4ull * L + 2;
  if (btp_plain) ok &= bcalls == 4ull * L + 1;
  uint64_t other = 0;
  for (int g = COMM_DP; g < COMM_NUM_GROUPS; g++)
    for (int k = 0; k < COMM_NUM_KINDS; k++) other += fwd.count[g][k].bytes + bwd.count[g][k].bytes;
  for (int k = COMM_ALLGATHER + 1; k < COMM_NUM_KINDS; k++)
    other += fwd.count[COMM_TP][k].bytes + bwd.count[COMM_TP][k].bytes;
  ok &= other == 0;
  verdict(ok,
          "%s: all-gather %llu bytes (want %llu), all-reduce calls forward %llu%s backward %llu%s, %llu bytes "
          "elsewhere (want 0); activations kept %.1f KiB/layer",
          what, (unsigned long long)gat, (unsigned long long)gat_want, (unsigned long long)calls,
          m->mode == TP_BTP ? " (want 4/layer + 2)" : "", (unsigned long long)bcalls,
          btp_plain ? " (want 4/layer + 1)" : "", (unsigned long long)other, (double)acts->act_bytes_per_layer / 1024);
  snprintf(rec->preset, sizeof rec->preset, "%s", preset);
  rec->mode = m->mode;
  rec->recompute = acts->recompute;
  rec->fwd_layer = f_layer;
  rec->bwd_layer = b_layer;
  free(tok);
  free(tgt);
  trainer_destroy(t);
  free(cfg);
}

void check_comm(const options *o) {
  comm_record rec[MAX_SPECS];
  for (int i = 0; i < o->ncases; i++) check_comm_case(o, o->cases[i][0], o->cases[i][1], o->cases[i][2], &rec[i]);
  if (o->max_ratio <= 0) return;
  for (int i = 0; i < o->ncases; i++)
    for (int j = 0; j < o->ncases; j++) {
      if (rec[i].mode != TP_BTP || rec[j].mode != TP_VANILLA || strcmp(rec[i].preset, rec[j].preset) ||
          rec[i].recompute != RECOMPUTE_NONE || rec[j].recompute != RECOMPUTE_NONE)
        continue;
      const double rf = rec[i].fwd_layer / rec[j].fwd_layer, rb = rec[i].bwd_layer / rec[j].bwd_layer,
                   rt = (rec[i].fwd_layer + rec[i].bwd_layer) / (rec[j].fwd_layer + rec[j].bwd_layer);
      verdict(rf <= o->max_ratio && rt <= o->max_ratio,
              "ratio %s btp/vanilla per layer: forward %.3f, forward+backward %.3f (want <= %.2f); backward alone %.3f",
              rec[i].preset, rf, rt, o->max_ratio, rb);
    }
}
