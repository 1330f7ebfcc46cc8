/* The training run (trainer.h): the loop, and in it the step read
 * top-down (train_step). The parts it runs on are made in trainer_build.c,
 * the step's gradients are step.c's, the guard's healing trainer_heal.c's,
 * what a run shows trainer_log.c's (trainer_internal.h). */
#include "trainer.h"
#include "train_sample.h"
#include "trainer_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ckpt_test_hooks.h"
#include "log.h"
#include "preempt.h"
#include "run_tensorboard.h"
#include "run_watch.h"
#include "test_hooks.h"
#include "util.h"
#include "watchdog.h"

/* Mean validation loss over val_batches micro-batches, read in order and
 * spread over data-parallel replicas; forward only, through the pipeline,
 * from buffers of its own (the step's last micro-batch stays for the
 * checkpoint's activations). */
static float evaluate(trainer *t) {
  trainer_data *d = &t->data;
  const int64_t n = data_split_num_samples(&d->val);
  const int batches = t->cfg->train.report.val_batches;
  if (n <= 0 || batches <= 0) return NAN;
  double tot[2] = {0.0, 0.0};
  if (!d->val_in) {
    d->val_in = boost_calloc((size_t)d->B * d->T, sizeof *d->val_in);
    d->val_tg = boost_calloc((size_t)d->B * d->T, sizeof *d->val_tg);
  }
  int32_t *in = d->val_in, *tg = d->val_tg;
  for (int b = t->grid.dp_rank; b < batches; b += t->grid.dp) {
    for (int i = 0; i < d->B; i++)
      data_get_window(&d->val, ((int64_t)b * d->B + i) % n, in + (size_t)i * d->T, tg + (size_t)i * d->T);
    float loss = pipeline_forward(&t->par.pipe, in, tg, b);
    tot[0] += owns_loss(t) ? loss : 0.0;
    tot[1] += owns_loss(t) ? 1.0 : 0.0;
  }
  comm_control_sum_f64(&t->comm, COMM_WORLD, tot, 2);
  return (float)(tot[0] / tot[1]);
}

/* The second half: AdamW applies the reduced gradients (clipped to
 * train.grad_clip by the global norm) at the schedule's step. */
static void step_update(trainer *r, train_state *st, double grad_norm) {
  const train_config *cfg = r->cfg;
  model *m = &r->m;
  const size_t chunk = r->mt.store.mom_end - r->mt.store.mom_begin;
  float lr = lr_at(cfg, (int)st->step);
  const float clip = boost_clip_scale(grad_norm, cfg->train.optim.grad_clip);
  if (r->parts.n) { /* each part waits only for its tensors' bands of a checkpoint staged in turns */
    for (int k = 0; k < r->parts.n; k++) {
      ckpt_fence_wait(r->fence, r->parts.t0[k], r->parts.t0[k + 1]);
      optimizer_step_part(&r->mt, cfg, lr, (int)st->step + 1, clip, &r->parts, k);
    }
  } else {
    ckpt_fence_wait_all(r->fence); /* a checkpoint's deferred copy of params/moments must be done */
    optimizer_step(&r->mt, cfg, lr, (int)st->step + 1, clip);
  }
  if (cfg->parallel.zero) {
    comm_allgather_chunks(&r->comm, COMM_DP, m->w.params, chunk);
    model_refresh_work(m);
  }
}

/* An accepted step's bookkeeping: the schedule, the cursor, the histories. */
static void step_accepted(trainer *t, float loss, double grad_norm) {
  train_state *st = &t->st;
  st->step++;
  run_watch_trained(st);
  st->data_cursor += t->data.global_batch;
  st->tokens_seen += (double)t->data.global_batch * t->data.T;
  train_state_push_loss(st, loss);
  train_rows_push(&st->grad_norms, &grad_norm, 1);
}

