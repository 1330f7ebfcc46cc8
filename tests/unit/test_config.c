/* Config: presets, precedence, and every kind of bad input. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static boost_status err = {0};

static const char *write_ini(const char *text) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/boost_test_cfg_%d.ini", (int)getpid());
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

Test(config, presets_match_the_table) {
  train_config c;
  char *sets[] = {"model.preset=cola-60m"};
  cr_assert_eq(config_resolve(&c, NULL, 1, sets, &err), 0, "%s", err.msg);
  cr_expect_eq(c.model.d_model, 512);
  cr_expect_eq(c.model.n_layers, 8);
  cr_expect_eq(c.model.n_heads, 8);
  cr_expect_eq(c.model.ffn, 1376);
  cr_expect_eq(c.model.rank_attn, 128);
  cr_expect_eq(c.model.lowrank_mask, (1u << PROJ_COUNT) - 1);
  char *full[] = {"model.preset=llama-1b"};
  cr_assert_eq(config_resolve(&c, NULL, 1, full, &err), 0, "%s", err.msg);
  cr_expect_eq(c.model.d_model, 2048);
  cr_expect_eq(c.model.ffn, 5472);
  cr_expect_eq(c.model.lowrank_mask, 0u);
}

Test(config, explicit_keys_override_the_preset_in_any_order) {
  train_config c;
  const char *path = write_ini("[model]\nd_model = 256\npreset = cola-60m\n[train]\nlr = 0.5\n");
  char *sets[] = {"train.lr=0.25", "model.rank_mlp=32"};
  cr_assert_eq(config_resolve(&c, path, 2, sets, &err), 0, "%s", err.msg);
  cr_expect_eq(c.model.d_model, 256, "file key after the preset keeps its value");
  cr_expect_eq(c.model.n_layers, 8, "preset applied");
  cr_expect_float_eq(c.train.lr, 0.25f, 1e-9, "--set outranks the file");
  cr_expect_eq(c.model.rank_mlp, 32);
  char *preset_cli[] = {"model.preset=tiny"};
  cr_assert_eq(config_resolve(&c, path, 1, preset_cli, &err), 0, "%s", err.msg);
  cr_expect_eq(c.model.n_layers, 4, "--set preset outranks the file's preset");
  cr_expect_eq(c.model.d_model, 256, "the file's explicit key still outranks any preset");
  unlink(path);
}

Test(config, lowrank_list_selects_projections) {
  train_config c;
  char *sets[] = {"model.lowrank=q,k,down"};
  cr_assert_eq(config_resolve(&c, NULL, 1, sets, &err), 0, "%s", err.msg);
  cr_expect_eq(c.model.lowrank_mask, (1u << PROJ_Q) | (1u << PROJ_K) | (1u << PROJ_DOWN));
}

static void expect_error(int nsets, char **sets, const char *needle) {
  train_config c;
  err = (boost_status){0};
  cr_assert_neq(config_resolve(&c, NULL, nsets, sets, &err), 0, "accepted %s", sets[0]);
  cr_expect_not_null(strstr(err.msg, needle), "error '%s' does not mention '%s'", err.msg, needle);
  cr_expect_null(strchr(err.msg, '\n'), "error is one line");
}

Test(config, bad_inputs_name_the_problem) {
  expect_error(1, (char *[]){"model.nope=3"}, "model.nope");
  expect_error(1, (char *[]){"model.d_model=abc"}, "model.d_model");
  expect_error(1, (char *[]){"model.d_model=-4"}, "out of range");
  expect_error(1, (char *[]){"train.lr=nan"}, "train.lr");
  expect_error(1, (char *[]){"model.preset=gpt-5"}, "gpt-5");
  expect_error(1, (char *[]){"noequals"}, "noequals");
  expect_error(1, (char *[]){"model.n_heads=3"}, "not divisible");
  expect_error(1, (char *[]){"model.lowrank=q,zz"}, "zz");
  expect_error(1, (char *[]){"model.rank_attn=100"}, "rank_attn");
  expect_error(1, (char *[]){"parallel.tp_mode=fast"}, "tp_mode");
  expect_error(1, (char *[]){"model.tie_embeddings=maybe"}, "tie_embeddings");
  expect_error(1, (char *[]){"train.steps=99999999999999999999"}, "train.steps");
}

Test(config, bad_files_name_the_file) {
  train_config c;
  cr_assert_neq(config_resolve(&c, "/nonexistent/x.ini", 0, NULL, &err), 0);
  cr_expect_not_null(strstr(err.msg, "/nonexistent/x.ini"), "%s", err.msg);
  const char *path = write_ini("[model]\nthis line has no equals sign\n");
  cr_assert_neq(config_resolve(&c, path, 0, NULL, &err), 0);
  cr_expect_not_null(strstr(err.msg, "malformed"), "%s", err.msg);
  path = write_ini("[model]\nwidth = 3\n");
  cr_assert_neq(config_resolve(&c, path, 0, NULL, &err), 0);
  cr_expect_not_null(strstr(err.msg, "model.width"), "%s", err.msg);
  unlink(path);
}

Test(config, json_round_trips_every_key) {
  train_config c;
  config_defaults(&c);
  cr_assert_eq(config_validate(&c, &err), 0, "%s", err.msg);
  char *json = config_to_json(&c);
  for (const char *const *k = config_key_names(); *k; k++) {
    char quoted[128];
    snprintf(quoted, sizeof quoted, "\"%s\"", *k);
    cr_expect_not_null(strstr(json, quoted), "%s missing from JSON", *k);
  }
  free(json);
}

Test(config, enum_keys_parse_once_into_enums) {
  train_config c;
  config_defaults(&c);
  cr_expect_eq(c.parallel.tp_mode, TP_AUTO);
  cr_assert_eq(config_set(&c, "parallel.tp_mode", "vanilla", &err), 0, "%s", err.msg);
  cr_expect_eq(c.parallel.tp_mode, TP_VANILLA);
  cr_assert_eq(config_set(&c, "parallel.recompute", "lowrank", &err), 0, "%s", err.msg);
  cr_expect_eq(c.parallel.recompute, RECOMPUTE_LOWRANK);
  cr_assert_eq(config_set(&c, "ckpt.activations", "all", &err), 0, "%s", err.msg);
  cr_expect_eq(c.ckpt.activations, ACTS_ALL);
  /* "none" names TP_NONE internally but is not a value users may set */
  cr_expect_eq(config_set(&c, "parallel.tp_mode", "none", &err), -1);
  cr_expect(strstr(err.msg, "auto, btp, vanilla or megatron") != NULL, "%s", err.msg);
  cr_expect_eq(c.data.order, DATA_ORDER_SHUFFLED);
  cr_assert_eq(config_set(&c, "data.order", "sequential", &err), 0, "%s", err.msg);
  cr_expect_eq(c.data.order, DATA_ORDER_SEQUENTIAL);
  cr_expect_eq(config_set(&c, "data.order", "random", &err), -1);
  cr_expect(strstr(err.msg, "data.order") && strstr(err.msg, "shuffled or sequential") && !strchr(err.msg, '\n'), "%s", err.msg);
  char *json = config_to_json(&c); /* the copy checkpoints store: what a resume compares */
  cr_expect(strstr(json, "\"data.order\":\"sequential\"") != NULL, "%s", json);
  cr_expect(strstr(json, "\"parallel.tp_mode\":\"vanilla\"") != NULL, "%s", json);
  cr_expect(strstr(json, "\"ckpt.activations\":\"all\"") != NULL, "%s", json);
  free(json);
}

