/* The local level's files (ckpt/local/ckpt_local_store.h): the state part
 * round-trips through the schema's tables and refuses a truncated buffer,
 * a flipped byte in a part or a manifest is caught, and the listing keeps
 * only committed steps of the right owner and layout (tensors at the same
 * offsets included), newest first, passing over a previous version's
 * manifest; another run's steps (boost-local-v3: the run's identity) and
 * state parts that disagree with their manifest are passed over and never
 * removed, and no size read from a manifest or a state part decides an
 * allocation beyond what the layout and the step allow. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_local_store.h"
#include "ckpt_run_id.h"

static char dir[128];
static const unsigned char RUN[CKPT_RUN_ID_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const unsigned char OTHER_RUN[CKPT_RUN_ID_BYTES] = {9, 9, 9};

/* rm -r of the test folder, whoever's steps it holds. */
static void remove_all(void) {
  char p[256];
  for (int64_t s = 0; s < 100; s++)
    for (int tmp = 0; tmp < 2; tmp++) ckpt_local_step_path(p, sizeof p, dir, s, tmp), ckpt_local_remove_tree(p);
  rmdir(dir);
}

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/boost_test_local_%d", (int)getpid());
  remove_all();
  cr_assert_eq(mkdir(dir, 0700), 0);
}

static void flip_byte(const char *path, long at) {
  FILE *f = fopen(path, "r+b");
  cr_assert_not_null(f);
  fseek(f, at, SEEK_SET);
  int c = fgetc(f);
  fseek(f, at, SEEK_SET);
  fputc(c ^ 0x20, f);
  fclose(f);
}

Test(ckpt_local, state_part_round_trips_and_refuses_truncation) {
  ckpt_meta m;
  ckpt_meta_init(&m);
  CKPT_META_SET(&m, run, step, 42);
  CKPT_META_SET(&m, run, tokens_seen, 1234.5);
  cr_assert_eq(ckpt_meta_set_str(&m, CKPT_META_F_config, "{\"model.preset\":\"tiny\"}"), 0);
  float loss[3] = {3.5f, 3.25f, 3.0f};
  double val[4] = {1, 2.5, 2, 2.25};
  ckpt_state st;
  memset(&st, 0, sizeof st);
  st.set[CKPT_STATE_loss_history] = (ckpt_series){loss, 3};
  st.set[CKPT_STATE_val_loss_history] = (ckpt_series){val, 2};
  unsigned char *buf;
  size_t len;
  cr_assert_eq(ckpt_local_pack(&m, &st, &buf, &len), 0);
  ckpt_meta m2;
  ckpt_state st2;
  boost_status err = {0};
  cr_assert_eq(ckpt_local_unpack(buf, len, &m2, &st2, &err), 0, "%s", err.msg);
  cr_expect_eq(m2.present, m.present);
  cr_expect_eq(m2.run.step, 42);
  cr_expect_eq(m2.run.tokens_seen, 1234.5);
  cr_expect_str_eq(m2.run.config, m.run.config);
  cr_assert_eq(st2.set[CKPT_STATE_loss_history].rows, 3);
  cr_expect_eq(memcmp(st2.set[CKPT_STATE_loss_history].data, loss, sizeof loss), 0);
  cr_assert_eq(st2.set[CKPT_STATE_val_loss_history].rows, 2);
  cr_expect_eq(memcmp(st2.set[CKPT_STATE_val_loss_history].data, val, sizeof val), 0);
  cr_expect_eq(st2.set[CKPT_STATE_run_starts].rows, 0);
  ckpt_meta_free(&m2);
  ckpt_state_free(&st2);
  cr_expect_eq(ckpt_local_unpack(buf, len - 1, &m2, &st2, &err), -1);
  cr_expect(strstr(err.msg, "state part is malformed") != NULL, "%s", err.msg);
  free(buf);
  ckpt_meta_free(&m);
}

