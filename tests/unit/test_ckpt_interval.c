/* The checkpoint interval: Young's and Daly's formulas against published
 * values, the controller's clock, its re-estimates, and the config keys. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "ckpt_interval.h"
#include "config.h"

/* Daly (2006), with Young (1974) as its first term: a 60 s checkpoint and a
 * day between interruptions give about 3,220 s (Young) and 3,180 s (Daly). */
Test(ckpt_interval, published_values) {
  cr_assert(fabs(ckpt_interval_young(60, 86400) - 3219.9) < 0.1, "young %f", ckpt_interval_young(60, 86400));
  cr_assert(fabs(ckpt_interval_daly(60, 86400) - 3180.0) < 0.5, "daly %f", ckpt_interval_daly(60, 86400));
  /* Young: sqrt(2 * 30 * 3600) = 464.76 */
  cr_assert(fabs(ckpt_interval_young(30, 3600) - 464.758) < 1e-3);
}

Test(ckpt_interval, daly_limits) {
  /* delta >= 2M: checkpoint once per M */
  cr_assert_float_eq(ckpt_interval_daly(200, 100), 100, 1e-12);
  cr_assert_float_eq(ckpt_interval_daly(200.0001, 100), 100, 1e-12);
  /* delta << M: Daly tends to Young minus delta */
  const double y = ckpt_interval_young(1e-3, 1e6), d = ckpt_interval_daly(1e-3, 1e6);
  cr_assert(fabs(d - (y - 1e-3)) / y < 1e-4, "daly %g young %g", d, y);
  /* the correction term at delta/2M = 1/4: sqrt(2 delta M) (1 + 1/6 + 1/36) - delta */
  const double dd = ckpt_interval_daly(50, 100);
  cr_assert(fabs(dd - (100.0 * (1 + 1.0 / 6 + 1.0 / 36) - 50)) < 1e-9, "%f", dd);
}

Test(ckpt_interval, mtbf_from_starts) {
  cr_assert_float_eq(ckpt_interval_mtbf_estimate(1000, 1000 + 3 * 3600, 3), 3600, 1e-9);
  cr_assert_float_eq(ckpt_interval_mtbf_estimate(1000, 5000, 1), 0, 0); /* one start says nothing */
  cr_assert_float_eq(ckpt_interval_mtbf_estimate(1000, 900, 4), 0, 0);  /* a clock that went back */
}

static train_config cfg_with(const char *every, const char *mtbf, const char *seconds) {
  train_config c;
  config_defaults(&c);
  boost_status err = {0};
  cr_assert(config_set(&c, "ckpt.every", every, &err) == 0, "%s", err.msg);
  if (mtbf) cr_assert(config_set(&c, "ckpt.mtbf", mtbf, &err) == 0, "%s", err.msg);
  if (seconds) cr_assert(config_set(&c, "ckpt.every_seconds", seconds, &err) == 0, "%s", err.msg);
  return c;
}

Test(ckpt_interval, auto_clock) {
  unsetenv("BOOST_CKPT_TEST_DELTA_S");
  train_config c = cfg_with("auto", "2h", NULL);
  cr_assert(c.ckpt.every_auto && c.ckpt.every == 0);
  cr_assert_float_eq(c.ckpt.mtbf_s, 7200, 0);
  ckpt_interval iv;
  ckpt_interval_init(&iv, &c, 0, NULL, 100.0);
  cr_assert_eq(iv.mode, INTERVAL_AUTO);
  cr_assert(!ckpt_interval_due(&iv, 1e9), "no interval before a first estimate");
  char msg[512];
  cr_assert(ckpt_interval_first_estimate(&iv, 2.0, msg, sizeof msg) == 1);
  const double tau = ckpt_interval_daly(2.0, 7200);
  cr_assert_float_eq(iv.tau_s, tau, 1e-9);
  cr_assert(strstr(msg, "checkpoint interval:") && strstr(msg, "ckpt.mtbf"), "%s", msg);
  cr_assert(!ckpt_interval_due(&iv, 100 + tau - 0.01));
  cr_assert(ckpt_interval_due(&iv, 100 + tau + 1e-9));
  ckpt_interval_taken(&iv, 100 + tau);
  cr_assert(!ckpt_interval_due(&iv, 100 + 1.5 * tau));
  /* a cost within 10 %: tau kept, nothing logged; a cost 4x: tau doubles (sqrt) and is logged */
  cr_assert(ckpt_interval_measured(&iv, 2.1, msg, sizeof msg) == 0);
  cr_assert_float_eq(iv.tau_s, tau, 1e-9);
  cr_assert(ckpt_interval_measured(&iv, 8.0, msg, sizeof msg) == 1);
  cr_assert_float_eq(iv.tau_s, ckpt_interval_daly(8.0, 7200), 1e-9);
  cr_assert(strstr(msg, "measured"), "%s", msg);
}

