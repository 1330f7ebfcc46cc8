/* The local level's folders as private places (ckpt/local/ckpt_private.h):
 * a folder open to others, of another user, a link or a file where a
 * folder should be is refused by name; files go in under a temporary name
 * and never through a link; removal unlinks a link as a link (its target,
 * a canary folder, untouched); every committed step is listed, however
 * many there are. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_local_store.h"
#include "ckpt_private.h"
#include "ckpt_run_id.h"

static char dir[128], canary[160];

static void put_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  fclose(f);
}

static void expect_file(const char *path, const char *text) {
  char buf[256] = "";
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s is gone", path);
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  cr_expect_str_eq(buf, text, "%s changed", path);
}

static void rm_rf(const char *path) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  cr_assert_eq(system(cmd), 0);
}

/* dir (0700, empty) and a canary folder beside it with two files. */
static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/boost_test_private_%d", (int)getpid());
  snprintf(canary, sizeof canary, "%s.canary", dir);
  rm_rf(dir);
  rm_rf(canary);
  cr_assert_eq(mkdir(dir, 0700), 0);
  cr_assert_eq(chmod(dir, 0700), 0);
  cr_assert_eq(mkdir(canary, 0700), 0);
  char p[256];
  snprintf(p, sizeof p, "%s/a", canary);
  put_file(p, "canary a");
  snprintf(p, sizeof p, "%s/b", canary);
  put_file(p, "canary b");
}

static void teardown(void) {
  rm_rf(dir);
  rm_rf(canary);
}

static void expect_canary(void) {
  char p[256];
  snprintf(p, sizeof p, "%s/a", canary);
  expect_file(p, "canary a");
  snprintf(p, sizeof p, "%s/b", canary);
  expect_file(p, "canary b");
}

Test(ckpt_private, links_at_a_step_or_a_part_are_removed_as_links, .init = setup, .fini = teardown) {
  char p[256], q[300];
  snprintf(p, sizeof p, "%s/step_00000001", dir);
  cr_assert_eq(symlink(canary, p), 0);
  snprintf(p, sizeof p, "%s/step_00000002", dir);
  cr_assert_eq(mkdir(p, 0700), 0);
  snprintf(q, sizeof q, "%s/params.bin", p);
  snprintf(p, sizeof p, "%s/a", canary);
  cr_assert_eq(symlink(p, q), 0);
  /* Neither is a step of this run: the cleanup leaves both alone (never
   * reading through the links); removing them by name takes the links only. */
  static const unsigned char run[CKPT_RUN_ID_BYTES] = {1, 2, 3};
  cr_expect_eq(ckpt_local_remove_steps(dir, -1, 0, run), 0);
  expect_canary();
  struct stat st;
  snprintf(p, sizeof p, "%s/step_00000001", dir);
  cr_expect_eq(ckpt_local_remove_tree(p), 0);
  cr_expect_neq(lstat(p, &st), 0, "the link is still there");
  snprintf(p, sizeof p, "%s/step_00000002", dir);
  cr_expect_eq(ckpt_local_remove_tree(p), 0);
  cr_expect_neq(lstat(p, &st), 0, "the folder holding a link is still there");
  expect_canary();
}

Test(ckpt_private, folders_open_to_others_of_another_user_or_links_are_refused, .init = setup, .fini = teardown) {
  boost_status err = {0};
  int fd = ckpt_private_open(dir, 0, &err);
  cr_assert_geq(fd, 0, "%s", err.msg);
  close(fd);
  char p[256], want[400];
  /* open to the group and others */
  snprintf(p, sizeof p, "%s/rank_00000", dir);
  cr_assert_eq(mkdir(p, 0700), 0);
  cr_assert_eq(chmod(p, 0755), 0);
  cr_expect_eq(ckpt_private_open(p, 1, &err), -1);
  snprintf(want, sizeof want, "ckpt.local_dir %s: mode 0755 lets other users in (group or other permission bits): "
           "remove it or set another ckpt.local_dir", p);
  cr_expect_str_eq(err.msg, want);
  /* a link where a folder should be, at a rank and (at the start's check of the entries) at a step */
  err = (boost_status){0};
  snprintf(p, sizeof p, "%s/rank_00001", dir);
  cr_assert_eq(symlink(canary, p), 0);
  cr_expect_eq(ckpt_private_open(p, 1, &err), -1);
  cr_expect(strstr(err.msg, "rank_00001: a symbolic link, not a folder: remove it") != NULL, "%s", err.msg);
  err = (boost_status){0};
  snprintf(p, sizeof p, "%s/step_00000003", dir);
  cr_assert_eq(symlink(canary, p), 0);
  cr_expect_eq(ckpt_private_check_entries(dir, "step_", &err), -1);
  cr_expect(strstr(err.msg, "step_00000003: a symbolic link, not a folder") != NULL, "%s", err.msg);
  /* a file */
  err = (boost_status){0};
  snprintf(p, sizeof p, "%s/rank_00002", dir);
  put_file(p, "x");
  cr_expect_eq(ckpt_private_open(p, 1, &err), -1);
  cr_expect(strstr(err.msg, "rank_00002: not a folder") != NULL, "%s", err.msg);
  /* another user's (root can make one) */
  if (geteuid() == 0) {
    err = (boost_status){0};
    snprintf(p, sizeof p, "%s/rank_00003", dir);
    cr_assert_eq(mkdir(p, 0700), 0);
    cr_assert_eq(chown(p, 65534, 65534), 0);
    cr_expect_eq(ckpt_private_open(p, 1, &err), -1);
    snprintf(want, sizeof want, "ckpt.local_dir %s: owned by uid 65534, not by you (uid 0): remove it or set another "
             "ckpt.local_dir", p);
    cr_expect_str_eq(err.msg, want);
  }
  expect_canary();
}