Test(ckpt_local, a_flipped_byte_is_caught) {
  make_dir();
  char path[256];
  snprintf(path, sizeof path, "%s/part.bin", dir);
  char data[5000];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (char)(i * 7);
  uint64_t sum;
  boost_status err = {0};
  cr_assert_eq(ckpt_local_write_small(path, data, sizeof data, &sum, &err), 0, "%s", err.msg);
  unsigned char *back;
  cr_assert_eq(ckpt_local_read_small(path, sizeof data, sum, &back, &err), 0, "%s", err.msg);
  cr_expect_eq(memcmp(back, data, sizeof data), 0);
  free(back);
  flip_byte(path, 2500);
  cr_expect_eq(ckpt_local_read_small(path, sizeof data, sum, &back, &err), -1);
  cr_expect(strstr(err.msg, "checksum mismatch") != NULL && strstr(err.msg, path) != NULL, "%s", err.msg);
  cr_expect_eq(ckpt_local_read_small(path, sizeof data + 1, sum, &back, &err), -1);
  cr_expect(strstr(err.msg, "the manifest says") != NULL, "%s", err.msg);
  ckpt_local_remove_tree(path);
  rmdir(dir);
}

/* A step directory of the run `run` with a manifest of owner `owner`,
 * its arena parts' sizes those of the shape. */
static void step_dir_of(const unsigned char *run, int64_t step, int owner, int tmp, const ckpt_local_shape *shape) {
  char p[256];
  boost_status err = {0};
  ckpt_local_step_path(p, sizeof p, dir, step, tmp);
  cr_assert_eq(mkdir(p, 0700), 0);
  ckpt_local_manifest man;
  memset(&man, 0, sizeof man);
  memcpy(man.run_id, run, sizeof man.run_id);
  man.step = step;
  man.shape = *shape;
  man.shape.owner_rank = owner;
  man.bytes[LOCAL_PARAMS] = shape->numel * 4;
  man.bytes[LOCAL_ADAM_M] = man.bytes[LOCAL_ADAM_V] = (shape->mom_end - shape->mom_begin) * 4;
  cr_assert_eq(ckpt_local_write_manifest(p, &man, &err), 0, "%s", err.msg);
}
static void step_dir(int64_t step, int owner, int tmp, const ckpt_local_shape *shape) {
  step_dir_of(RUN, step, owner, tmp, shape);
}

Test(ckpt_local, listing_keeps_committed_steps_of_this_rank_and_layout) {
  make_dir();
  ckpt_local_shape shape = {3, 4, 2, 2, 1, 1, 1000, 0, 1000, 77};
  step_dir(5, 3, 0, &shape);
  step_dir(12, 3, 0, &shape);
  step_dir(13, 3, 1, &shape); /* being written */
  step_dir(9, 2, 0, &shape);  /* another rank's */
  ckpt_local_shape other = shape;
  other.tp = 4;
  step_dir(11, 3, 0, &other); /* another layout's */
  ckpt_local_shape moved = shape;
  moved.tensors_sum = 78;
  step_dir(10, 3, 0, &moved); /* the same sizes, tensors at other offsets (a build that rounds them otherwise) */
  int64_t steps[8];
  boost_status why = {0};
  const int n = ckpt_local_list(dir, 3, &shape, RUN, steps, 8, &why);
  cr_assert_eq(n, 2, "%d: %s", n, why.msg);
  cr_expect_eq(steps[0], 12);
  cr_expect_eq(steps[1], 5);
  cr_expect(strstr(why.msg, "step_00000011 was written by another layout") != NULL, "%s", why.msg);
  why = (boost_status){0};
  cr_expect_eq(ckpt_local_list(dir, 3, &moved, RUN, steps, 8, &why), 1);
  cr_expect_eq(steps[0], 10);
  cr_expect(strstr(why.msg, "step_00000012 was written by another layout (world 4 dp 2 tp 2 pp 1, 1000 floats, tensors "
                            "placed otherwise in the arenas)") != NULL,
            "%s", why.msg);
  /* a damaged manifest: passed over */
  char p[256];
  snprintf(p, sizeof p, "%s/step_00000012/manifest.bin", dir);
  flip_byte(p, 20);
  cr_expect_eq(ckpt_local_list(dir, 3, &shape, RUN, steps, 8, NULL), 1);
  cr_expect_eq(steps[0], 5);
  /* only what is older than a kept step goes, temporaries included */
  /* only what is older than a kept step goes, temporaries included; the
   * damaged 12 is no step this run can tell as its own: left alone */
  cr_expect_eq(ckpt_local_remove_steps(dir, 11, 1, RUN), 1); /* 13.tmp */
  cr_expect_eq(ckpt_local_remove_steps(dir, 5, 0, RUN), 3);  /* 9, 10 and 11 */
  cr_expect_eq(ckpt_local_list(dir, 3, &shape, RUN, steps, 8, NULL), 1);
  ckpt_local_step_path(p, sizeof p, dir, 12, 0);
  cr_expect_eq(access(p, F_OK), 0, "the damaged step was removed");
  remove_all();
  cr_expect_eq(access(dir, F_OK), -1);
}

