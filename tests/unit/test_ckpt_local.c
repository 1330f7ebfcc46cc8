/* The local level's files (ckpt/ckpt_local_store.h): the state part
 * round-trips through the schema's tables and refuses a truncated buffer,
 * a flipped byte in a part or a manifest is caught, and the listing keeps
 * only committed steps of the right owner and layout (tensors at the same
 * offsets included), newest first, passing over a previous version's
 * manifest. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_local_store.h"

static char dir[128];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/boost_test_local_%d", (int)getpid());
  ckpt_local_remove_steps(dir, -1, 0);
  rmdir(dir);
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

/* A committed step directory with a manifest of owner `owner`. */
static void step_dir(int64_t step, int owner, int tmp, const ckpt_local_shape *shape) {
  char p[256];
  boost_status err = {0};
  ckpt_local_step_path(p, sizeof p, dir, step, tmp);
  cr_assert_eq(mkdir(p, 0700), 0);
  ckpt_local_manifest man;
  memset(&man, 0, sizeof man);
  man.step = step;
  man.shape = *shape;
  man.shape.owner_rank = owner;
  cr_assert_eq(ckpt_local_write_manifest(p, &man, &err), 0, "%s", err.msg);
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
  const int n = ckpt_local_list(dir, 3, &shape, steps, 8, &why);
  cr_assert_eq(n, 2, "%d: %s", n, why.msg);
  cr_expect_eq(steps[0], 12);
  cr_expect_eq(steps[1], 5);
  cr_expect(strstr(why.msg, "step_00000011 was written by another layout") != NULL, "%s", why.msg);
  why = (boost_status){0};
  cr_expect_eq(ckpt_local_list(dir, 3, &moved, steps, 8, &why), 1);
  cr_expect_eq(steps[0], 10);
  cr_expect(strstr(why.msg, "step_00000012 was written by another layout (world 4 dp 2 tp 2 pp 1, 1000 floats, tensors "
                            "placed otherwise in the arenas)") != NULL,
            "%s", why.msg);
  /* a damaged manifest: passed over */
  char p[256];
  snprintf(p, sizeof p, "%s/step_00000012/manifest.bin", dir);
  flip_byte(p, 20);
  cr_expect_eq(ckpt_local_list(dir, 3, &shape, steps, 8, NULL), 1);
  cr_expect_eq(steps[0], 5);
  /* only what is older than a kept step goes, temporaries included */
  cr_expect_eq(ckpt_local_remove_steps(dir, 11, 1), 2); /* 12 and 13.tmp */
  cr_expect_eq(ckpt_local_remove_steps(dir, 5, 0), 3);  /* 9, 10 and 11 */
  cr_expect_eq(ckpt_local_list(dir, 3, &shape, steps, 8, NULL), 1);
  ckpt_local_remove_steps(dir, -1, 0);
  cr_expect_eq(rmdir(dir), 0);
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
  cr_expect_eq(ckpt_local_list(dir, 0, NULL, steps, 2, &why), 0);
  cr_expect(strstr(why.msg, "not a manifest") != NULL, "%s", why.msg);
  ckpt_local_remove_steps(dir, -1, 0);
  cr_expect_eq(rmdir(dir), 0);
}
