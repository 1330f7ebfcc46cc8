/* TensorBoard event files (trainer/tb_writer.h): CRC32C against published
 * vectors, the TFRecord framing against bytes made by tensorboard's own
 * masked_crc32c, the Event messages against their wire encoding written out
 * by hand, and the writer's file (name, first records, refusals). The
 * reader's side over whole runs: tests/cli/tensorboard.sh. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tb_writer.h"

Test(tb_writer, crc32c_known_vectors) {
  cr_assert_eq(tb_crc32c(0, "123456789", 9), 0xE3069283u); /* the CRC catalogue's check value */
  uint8_t zeros[32] = {0}, ones[32];
  memset(ones, 0xff, sizeof ones);
  cr_assert_eq(tb_crc32c(0, zeros, 32), 0x8A9136AAu); /* RFC 3720, B.4 */
  cr_assert_eq(tb_crc32c(0, ones, 32), 0x62A8AB43u);
  cr_assert_eq(tb_crc32c(0, "", 0), 0u);
  /* continued over pieces: the same as at once */
  cr_assert_eq(tb_crc32c(tb_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
}

Test(tb_writer, record_framing) {
  /* tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c over "abc" framed */
  static const uint8_t want[] = {0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xb0, 0x99,
                                 0x49, 0x0e, 0x61, 0x62, 0x63, 0x6e, 0x57, 0xf1, 0x21};
  uint8_t out[32];
  cr_assert_eq(tb_frame("abc", 3, out), sizeof want);
  cr_assert_arr_eq(out, want, sizeof want);
  cr_assert_eq(tb_masked_crc(0), 0xa282ead8u);
}

Test(tb_writer, event_encoding) {
  uint8_t out[128];
  /* wall_time 1.0 (field 1, fixed64), step 3 (field 2, varint), summary (field 5) { value (field 1) { tag "a"
   * (field 1), simple_value 1.0f (field 2, fixed32) } } */
  static const uint8_t scalar[] = {0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x10, 0x03, 0x2a, 0x0a,
                                   0x0a, 0x08, 0x0a, 0x01, 'a', 0x15, 0, 0, 0x80, 0x3f};
  cr_assert_eq(tb_event_scalar(1.0, 3, "a", 1.0f, out, sizeof out), sizeof scalar);
  cr_assert_arr_eq(out, scalar, sizeof scalar);
  /* a step past 127: a two-byte varint */
  static const uint8_t start[] = {0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x10, 0xac, 0x02, 0x3a, 0x02, 0x08, 0x01};
  cr_assert_eq(tb_event_session_start(1.0, 300, out, sizeof out), sizeof start);
  cr_assert_arr_eq(out, start, sizeof start);
  static const uint8_t version[] = {0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x1a, 13, 'b', 'r', 'a', 'i', 'n',
                                    '.', 'E', 'v', 'e', 'n', 't', ':', '2'};
  cr_assert_eq(tb_event_file_version(1.0, out, sizeof out), sizeof version);
  cr_assert_arr_eq(out, version, sizeof version);
  cr_assert_eq(tb_event_scalar(1.0, 3, "a", 1.0f, out, 10), 0, "a buffer too small is refused, not overrun");
}

/* The writer's only file in dir (its name into name). */
static void only_file(const char *dir, char *name, size_t n) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  int count = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.') snprintf(name, n, "%s", e->d_name), count++;
  closedir(d);
  cr_assert_eq(count, 1, "%d files in %s", count, dir);
}

Test(tb_writer, file_name_and_first_records) {
  char dir[] = "/tmp/tb_writer_XXXXXX", sub[64], name[256], path[512];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(sub, sizeof sub, "%s/a/b", dir); /* parents made */
  tb_writer *w;
  boost_status err = {0};
  cr_assert_eq(tb_writer_open(sub, 5, &w, &err), 0, "%s", err.msg);
  cr_assert_eq(tb_writer_scalar(w, 5, "train/loss", 2.5, &err), 0);
  cr_assert_eq(tb_writer_flush(w, &err), 0);
  tb_writer_close(w);
  only_file(sub, name, sizeof name);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  char tail[300];
  snprintf(tail, sizeof tail, ".%s.%ld", host, (long)getpid());
  cr_assert_eq(strncmp(name, "events.out.tfevents.", 20), 0, "%s", name);
  cr_assert(strlen(name) > strlen(tail) && strcmp(name + strlen(name) - strlen(tail), tail) == 0, "%s", name);
  /* the file: version record, START at step 5, the scalar */
  snprintf(path, sizeof path, "%s/%s", sub, name);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  uint8_t buf[512], want[512], ev[128];
  const size_t got = fread(buf, 1, sizeof buf, f);
  fclose(f);
  size_t n = tb_frame(ev, tb_event_file_version(0, ev, sizeof ev), want);
  cr_assert_eq(got, n + 16 + tb_event_session_start(0, 5, ev, sizeof ev) + 16 + tb_event_scalar(0, 5, "train/loss", 2.5f, ev, sizeof ev));
  cr_assert_eq(memcmp(buf, want, 12), 0, "the first record's length and its CRC");
  cr_assert_eq(memcmp(buf + 12 + 9, want + 12 + 9, n - 12 - 9 - 4), 0, "the file_version after the wall time");
  /* a second writer in the same second: a name that sorts after the first */
  cr_assert_eq(tb_writer_open(sub, 6, &w, &err), 0, "%s", err.msg);
  cr_assert_gt(strcmp(strrchr(tb_writer_path(w), '/') + 1, name), 0, "%s after %s", tb_writer_path(w), name);
  tb_writer_close(w);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(tb_writer, refusals_name_the_folder) {
  char dir[] = "/tmp/tb_writer_XXXXXX", file[64];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(file, sizeof file, "%s/f", dir);
  FILE *f = fopen(file, "w");
  cr_assert_not_null(f);
  fclose(f);
  tb_writer *w = (tb_writer *)1;
  boost_status err = {0};
  cr_assert_eq(tb_writer_open(file, 1, &w, &err), -1, "a file in the folder's place");
  cr_assert_null(w);
  cr_assert(strstr(err.msg, file) && strstr(err.msg, "not a folder"), "%s", err.msg);
  char under[80];
  snprintf(under, sizeof under, "%s/sub", file);
  err = (boost_status){0};
  cr_assert_eq(tb_writer_open(under, 1, &w, &err), -1, "a file among the parents");
  cr_assert(strstr(err.msg, "train.tensorboard") != NULL, "%s", err.msg);
  unlink(file);
  rmdir(dir);
}
