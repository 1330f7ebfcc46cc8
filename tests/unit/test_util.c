/* The shared helpers of kernels/util.h: boost_check_output's refusals. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static char g_dir[64];
static char g_err[1024];

static void setup(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/boost-test-util-XXXXXX");
  cr_assert_not_null(mkdtemp(g_dir));
}
static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  cr_assert_eq(system(cmd), 0);
}
TestSuite(check_output, .init = setup, .fini = teardown);

/* A fresh copy each call (freed at exit of the test process). */
static const char *tpath(const char *name) {
  char *p = malloc(256);
  cr_assert_not_null(p);
  snprintf(p, 256, "%s/%s", g_dir, name);
  return p;
}

static void touch(const char *path) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs("data\n", f);
  fclose(f);
}

Test(check_output, accepts_a_new_or_regular_file) {
  const char *in = tpath("in.h5");
  touch(in);
  const char *inputs[] = {in, NULL};
  cr_assert_eq(boost_check_output(tpath("new.bin"), inputs, 2, g_err, sizeof g_err), 0, "%s", g_err);
  touch(tpath("old.bin"));
  touch(tpath("old.bin.tmp")); /* a leftover of an interrupted run: replaced */
  cr_assert_eq(boost_check_output(tpath("old.bin"), inputs, 2, g_err, sizeof g_err), 0, "%s", g_err);
}

Test(check_output, refuses_an_input_as_output_or_temporary) {
  const char *in = tpath("ck.h5");
  touch(in);
  const char *inputs[] = {in};
  cr_assert_eq(boost_check_output(in, inputs, 1, g_err, sizeof g_err), -1);
  cr_assert(strstr(g_err, "is the input"), "%s", g_err);
  /* the same file under another name */
  cr_assert_eq(link(in, tpath("hard.h5")), 0);
  cr_assert_eq(boost_check_output(tpath("hard.h5"), inputs, 1, g_err, sizeof g_err), -1);
  /* PATH.tmp is the input: writing the temporary would destroy it */
  const char *tmp_in = tpath("out.h5.tmp");
  touch(tmp_in);
  const char *inputs2[] = {tmp_in};
  cr_assert_eq(boost_check_output(tpath("out.h5"), inputs2, 1, g_err, sizeof g_err), -1);
  cr_assert(strstr(g_err, "temporary"), "%s", g_err);
}

Test(check_output, refuses_devices_fifos_directories_and_missing_directories) {
  cr_assert_eq(boost_check_output("/dev/null", NULL, 0, g_err, sizeof g_err), -1);
  cr_assert(strstr(g_err, "not a regular file"), "%s", g_err);
  cr_assert_eq(mkfifo(tpath("fifo"), 0600), 0);
  cr_assert_eq(boost_check_output(tpath("fifo"), NULL, 0, g_err, sizeof g_err), -1);
  cr_assert_eq(boost_check_output(g_dir, NULL, 0, g_err, sizeof g_err), -1);
  cr_assert(strstr(g_err, "is a directory"), "%s", g_err);
  cr_assert_eq(boost_check_output(tpath("no/such/dir/out.bin"), NULL, 0, g_err, sizeof g_err), -1);
  cr_assert(strstr(g_err, "No such file or directory"), "%s", g_err);
  touch(tpath("file"));
  cr_assert_eq(boost_check_output(tpath("file/out.bin"), NULL, 0, g_err, sizeof g_err), -1);
  cr_assert(strstr(g_err, "not a directory"), "%s", g_err);
  cr_assert_eq(boost_check_output("", NULL, 0, g_err, sizeof g_err), -1);
  cr_assert(strstr(g_err, "empty"), "%s", g_err);
}