/* What a step came to. */
typedef enum {
  STEP_TAKEN,   /* applied and accepted */
  STEP_PASSED,  /* its batch was one to skip: nothing ran */
  STEP_DROPPED, /* flagged: nothing applied (its batch passed over, or a rollback) */
  STEP_ENDED,   /* the run ends: *status says how */
} step_outcome;

/* One optimizer step, top-down: a batch to skip is passed over; the
 * micro-batches go forward and backward and the gradients are reduced;
 * the guard gives its verdict (a flagged step, or one in
 * train.replay_every, replayed first where a replay can tell a fault from
 * a real result); then AdamW applies the step, or the flagged step is
 * dropped or rolled back under train.guard's policy. */
static step_outcome train_step(trainer *t, float *loss, double *gnorm, int *status) {
  const train_config *cfg = t->cfg;
  train_state *st = &t->st;
  if (pass_skipped(t)) return STEP_PASSED;
  *loss = step_gradients(t, gnorm);
  if (cfg->train.guard.policy != GUARD_OFF) { /* the verdict, before the optimizer touches anything */
    guard_verdict v = guard_judge(cfg, st, *loss, *gnorm);
    const int every = cfg->train.guard.replay_every > 0 && (st->step + 1) % cfg->train.guard.replay_every == 0;
    if ((v.reasons || every) && replay_allowed(t)) { /* a flagged step is replayed before the policy applies */
      const int rc = replay_step(t, loss, gnorm, v.reasons != 0);
      if (rc > 0) {
        *status = rc;
        return STEP_ENDED;
      }
      if (rc == 0) v = guard_judge(cfg, st, *loss, *gnorm); /* the step as the agreeing replays took it */
    }
    if (v.reasons) {
      *status = on_flagged(t, *loss, *gnorm, &v);
      *loss = NAN; /* not a step of the run: the final line reports the last accepted one */
      return *status != 0 ? STEP_ENDED : STEP_DROPPED;
    }
  }
  step_update(t, st, *gnorm);
  step_accepted(t, *loss, *gnorm);
  return STEP_TAKEN;
}

model *trainer_model(trainer *t) { return &t->m; }
model_acts *trainer_acts(trainer *t) { return &t->acts; }
model_train *trainer_train_state(trainer *t) { return &t->mt; }
comm_ctx *trainer_comm(trainer *t) { return &t->comm; }
const comm_ctx *trainer_step_comm(const trainer *t) { return &t->out.step_comm; }
const process_grid *trainer_grid(const trainer *t) { return &t->grid; }
train_state *trainer_state(trainer *t) { return &t->st; }

/* The end of a run: waits for the last checkpoint and turns the outcome into
 * the exit status (docs: 0 done and saved, 75 preempted after a commit, 74
 * ended without its final state committed, 1 error). */
static int finish(trainer *t, ckpt_session *ck, int status, int stop_signal, float loss, double t_start) {
  const train_state *st = &t->st;
  const int saved = ck && ckpt_wait(ck) == 0 && ckpt_last_committed(ck) == st->step;
  run_tb_ckpt(t, ck); /* the final checkpoint's outcome */
  if (saved) preempt_set_committed(1);
  const int writes = ckpt_writes(ck);
  /* The saves are done (ckpt_wait): what is left of the session waits for
   * the other ranks (the local level's retire is a barrier), so
   * parallel.timeout bounds it even where ckpt.timeout is 0. */
  watchdog_phase("the end: the checkpoint session's close (the local level's retire)", WATCH_WAIT);
  if (ck) ckpt_close(ck);
  if (status != 0 && status != BOOST_EXIT_PREEMPTED) return status;
  const int want_save = writes || stop_signal;
  if (want_save && !saved) {
    if (t->grid.rank == 0)
      boost_log_warn("%s at step %lld, but its final state was NOT committed%s; exiting with status %d",
                     stop_signal ? "preempted" : "finished", (long long)st->step,
                     writes ? " (see the checkpoint error above)" : " (no ckpt.dir)", BOOST_EXIT_UNSAVED);
    return BOOST_EXIT_UNSAVED;
  }
  if (t->grid.rank == 0 && stop_signal) {
    boost_log_info("preempted by signal %d at step %lld: checkpoint committed; exiting with status %d for requeue",
                   stop_signal, (long long)st->step, BOOST_EXIT_PREEMPTED);
  } else if (t->grid.rank == 0) {
    /* A resumed run with no step left trains none: its final loss is the
     * checkpoint's last one, not a NaN. */
    if (isnan(loss) && st->loss_count > 0) loss = st->loss_history[st->loss_count - 1];
    boost_log_info("done: step %lld, %.0f tokens, %.1f s, final loss %.4f, peak RSS %.0f MiB", (long long)st->step,
                   st->tokens_seen, boost_now_s() - t_start, loss, peak_rss_mib());
  }
  return status;
}