Test(ckpt_interval, mtbf_sources) {
  unsetenv("BOOST_CKPT_TEST_DELTA_S");
  train_config c = cfg_with("auto", NULL, NULL);
  ckpt_interval iv;
  ckpt_interval_init(&iv, &c, 0, NULL, 0);
  cr_assert_float_eq(iv.mtbf_s, CKPT_INTERVAL_DEFAULT_MTBF_S, 0);
  ckpt_interval_init(&iv, &c, 5000, "3 starts", 0);
  cr_assert_float_eq(iv.mtbf_s, 5000, 0);
  c = cfg_with("auto", "600", NULL); /* the key wins over the history */
  ckpt_interval_init(&iv, &c, 5000, "3 starts", 0);
  cr_assert_float_eq(iv.mtbf_s, 600, 0);
  setenv("BOOST_CKPT_TEST_DELTA_S", "0.5", 1);
  ckpt_interval_init(&iv, &c, 0, NULL, 0);
  char msg[512];
  ckpt_interval_first_estimate(&iv, 10.0, msg, sizeof msg);
  cr_assert_float_eq(iv.tau_s, ckpt_interval_daly(0.5, 600), 1e-9);
  ckpt_interval_measured(&iv, 30.0, msg, sizeof msg); /* the injected cost stays */
  cr_assert_float_eq(iv.tau_s, ckpt_interval_daly(0.5, 600), 1e-9);
  unsetenv("BOOST_CKPT_TEST_DELTA_S");
}

Test(ckpt_interval, seconds_and_steps) {
  train_config c = cfg_with("0", NULL, "30");
  ckpt_interval iv;
  ckpt_interval_init(&iv, &c, 0, NULL, 10);
  cr_assert_eq(iv.mode, INTERVAL_SECONDS);
  cr_assert(!ckpt_interval_due(&iv, 39.9) && ckpt_interval_due(&iv, 40));
  c = cfg_with("25", NULL, NULL);
  ckpt_interval_init(&iv, &c, 0, NULL, 10);
  cr_assert_eq(iv.mode, INTERVAL_STEPS);
  cr_assert(!ckpt_interval_due(&iv, 1e9));
  cr_assert_eq(c.ckpt.every, 25);
}