/* A step written before the manifest carried the tensors' places
 * (boost-local-v1: the record without tensors_sum) is passed over, never
 * read into arenas whose tensors may lie elsewhere: the restart goes
 * through the file. */
Test(ckpt_local, a_manifest_of_the_previous_version_is_passed_over) {
  make_dir();
  char p[256];
  boost_status why = {0};
  ckpt_local_step_path(p, sizeof p, dir, 7, 0);
  cr_assert_eq(mkdir(p, 0700), 0);
  unsigned char v1[sizeof(ckpt_local_manifest) - sizeof(uint64_t)];
  memset(v1, 0, sizeof v1);
  memcpy(v1, "boost-local-v1", sizeof "boost-local-v1");
  char path[300];
  snprintf(path, sizeof path, "%s/manifest.bin", p);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(v1, 1, sizeof v1, f), sizeof v1);
  fclose(f);
  int64_t steps[2];
  cr_expect_eq(ckpt_local_list(dir, 0, NULL, RUN, steps, 2, &why), 0);
  cr_expect(strstr(why.msg, "a manifest of another format (boost-local-v1") != NULL, "%s", why.msg);
  /* boost-local-v2 (no identity): another format, passed over and left */
  ckpt_local_manifest v2;
  memset(&v2, 0, sizeof v2);
  ckpt_local_step_path(p, sizeof p, dir, 8, 0);
  cr_assert_eq(mkdir(p, 0700), 0);
  cr_assert_eq(ckpt_local_write_manifest(p, &v2, &why), 0);
  snprintf(path, sizeof path, "%s/manifest.bin", p);
  f = fopen(path, "wb"); /* the v2 record: no identity, 16 bytes shorter */
  cr_assert_not_null(f);
  unsigned char rec[sizeof(ckpt_local_manifest) - CKPT_RUN_ID_BYTES] = {0};
  memcpy(rec, "boost-local-v2", 14);
  cr_assert_eq(fwrite(rec, 1, sizeof rec, f), sizeof rec);
  fclose(f);
  cr_expect_eq(ckpt_local_list(dir, 0, NULL, RUN, steps, 2, &why), 0);
  cr_expect(strstr(why.msg, "a manifest of another format (boost-local-v2, this boost writes boost-local-v3): passed "
                            "over, left in place") != NULL,
            "%s", why.msg);
  cr_expect_eq(ckpt_local_owner(p, RUN), LOCAL_OTHER);
  cr_expect_eq(ckpt_local_remove_steps(dir, -1, 0, RUN), 0);
  remove_all();
  cr_expect_eq(access(dir, F_OK), -1);
}

/* A step of another run, its checksums valid: passed over with a line that
 * says so, never removed by this run. */