/* A stop signal that came before training (start-up, data, model build,
 * checkpoint load) ends the run here: nothing was trained since the newest
 * committed state or the fresh start, so there is nothing to save and the
 * requeued run starts where this one would have. Collective. */
static int stopped_before_training(const trainer *t, const char *when) {
  const int sig = preempt_agreed(t->grid.world);
  if (sig && t->grid.rank == 0)
    boost_log_info("preempted by signal %d %s: nothing trained, nothing to save; exiting with status %d for requeue",
                   sig, when, BOOST_EXIT_PREEMPTED);
  return sig;
}

/* After the resume, the last reasons not to train: a stop signal that came
 * during start-up (75), train.steps below the resumed step (refused: the run
 * is past the end it asks for, not "done"), a train.tensorboard folder or
 * train.metrics that cannot be written. Only then are they opened
 * (train.metrics appended to: a resumed run continues it; a new event file),
 * so a refused start leaves no file. Collective; 0 to train. */
static int accept_start(trainer *t, boost_status *err) {
  const train_state *st = &t->st;
  char when[96];
  snprintf(when, sizeof when, "during start-up, before training from step %lld", (long long)st->step);
  if (stopped_before_training(t, when)) return BOOST_EXIT_PREEMPTED;
  if (st->step > t->cfg->train.steps) {
    boost_err(err,
             "train.steps=%d is below the resumed checkpoint's step %lld: nothing to train (set train.steps above "
             "%lld to continue this run; ckpt.resume=none starts a new one)",
             t->cfg->train.steps, (long long)st->step, (long long)st->step);
    return fail_all(&t->grid, err->msg);
  }
  int ok = run_tb_open(t, err) == 0;
  if (ok && t->grid.rank == 0 && t->cfg->train.report.metrics[0]) {
    t->out.metrics = fopen(t->cfg->train.report.metrics, "a");
    ok = t->out.metrics != NULL;
    if (!ok) boost_err(err, "cannot open train.metrics %s: %s", t->cfg->train.report.metrics, strerror(errno));
  }
  /* every rank stops, not rank 0 alone */
  comm_control_bcast(t->grid.world, COMM_WORLD, "start agreement", &ok, (int)sizeof ok, 0);
  return ok ? 0 : fail_all(&t->grid, err->msg);
}

/* The checkpoint session (t->ck, NULL without ckpt.dir), the resume into
 * t->st (msg: what was resumed), and the last reasons not to train. 0 to
 * train; else the exit status, said on every rank. */