Test(config, resume_is_a_tagged_value_parsed_once) {
  train_config cfg;
  config_defaults(&cfg);
  cr_expect_eq(cfg.ckpt.resume.kind, RESUME_AUTO);
  const struct {
    const char *text;
    resume_kind kind;
  } cases[] = {{"none", RESUME_NONE}, {"", RESUME_NONE}, {"auto", RESUME_AUTO}, {"/runs/a/step_00000040.h5", RESUME_PATH},
               {"none/x", RESUME_PATH}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cr_assert_eq(config_set(&cfg, "ckpt.resume", cases[i].text, &err), 0, "%s", err.msg);
    cr_expect_eq(cfg.ckpt.resume.kind, cases[i].kind, "ckpt.resume=%s", cases[i].text);
    cr_expect_str_eq(cfg.ckpt.resume.text, cases[i].text);
  }
  /* and through the JSON a checkpoint stores */
  char *json = config_to_json(&cfg);
  train_config back;
  config_defaults(&back);
  cr_assert_eq(config_from_json(&back, json, NULL, &err), 0, "%s", err.msg);
  cr_expect_eq(back.ckpt.resume.kind, RESUME_PATH);
  free(json);
}

Test(config, help_lists_default_allowed_and_meaning_of_every_key) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cr_assert_not_null(f);
  config_print_help(f);
  fclose(f);
  for (const char *const *k = config_key_names(); *k; k++) {
    const char *at = strstr(buf, *k);
    cr_assert_not_null(at, "%s missing from help", *k);
    const char *next = strstr(at, "default: ");
    cr_expect(next != NULL && strstr(next, "allowed: ") != NULL, "%s has no default/allowed line", *k);
  }
  cr_expect(strstr(buf, "default: auto; allowed: auto, btp, vanilla or megatron") != NULL);
  cr_expect(strstr(buf, "default: 1; allowed: integer 1..19") != NULL);
  free(buf);
}

Test(config, staging_limit_takes_sizes_and_percentages) {
  train_config c;
  config_defaults(&c);
  cr_assert_eq(c.ckpt.staging_limit.percent, 100.0, "the default stages everything");
  const struct {
    const char *text;
    double bytes, percent;
  } ok[] = {{"25%", 0, 25}, {"2G", 2147483648.0, 0}, {"1.5GiB", 1610612736.0, 0}, {"512MB", 536870912.0, 0},
            {"300k", 307200.0, 0}, {"4096", 4096.0, 0}, {"150%", 0, 150}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    cr_assert_eq(config_set(&c, "ckpt.staging_limit", ok[i].text, &err), 0, "%s: %s", ok[i].text, err.msg);
    cr_assert_eq(c.ckpt.staging_limit.bytes, ok[i].bytes, "%s", ok[i].text);
    cr_assert_eq(c.ckpt.staging_limit.percent, ok[i].percent, "%s", ok[i].text);
  }
  const char *bad[] = {"-5", "0", "abc", "12Q", "10%%", "", "2GiBs", "nan", "-25%"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_neq(config_set(&c, "ckpt.staging_limit", bad[i], &err), 0, "'%s' was accepted", bad[i]);
    cr_assert(strstr(err.msg, "ckpt.staging_limit") != NULL, "'%s': %s", bad[i], err.msg);
  }
}