Test(ckpt_interval, bad_values_name_the_key) {
  static const char *const bad[][2] = {{"ckpt.mtbf", "0"},      {"ckpt.mtbf", "-5"},   {"ckpt.mtbf", "abc"},
                                       {"ckpt.mtbf", "3x"},     {"ckpt.mtbf", "nan"},  {"ckpt.every", "-1"},
                                       {"ckpt.every", "often"}, {"ckpt.every", "1.5"}, {"ckpt.every_seconds", "-1"},
                                       {"ckpt.every", "autox"}, {"ckpt.every", "AUTO"},  {"ckpt.every_seconds", "x"},
                                       {"ckpt.mtbf", "0s"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    train_config c;
    config_defaults(&c);
    boost_status err = {0};
    cr_assert(config_set(&c, bad[i][0], bad[i][1], &err) != 0, "%s=%s accepted", bad[i][0], bad[i][1]);
    cr_assert(strstr(err.msg, bad[i][0]), "%s=%s: '%s' does not name the key", bad[i][0], bad[i][1], err.msg);
  }
  train_config c = cfg_with("auto", NULL, "10");
  boost_status err = {0};
  cr_assert(config_validate(&c, &err) != 0 && strstr(err.msg, "ckpt.every_seconds"), "%s", err.msg);
}

Test(ckpt_interval, stored_config_round_trip) {
  /* a checkpoint's config stores ckpt.every as text; older files stored a number */
  train_config c = cfg_with("auto", "90m", NULL), d;
  char *json = config_to_json(&c);
  config_defaults(&d);
  boost_status err = {0};
  cr_assert(config_from_json(&d, json, NULL, &err) == 0, "%s", err.msg);
  cr_assert(d.ckpt.every_auto && fabs(d.ckpt.mtbf_s - 5400) < 1e-9);
  free(json);
  config_defaults(&d);
  cr_assert(config_from_json(&d, "{\"ckpt.every\": 40}", NULL, &err) == 0, "%s", err.msg);
  cr_assert(d.ckpt.every == 40 && !d.ckpt.every_auto);
}

Test(ckpt_interval, local_level_clock_of_its_own) {
  /* ckpt.local_every = auto: a second clock with the file level's M and its
   * own cost; the file level keeps counting steps */
  unsetenv("BOOST_CKPT_TEST_DELTA_S");
  train_config c = cfg_with("40", "1h", "10");
  boost_status err = {0};
  cr_assert(config_set(&c, "ckpt.local_every", "auto", &err) == 0, "%s", err.msg);
  cr_assert(c.ckpt.local.every_auto && c.ckpt.local.every == 0 && c.ckpt.every == 40 && !c.ckpt.every_auto);
  ckpt_interval file, local;
  ckpt_interval_init(&file, &c, 0, NULL, 0);
  ckpt_interval_init_local(&local, &c, 0, NULL, 0);
  cr_assert_eq(file.mode, INTERVAL_SECONDS, "ckpt.every_seconds stays the file level's alone");
  cr_assert_eq(local.mode, INTERVAL_AUTO);
  cr_assert_float_eq(local.mtbf_s, 3600, 0);
  char msg[512];
  cr_assert(ckpt_interval_first_estimate(&local, 0.5, msg, sizeof msg) == 1);
  cr_assert(!strncmp(msg, "local checkpoint interval: ", 27) && strstr(msg, "local checkpoint cost of 0.500 s"), "%s", msg);
  cr_assert(ckpt_interval_measured(&local, 0.002, msg, sizeof msg) == 1);
  cr_assert_float_eq(local.tau_s, ckpt_interval_daly(0.002, 3600), 1e-9);
  cr_assert_float_eq(file.tau_s, 10, 0, "the local level's cost leaves the file level's clock alone");
  /* stored configs: "auto" round-trips, a number of an older file still loads */
  train_config d;
  config_defaults(&d);
  cr_assert(!d.ckpt.local.every_auto && d.ckpt.local.every == 0);
  char *json = config_to_json(&c);
  cr_assert(config_from_json(&d, json, NULL, &err) == 0, "%s", err.msg);
  cr_assert(d.ckpt.local.every_auto);
  free(json);
  config_defaults(&d);
  cr_assert(config_from_json(&d, "{\"ckpt.local_every\": 3}", NULL, &err) == 0, "%s", err.msg);
  cr_assert(d.ckpt.local.every == 3 && !d.ckpt.local.every_auto);
  cr_assert(config_set(&d, "ckpt.local_every", "-2", &err) != 0 && strstr(err.msg, "ckpt.local_every"), "%s", err.msg);
}