static int open_and_resume(trainer *t, char *msg, size_t msglen) {
  const train_config *cfg = t->cfg;
  boost_status err = {0};
  save_builder_init(&t->saves, cfg, &t->grid, &t->comm, &t->m, &t->par.pipe, t->par.mode);
  data_tokenizer_id(t->data.train_src, t->saves.tokenizer, sizeof t->saves.tokenizer);
  ckpt_settings ck_set;
  trainer_ckpt_settings(cfg, &ck_set);
  ck_set.threads = t->threads; /* train.threads=0 resolved: a save or load training waits for uses them all */
  watchdog_phase("start-up: checkpoint directory", WATCH_WAIT);
  const int opened = ckpt_open(&ck_set, &t->grid, &t->mt.store, &t->ck, &err);
  t->fence = ckpt_fence_start(t->ck);
  watchdog_phase("start-up: checkpoint load", WATCH_CKPT);
  int resumed = -1;
  boost_status note = {0};
  if (opened != 0 || (resumed = trainer_ckpt_resume(t->ck, &t->st, t->saves.tokenizer, &note)) < 0)
    return fail_all(&t->grid, opened != 0 ? err.msg : note.msg);
  boost_msgf(msg, msglen, "%s", note.msg);
  /* Drawn only for a fresh start: a resume overwrites every weight, and
   * drawing them first (Box-Muller over the whole model) was a large part
   * of a resume's start-up. A fresh start happens only where no checkpoint
   * exists (or ckpt.resume=none): a candidate that failed never leads here. */
  if (resumed == 0) model_init_params(&t->m, (uint64_t)cfg->train.seed);
  if (ckpt_staging_bounded(t->ck)) optim_parts_init(&t->parts, &t->m, &t->mt, 16);
  watchdog_phase("start-up: start agreement", WATCH_WAIT);
  measure_peak(t); /* before the last stop check: a signal during it ends the start-up, not a step */
  return accept_start(t, &err);
}

/* How the loop ended: the exit status so far, the stop signal agreed on
 * (0: none), the last accepted step's loss. */
typedef struct {
  int status, stop_signal;
  float loss;
} loop_end;

/* The steps from t->st to train.steps: each step (train_step), then for an
 * accepted one validation, the checkpoint, the lines and files a step
 * shows, and a stop signal agreed on. Collective. */
static loop_end train_loop(trainer *t) {
  const train_config *cfg = t->cfg;
  train_state *st = &t->st;
  ckpt_session *ck = t->ck;
  const double flops_per_token = model_flops_per_token(&cfg->model, t->data.T);
  const long step_delay_ms = test_delay_ms("BOOST_TRAIN_TEST_STEP_DELAY_MS");
  run_watch_begin(cfg, t->grid.rank, st, ck);
  run_interval_start(&t->interval, cfg, t->grid.rank, st, ck);
  loop_end e = {0, 0, NAN};
  while (st->step < cfg->train.steps) {
    preempt_set_committed(0); /* from here a forced exit loses work */
    run_tb_poll(t); /* the guard's flagged steps since the last pass */
    run_watch_step(ck, st);
    double t0 = boost_now_s(), gnorm = 0.0;
    comm_reset_counts(&t->comm);
    const float lr = lr_at(cfg, (int)st->step);
    const step_outcome outcome = train_step(t, &e.loss, &gnorm, &e.status);
    if (outcome == STEP_ENDED) break;
    if (outcome == STEP_PASSED) continue;
    if (outcome == STEP_DROPPED) {
      if ((e.stop_signal = preempt_agreed(t->grid.world)) != 0) {
        boost_status ckpt_note = {0};
        t->fence = save_request_submit(&t->saves, ck, st, CKPT_DUE_FILE, &ckpt_note);
        e.status = BOOST_EXIT_PREEMPTED;
        break;
      }
      continue;
    }
    const float loss = e.loss;
    t->out.step_comm = t->comm; /* this step's traffic, before validation's */
    if (!isfinite(loss)) {
      e.status = fail_all(&t->grid, "loss is not finite: lower train.lr or check the data (or set train.guard=rollback)");
      break;
    }
    double dt = boost_now_s() - t0;
    test_sleep_ms(step_delay_ms);

    const int last = st->step == cfg->train.steps;
    const int preempted = preempt_agreed(t->grid.world);
    float val_loss = NAN; /* before the checkpoint, which keeps it (/state/val_loss_history) */
    const int val_every = cfg->train.report.val_every;
    if (cfg->train.report.val_batches > 0 && ((val_every > 0 && st->step % val_every == 0) || last))
      val_loss = evaluate(t);
    if (!isnan(val_loss)) train_state_push_val(st, val_loss);
    char ckpt_status[128] = "-";
    const int clock = run_interval_due(&t->interval, &t->comm, dt);
    const int force = (last || preempted ? CKPT_DUE_FILE : 0) | clock;
    const int taken = (ckpt_due(ck, st->step, force) ? CKPT_DUE_FILE : 0) |
                      (ckpt_due_local(ck, st->step, force) ? CKPT_DUE_LOCAL : 0);
    if (last) ckpt_test_stop_in("last-step", t->grid.rank);
    boost_status ckpt_note = {0};
    t->fence = save_request_submit(&t->saves, ck, st, force, &ckpt_note);
    boost_msgf(ckpt_status, sizeof ckpt_status, "%s", ckpt_note.msg); /* the step line's column, as wide as ever */
    run_interval_after(&t->interval, ck, taken);

    const int64_t tokens = t->data.global_batch * t->data.T;
    const double tok_s = (double)tokens / dt, gflops = flops_per_token * (double)tokens / dt / 1e9;
    if (t->grid.rank == 0) {
      if (st->step % cfg->train.report.log_every == 0 || last || !isnan(val_loss) || preempted)
        log_step(t, &t->out.step_comm, loss, val_loss, lr, gnorm, tok_s, gflops, dt, ckpt_status);
      if (t->out.metrics)
        write_metrics(t, &t->out.step_comm, st, loss, val_loss, lr, gnorm, tok_s, gflops, dt, ckpt_status);
      run_tb_step(t, loss, val_loss, lr, gnorm, tok_s, gflops, dt);
    }
    if (cfg->train.report.sample_every > 0 && st->step % cfg->train.report.sample_every == 0 && t->grid.rank == 0)
      train_sample_print(&t->m, stdout); /* after the step's timing: not counted in tok/s */
    if (t->grid.pp > 1 && t->grid.rank == 0 && st->step == 1)
      boost_log_info("pipeline: peak in-flight micro-batches on stage 0: %d", t->par.pipe.peak_inflight);
    if (preempted) {
      e.status = BOOST_EXIT_PREEMPTED;
      e.stop_signal = preempted;
      break;
    }
  }
  return e;
}

