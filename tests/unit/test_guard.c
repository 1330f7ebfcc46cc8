/* The step guard's verdicts (trainer/guard.h) and its ledger of skips; the
 * train.skip_batches parser. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "config.h"
#include "guard.h"

static boost_status err = {0};

static void setup_cfg(train_config *c) {
  char *sets[] = {"train.guard_window=10", "train.guard_warmup=5"};
  cr_assert_eq(config_resolve(c, NULL, 2, sets, &err), 0, "%s", err.msg);
}

/* n accepted steps of loss around 3 and gradient norm around 1 (+-1 %). */
static void history(train_state *st, int n) {
  train_state_init(st);
  for (int i = 0; i < n; i++) {
    const double wiggle = (i % 3 - 1) * 0.01;
    train_state_push_loss(st, (float)(3.0 * (1 + wiggle)));
    const double g = 1.0 + wiggle;
    train_rows_push(&st->grad_norms, &g, 1);
  }
}

Test(guard, accepts_ordinary_steps_and_flags_spikes) {
  train_config c;
  setup_cfg(&c);
  train_state st;
  history(&st, 10);
  guard_verdict v = guard_judge(&c, &st, 3.02f, 1.01);
  cr_expect_eq(v.reasons, 0u, "an ordinary step was flagged (z %g %g)", v.z_loss, v.z_gnorm);
  cr_expect(fabs(v.z_loss) < 2 && fabs(v.z_gnorm) < 2);
  v = guard_judge(&c, &st, 3.0f * 1.5f, 1.0);
  cr_expect(v.reasons & GUARD_LOSS_Z, "a loss 50 %% above a flat window is a spike");
  cr_expect(!(v.reasons & GUARD_LOSS_RATIO), "1.5x is below the ratio 2");
  v = guard_judge(&c, &st, 3.0f, 30.0);
  cr_expect_eq(v.reasons, (unsigned)GUARD_GNORM_Z);
  v = guard_judge(&c, &st, 7.0f, 1.0);
  cr_expect(v.reasons & GUARD_LOSS_RATIO);
  v = guard_judge(&c, &st, 2.0f, 0.5); /* downward moves are never spikes */
  cr_expect_eq(v.reasons, 0u);
  cr_expect_eq(guard_judge(&c, &st, NAN, 1.0).reasons, (unsigned)GUARD_NONFINITE);
  cr_expect_eq(guard_judge(&c, &st, 3.0f, INFINITY).reasons, (unsigned)GUARD_NONFINITE);
  train_state_free(&st);
}

Test(guard, warmup_judges_only_non_finite_values_and_the_ratio) {
  train_config c;
  setup_cfg(&c);
  train_state st;
  history(&st, 4); /* below train.guard_warmup = 5 */
  guard_verdict v = guard_judge(&c, &st, 5.0f, 100.0);
  cr_expect_eq(v.reasons, 0u);
  cr_expect(isnan(v.z_loss) && isnan(v.z_gnorm));
  cr_expect_eq(guard_judge(&c, &st, 6.5f, 1.0).reasons, (unsigned)GUARD_LOSS_RATIO);
  train_state_free(&st);
  history(&st, 0); /* the first step: nothing to compare with */
  cr_expect_eq(guard_judge(&c, &st, 1e6f, 1e6).reasons, 0u);
  train_state_free(&st);
}

Test(guard, the_window_is_the_last_accepted_steps) {
  train_config c;
  setup_cfg(&c);
  train_state st;
  train_state_init(&st);
  for (int i = 0; i < 50; i++) { /* a high start, then 10 steps at 1.0 */
    train_state_push_loss(&st, i < 40 ? 9.0f : 1.0f);
    const double g = 1;
    train_rows_push(&st.grad_norms, &g, 1);
  }
  cr_expect(guard_judge(&c, &st, 3.0f, 1.0).reasons & GUARD_LOSS_RATIO, "the old steps left the window of 10");
  train_state_free(&st);
}

Test(guard, ledger_ranges_clusters_and_skips) {
  train_config c;
  char *sets[] = {"train.skip_batches=3-4,9"};
  cr_assert_eq(config_resolve(&c, NULL, 1, sets, &err), 0, "%s", err.msg);
  train_state st;
  train_state_init(&st);
  int64_t last;
  int reason;
  cr_expect(guard_skip_range(&c, &st, 4, &last, &reason) && last == 4 && reason == GUARD_SKIP_CONFIG);
  cr_expect(!guard_skip_range(&c, &st, 5, &last, &reason));
  const guard_verdict v = {GUARD_LOSS_Z, 9, NAN};
  st.step = 7;
  guard_note_event(&st, 12, &v, 9.0f, 1.0, GUARD_ACT_DROPPED);
  guard_note_skip(&st, 12, 12, GUARD_SKIP_FLAGGED);
  st.step = 8;
  guard_note_event(&st, 14, &v, 9.0f, 1.0, GUARD_ACT_DROPPED);
  guard_note_skip(&st, 14, 14, GUARD_SKIP_FLAGGED);
  int64_t first;
  cr_expect_eq(guard_recent_flags(&st, 14, 5, &first), 2);
  cr_expect_eq(first, 7);
  cr_expect_eq(guard_recent_flags(&st, 14, 2, &first), 1, "batch 12 is outside a window of 2 ending at 14");
  guard_note_skip(&st, 10, 20, GUARD_SKIP_ROLLBACK);
  guard_note_skip(&st, 10, 20, GUARD_SKIP_ROLLBACK); /* the same range once */
  cr_expect_eq(guard_rollbacks(&st), 1);
  cr_expect_eq(guard_recent_flags(&st, 25, 50, &first), 0, "flags a rollback settled no longer count");
  cr_expect(guard_skip_range(&c, &st, 15, &last, &reason) && last == 20 && reason == GUARD_SKIP_ROLLBACK);
  guard_note_skip(&st, 21, 21, GUARD_SKIP_FLAGGED);
  guard_note_skip(&st, 30, 31, GUARD_SKIP_CONFIG);
  char out[128];
  guard_format_skips(st.skipped.v, st.skipped.rows, out, sizeof out);
  cr_expect_str_eq(out, "10-21,30-31");
  train_state_free(&st);
}

Test(guard, skip_batches_parse) {
  train_config c;
  config_defaults(&c);
  cr_assert_eq(config_set(&c, "train.skip_batches", "5, 10-20,21", &err), 0, "%s", err.msg);
  cr_expect_eq(c.train.n_skip_ranges, 3);
  cr_expect(c.train.skip_ranges[1][0] == 10 && c.train.skip_ranges[1][1] == 20);
  cr_assert_eq(config_set(&c, "train.skip_batches", "", &err), 0, "%s", err.msg);
  cr_expect_eq(c.train.n_skip_ranges, 0);
  const char *bad[] = {"7-3", "1-5,4-9", "9,2", "a", "-1", "1,", "2--3"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    cr_expect_eq(config_set(&c, "train.skip_batches", bad[i], &err), -1, "'%s' accepted", bad[i]);
    cr_expect(strstr(err.msg, "train.skip_batches") != NULL, "'%s': %s", bad[i], err.msg);
  }
}
