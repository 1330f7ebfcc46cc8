#include "pipeline.h"

#include <string.h>

#include "check.h"

static size_t stage_act_numel(const pipeline *p) { return (size_t)p->B * p->T * p->m->d_res; }

void pipeline_init(pipeline *p, const model *m, model_acts *acts, model_train *ts, comm_ctx *comm, int pp, int pp_rank) {
  memset(p, 0, sizeof *p);
  p->m = m;
  p->acts = acts;
  p->ts = ts;
  p->comm = comm;
  p->pp = pp;
  p->pp_rank = pp_rank;
  p->B = acts->B;
  p->T = acts->T;
  p->nsets = acts->nsets;
  if (pp_rank > 0)
    p->grad_out = boost_be_alloc(m->be, boost_act_bytes(m->be, (size_t)p->nsets * stage_act_numel(p)),
                                 "the pipeline's gradient buffers");
  p->send_fwd = boost_calloc((size_t)p->nsets, sizeof *p->send_fwd);
  p->send_bwd = boost_calloc((size_t)p->nsets, sizeof *p->send_bwd);
}

void pipeline_free(pipeline *p) {
  if (p->grad_out) p->m->be->mem->free(p->m->be, p->grad_out);
  boost_free(p->send_fwd);
  boost_free(p->send_bwd);
  memset(p, 0, sizeof *p);
}

/* train_scale > 0: a training micro-batch whose backward uses that dloss per
 * token (the head fuses its loss gradient into the forward); 0: evaluation,
 * whose loss is returned. */
static float forward_micro(pipeline *p, int micro, int set, const int32_t *in, const int32_t *tg, float train_scale) {
  const size_t act = stage_act_numel(p);
  const int s = p->pp_rank;
  if (s > 0) comm_recv_act(p->comm, COMM_PP, model_stage_input(p->acts), act, s - 1, micro);
  float loss = 0.0f;
  if (train_scale > 0.0f) {
    model_set_batch(p->m, p->acts, in, tg);
    model_forward_train(p->m, p->acts, p->B, p->T, train_scale);
  } else {
    loss = model_forward(p->m, p->acts, in, tg, p->B, p->T);
  }
  if (s < p->pp - 1) {
    comm_wait(p->comm, &p->send_fwd[set]);
    comm_isend_act(p->comm, COMM_PP, model_stage_output(p->m, p->acts), act, s + 1, micro, &p->send_fwd[set]);
  }
  return loss;
}

static void backward_micro(pipeline *p, int micro, int set, float scale) {
  const size_t act = stage_act_numel(p);
  const int s = p->pp_rank;
  boost_backend *be = p->m->be;
  if (s < p->pp - 1) comm_recv_act(p->comm, COMM_PP, model_stage_output_grad(p->acts), act, s + 1, micro);
  model_backward(p->m, p->acts, p->ts, scale);
  if (s > 0) {
    comm_wait(p->comm, &p->send_bwd[set]);
    boost_act *out = boost_act_at(be, p->grad_out, (size_t)set * act);
    be->mem->copy(be, out, p->acts->d_in, boost_act_bytes(be, act));
    comm_isend_act(p->comm, COMM_PP, out, act, s - 1, micro, &p->send_bwd[set]);
  }
}

static void wait_all(pipeline *p) {
  for (int k = 0; k < p->nsets; k++) {
    comm_wait(p->comm, &p->send_fwd[k]);
    comm_wait(p->comm, &p->send_bwd[k]);
  }
}

void pipeline_set_grads_hook(pipeline *p, model_grads_ready_fn fn, void *ctx) {
  p->grads_ready = fn;
  p->grads_ready_ctx = ctx;
}

void pipeline_train(pipeline *p, int micro_batches, float scale, const int32_t *in, const int32_t *tg) {
  const int M = micro_batches, nsets = p->nsets;
  const int warm = (p->pp - p->pp_rank - 1) < M ? (p->pp - p->pp_rank - 1) : M;
  const size_t BT = (size_t)p->B * p->T;
  int fwd = 0, bwd = 0, inflight = 0;
  model_loss_reset(p->m, p->acts);
  while (bwd < M) {
    /* forward while warming up or in the steady phase, else backward */
    const int do_fwd = fwd < M && fwd - bwd <= warm;
    const int micro = do_fwd ? fwd : bwd, set = micro % nsets;
    model_use_acts(p->acts, set);
    if (do_fwd) {
      forward_micro(p, micro, set, in + (size_t)micro * BT, tg + (size_t)micro * BT, scale);
      fwd++;
      if (++inflight > p->peak_inflight) p->peak_inflight = inflight;
    } else {
      /* the step's last backward finishes each gradient it touches */
      if (bwd == M - 1) model_set_grads_hook(p->ts, p->grads_ready, p->grads_ready_ctx);
      backward_micro(p, micro, set, scale);
      model_set_grads_hook(p->ts, NULL, NULL);
      bwd++;
      inflight--;
    }
  }
  wait_all(p);
}

float pipeline_forward(pipeline *p, const int32_t *in, const int32_t *tg, int tag) {
  model_use_acts(p->acts, 0);
  const float loss = forward_micro(p, tag, 0, in, tg, 0.0f);
  comm_wait(p->comm, &p->send_fwd[0]);
  return loss;
}