int trainer_train(trainer *t) { return train_loop(t).status; }

int trainer_run(const train_config *cfg, MPI_Comm world) {
  boost_status err = {0};
  watchdog_phase("start-up: process grid, data and backend", WATCH_WAIT);
  trainer *t = NULL;
  if (trainer_build(cfg, world, 0, &t, &err) != 0) {
    int rank;
    MPI_Comm_rank(world, &rank);
    if (rank == 0) boost_log_warn("%s", err.msg);
    return 1;
  }
  if (stopped_before_training(t, "during start-up")) {
    trainer_destroy(t);
    return BOOST_EXIT_PREEMPTED;
  }

  train_state *st = &t->st;
  char msg[2048] = "";
  int status = open_and_resume(t, msg, sizeof msg);
  ckpt_session *ck = t->ck;
  if (status != 0) {
    if (ck) ckpt_close(ck);
    trainer_destroy(t);
    return status;
  }
  model_refresh_work(&t->m); /* a resume loaded the float masters: the working copy follows */
  trainer_ckpt_note_start(&t->saves, st);
  if (t->grid.rank == 0) {
    print_start(t, st, t->threads);
    if (ck) boost_log_info("checkpoints: %s", msg);
  }

  const double t_start = boost_now_s();
  const loop_end e = train_loop(t);
  watchdog_phase("the final save", WATCH_CKPT);
  ckpt_test_stop_in("final-save", t->grid.rank);
  status = finish(t, ck, e.status, e.stop_signal, e.loss, t_start);
  run_watch_end(cfg, status);
  watchdog_phase("the end: tear-down", WATCH_WAIT);
  if (t->out.metrics) fclose(t->out.metrics);
  trainer_destroy(t);
  return status;
}