Test(ckpt_local, another_runs_step_is_passed_over_and_left) {
  make_dir();
  ckpt_local_shape shape = {0, 2, 2, 1, 1, 2, 100, 0, 50, 5};
  step_dir_of(OTHER_RUN, 20, 0, 0, &shape);
  step_dir(10, 0, 0, &shape);
  int64_t steps[4];
  boost_status why = {0};
  cr_assert_eq(ckpt_local_list(dir, 0, &shape, RUN, steps, 4, &why), 1);
  cr_expect_eq(steps[0], 10);
  cr_expect(strstr(why.msg, "step_00000020 is another run's (identity 09090900") != NULL, "%s", why.msg);
  cr_expect(strstr(why.msg, "left in place") != NULL, "%s", why.msg);
  cr_expect_eq(ckpt_local_list(dir, 0, NULL, RUN, steps, 4, NULL), 1); /* the peek's listing too */
  const unsigned char none[CKPT_RUN_ID_BYTES] = {0};
  cr_expect_eq(ckpt_local_list(dir, 0, &shape, none, steps, 4, NULL), 0); /* no identity: nothing is ours */
  cr_expect_eq(ckpt_local_remove_steps(dir, -1, 0, RUN), 1);             /* 10 only */
  char p[256];
  ckpt_local_step_path(p, sizeof p, dir, 20, 0);
  cr_expect_eq(access(p, F_OK), 0);
  cr_expect_eq(ckpt_local_remove_steps(dir, -1, 0, none), 0);
  remove_all();
}

/* Sizes: a manifest whose arena part is not its layout's, or whose state
 * part is larger than its step allows, is refused before any read; the
 * state part's unpack never allocates more than the buffer holds. */
Test(ckpt_local, sizes_from_outside_are_checked) {
  ckpt_local_shape shape = {0, 1, 1, 1, 1, 1, 100, 0, 100, 5};
  ckpt_local_manifest m;
  memset(&m, 0, sizeof m);
  memcpy(m.run_id, RUN, sizeof RUN);
  m.step = 7;
  m.shape = shape;
  m.bytes[LOCAL_PARAMS] = m.bytes[LOCAL_ADAM_M] = m.bytes[LOCAL_ADAM_V] = 400;
  boost_status why = {0};
  cr_expect_eq(ckpt_local_manifest_fits(&m, "x", 7, &shape, RUN, &why), 0, "%s", why.msg);
  cr_expect_eq(ckpt_local_manifest_fits(&m, "x", 8, &shape, RUN, &why), -1);
  cr_expect(strstr(why.msg, "its manifest says step 7") != NULL, "%s", why.msg);
  m.bytes[LOCAL_ADAM_M] = 1ull << 40;
  cr_expect_eq(ckpt_local_manifest_fits(&m, "x", 7, &shape, RUN, &why), -1);
  cr_expect(strstr(why.msg, "adam_m part has 1099511627776 bytes where its layout holds 400") != NULL, "%s", why.msg);
  m.bytes[LOCAL_ADAM_M] = 400;
  m.bytes[LOCAL_STATE] = ckpt_local_state_bound(7) + 1;
  cr_expect_eq(ckpt_local_manifest_fits(&m, "x", 7, &shape, RUN, &why), -1);
  cr_expect(strstr(why.msg, "more than a step-7 state can hold") != NULL, "%s", why.msg);
  cr_expect(ckpt_local_state_bound(INT64_MAX) > ckpt_local_state_bound(7)); /* no overflow */
  /* a state part claiming 2^40 rows of a table in 20 bytes */
  unsigned char buf[4 + 8 + 8] = {0};
  const int64_t rows = 1ll << 40;
  memcpy(buf + 4, &rows, 8);
  ckpt_meta meta;
  ckpt_state st;
  cr_expect_eq(ckpt_local_unpack(buf, sizeof buf, &meta, &st, &why), -1);
  uint32_t present = 1u << 31; /* a field the schema does not have */
  memcpy(buf, &present, 4);
  cr_expect_eq(ckpt_local_unpack(buf, 4, &meta, &st, &why), -1);
}

