/* The shared helpers of kernels/util.h: boost_check_output's refusals, and
 * status.h's one way to report a failure. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static char g_dir[64];
static boost_status g_status;
static const char *const g_err = g_status.msg;

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
  cr_assert_eq(boost_check_output(tpath("new.bin"), inputs, 2, &g_status), 0, "%s", g_err);
  touch(tpath("old.bin"));
  touch(tpath("old.bin.tmp")); /* a leftover of an interrupted run: replaced */
  cr_assert_eq(boost_check_output(tpath("old.bin"), inputs, 2, &g_status), 0, "%s", g_err);
}

Test(check_output, refuses_an_input_as_output_or_temporary) {
  const char *in = tpath("ck.h5");
  touch(in);
  const char *inputs[] = {in};
  cr_assert_eq(boost_check_output(in, inputs, 1, &g_status), -1);
  cr_assert(strstr(g_err, "is the input"), "%s", g_err);
  cr_assert(g_status.failed);
  /* the same file under another name */
  cr_assert_eq(link(in, tpath("hard.h5")), 0);
  cr_assert_eq(boost_check_output(tpath("hard.h5"), inputs, 1, &g_status), -1);
  /* PATH.tmp is the input: writing the temporary would destroy it */
  const char *tmp_in = tpath("out.h5.tmp");
  touch(tmp_in);
  const char *inputs2[] = {tmp_in};
  cr_assert_eq(boost_check_output(tpath("out.h5"), inputs2, 1, &g_status), -1);
  cr_assert(strstr(g_err, "temporary"), "%s", g_err);
}

Test(check_output, refuses_devices_fifos_directories_and_missing_directories) {
  cr_assert_eq(boost_check_output("/dev/null", NULL, 0, &g_status), -1);
  cr_assert(strstr(g_err, "not a regular file"), "%s", g_err);
  cr_assert_eq(mkfifo(tpath("fifo"), 0600), 0);
  cr_assert_eq(boost_check_output(tpath("fifo"), NULL, 0, &g_status), -1);
  cr_assert_eq(boost_check_output(g_dir, NULL, 0, &g_status), -1);
  cr_assert(strstr(g_err, "is a directory"), "%s", g_err);
  cr_assert_eq(boost_check_output(tpath("no/such/dir/out.bin"), NULL, 0, &g_status), -1);
  cr_assert(strstr(g_err, "No such file or directory"), "%s", g_err);
  touch(tpath("file"));
  cr_assert_eq(boost_check_output(tpath("file/out.bin"), NULL, 0, &g_status), -1);
  cr_assert(strstr(g_err, "not a directory"), "%s", g_err);
  cr_assert_eq(boost_check_output("", NULL, 0, &g_status), -1);
  cr_assert(strstr(g_err, "empty"), "%s", g_err);
}

/* A failure is one statement: it marks the status, keeps the message, and
 * returns -1; NULL takes failures without a message. */
Test(status, boost_err_marks_and_formats) {
  boost_status st = {0};
  cr_assert_eq(boost_err(&st, "cannot open %s: %s", "a.h5", "No such file"), -1);
  cr_assert(st.failed);
  cr_assert_str_eq(st.msg, "cannot open a.h5: No such file");
  boost_status_append(&st, " (in %s)", "dir");
  cr_assert_str_eq(st.msg, "cannot open a.h5: No such file (in dir)");
  cr_assert_eq(boost_err((boost_status *)NULL, "ignored %d", 1), -1);
}

Test(status, long_messages_are_cut_not_overrun) {
  boost_status st = {0};
  char big[3 * BOOST_STATUS_MSG];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  boost_err(&st, "%s", big);
  cr_assert_eq(strlen(st.msg), BOOST_STATUS_MSG - 1);
  boost_status_append(&st, "more");
  cr_assert_eq(strlen(st.msg), BOOST_STATUS_MSG - 1);
}

/* A thread's status handed over at the join: only a failure moves. */
Test(status, take_moves_only_failures) {
  boost_status mine = {0}, thread = {0};
  cr_assert_eq(boost_status_take(&mine, &thread), 0);
  cr_assert_not(mine.failed);
  boost_err(&thread, "writer: disk full");
  cr_assert_eq(boost_status_take(&mine, &thread), -1);
  cr_assert(mine.failed);
  cr_assert_str_eq(mine.msg, "writer: disk full");
}