Test(ckpt_private, files_go_in_under_a_temporary_name_never_through_a_link, .init = setup, .fini = teardown) {
  char p[256], q[256], a[256], b[256];
  snprintf(a, sizeof a, "%s/a", canary);
  snprintf(b, sizeof b, "%s/b", canary);
  snprintf(p, sizeof p, "%s/state.bin", dir);
  snprintf(q, sizeof q, "%s/state.bin.part", dir);
  cr_assert_eq(symlink(a, p), 0); /* at the final name */
  cr_assert_eq(symlink(b, q), 0); /* at the temporary's */
  boost_status err = {0};
  uint64_t sum;
  cr_assert_eq(ckpt_local_write_small(p, "new", 3, &sum, &err), 0, "%s", err.msg);
  struct stat st;
  cr_assert_eq(lstat(p, &st), 0);
  cr_expect(S_ISREG(st.st_mode), "state.bin is not a regular file");
  cr_expect_eq(st.st_mode & 07777, 0600);
  cr_expect_neq(lstat(q, &st), 0, "the temporary is left");
  expect_file(p, "new");
  expect_canary();
  /* reading never goes through a link either */
  unlink(p);
  cr_assert_eq(symlink(a, p), 0);
  unsigned char *buf = NULL;
  err = (boost_status){0};
  cr_expect_eq(ckpt_local_read_small(p, 8, 0, &buf, &err), -1);
  cr_expect(strstr(err.msg, "state.bin: a symbolic link, not a file") != NULL, "%s", err.msg);
}

Test(ckpt_private, every_committed_step_is_listed, .init = setup, .fini = teardown) {
  enum { STEPS = 300 }; /* more than a fixed table of 256 held */
  static const unsigned char run[CKPT_RUN_ID_BYTES] = {4, 5, 6};
  ckpt_local_manifest man;
  for (int s = 1; s <= STEPS; s++) {
    char p[256];
    boost_status err = {0};
    ckpt_local_step_path(p, sizeof p, dir, s, 0);
    cr_assert_eq(mkdir(p, 0700), 0);
    memset(&man, 0, sizeof man);
    memcpy(man.run_id, run, sizeof man.run_id);
    man.step = s;
    cr_assert_eq(ckpt_local_write_manifest(p, &man, &err), 0, "%s", err.msg);
  }
  int64_t steps[8];
  cr_assert_eq(ckpt_local_list(dir, 0, NULL, run, steps, 8, NULL), 8);
  for (int i = 0; i < 8; i++) cr_expect_eq(steps[i], STEPS - i);
  cr_expect_eq(ckpt_local_remove_steps(dir, -1, 0, run), STEPS);
}

Test(ckpt_private, roots_are_made_private) {
  char root[200], p[256];
  ckpt_private_default_root(0xab, root, sizeof root);
  snprintf(p, sizeof p, "/dev/shm/boost-%u/00000000000000ab", (unsigned)geteuid());
  cr_expect_str_eq(root, p);
  snprintf(root, sizeof root, "/tmp/boost_test_private_root_%d/a/b", (int)getpid());
  boost_status err = {0};
  cr_assert_eq(ckpt_private_root(root, 0, 1, &err), 0, "%s", err.msg);
  struct stat st;
  cr_assert_eq(lstat(root, &st), 0);
  cr_expect_eq(st.st_mode & 07777, 0700);
  cr_expect_eq(ckpt_private_root(root, 0, 0, &err), 0, "%s", err.msg); /* checked again: the same */
  snprintf(p, sizeof p, "/tmp/boost_test_private_root_%d", (int)getpid());
  rm_rf(p);
}