/* A state part that says another step, run or layout than its manifest. */
Test(ckpt_local, a_state_part_must_agree_with_its_manifest) {
  ckpt_meta meta;
  ckpt_meta_init(&meta);
  CKPT_META_SET(&meta, run, step, 11);
  char hex[CKPT_RUN_ID_HEX + 1];
  ckpt_run_id_from_bytes(RUN, hex);
  cr_assert_eq(ckpt_meta_set_str(&meta, CKPT_META_F_run_id, hex), 0);
  cr_assert_eq(ckpt_meta_set_str(&meta, CKPT_META_F_layout, "{\"world_size\":2,\"dp\":2,\"tp\":1,\"pp\":1}"), 0);
  ckpt_state st;
  memset(&st, 0, sizeof st);
  unsigned char *buf;
  size_t len;
  cr_assert_eq(ckpt_local_pack(&meta, &st, &buf, &len), 0);
  ckpt_local_manifest m;
  memset(&m, 0, sizeof m);
  memcpy(m.run_id, RUN, sizeof RUN);
  m.step = 11;
  m.shape = (ckpt_local_shape){0, 2, 2, 1, 1, 2, 100, 0, 50, 5};
  boost_status why = {0};
  cr_expect_eq(ckpt_local_state_agrees(buf, len, &m, &why), 0, "%s", why.msg);
  m.step = 99999999;
  cr_expect_eq(ckpt_local_state_agrees(buf, len, &m, &why), -1);
  cr_expect(strstr(why.msg, "its state part is of step 11, its manifest says 99999999") != NULL, "%s", why.msg);
  m.step = 11;
  memcpy(m.run_id, OTHER_RUN, sizeof OTHER_RUN);
  cr_expect_eq(ckpt_local_state_agrees(buf, len, &m, &why), -1);
  cr_expect(strstr(why.msg, "another run") != NULL, "%s", why.msg);
  memcpy(m.run_id, RUN, sizeof RUN);
  m.shape.dp = 4;
  cr_expect_eq(ckpt_local_state_agrees(buf, len, &m, &why), -1);
  cr_expect(strstr(why.msg, "layout") != NULL, "%s", why.msg);
  free(buf);
  ckpt_meta_free(&meta);
}

/* The run identity: 32 hex digits both ways, a marker written atomically
 * and read back, anything else read as none. */
Test(ckpt_local, run_identity_and_its_marker) {
  char a[CKPT_RUN_ID_HEX + 1], b[CKPT_RUN_ID_HEX + 1];
  boost_status err = {0};
  cr_assert_eq(ckpt_run_id_new(a, &err), 0, "%s", err.msg);
  cr_assert_eq(ckpt_run_id_new(b, &err), 0, "%s", err.msg);
  cr_expect(ckpt_run_id_valid(a) && ckpt_run_id_valid(b) && strcmp(a, b) != 0, "%s %s", a, b);
  unsigned char raw[CKPT_RUN_ID_BYTES];
  ckpt_run_id_to_bytes(a, raw);
  ckpt_run_id_from_bytes(raw, b);
  cr_expect_str_eq(a, b);
  cr_expect(!ckpt_run_id_valid("0123") && !ckpt_run_id_valid("0123456789ABCDEF0123456789abcdef"));
  make_dir();
  cr_expect_eq(ckpt_run_id_read_marker(dir, b), 0);
  cr_assert_eq(ckpt_run_id_write_marker(dir, a, &err), 0, "%s", err.msg);
  cr_expect_eq(ckpt_run_id_read_marker(dir, b), 1);
  cr_expect_str_eq(a, b);
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, CKPT_RUN_ID_MARKER);
  flip_byte(p, 3);
  cr_expect_eq(ckpt_run_id_read_marker(dir, b), 0);
  cr_expect_str_eq(b, "");
  ckpt_meta m;
  ckpt_meta_init(&m);
  cr_assert_eq(ckpt_meta_set_str(&m, CKPT_META_F_run_id, a), 0);
  ckpt_run_id_expected(dir, &m, b); /* the newest file's first */
  cr_expect_str_eq(a, b);
  ckpt_meta_free(&m);
  unlink(p);
  remove_all();
}
