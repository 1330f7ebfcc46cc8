/* What boost-data's files share: the one way it fails (a line, the
 * half-written shard removed, exit), its inputs collected (data_inputs.c)
 * and --info (data_info.c). */
#ifndef BOOST_DATA_TOOL_H
#define BOOST_DATA_TOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

/* "boost-data: <message>" on stderr (newlines folded), the armed
 * temporary shard removed, exit code. */
void data_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

typedef struct {
  char *path;
  dev_t dev;
  ino_t ino;
} input_file;

typedef struct {
  input_file *v;
  size_t n, cap;
  uint64_t skip_ext, skip_link, skip_hidden, skip_other, skip_binary, skip_empty, skip_dup;
} input_list;

void data_add_file(input_list *l, const char *path, const struct stat *st);
/* Every file below dir (hidden entries, links, .dat and .u8 files skipped and counted). */
void data_walk(input_list *l, const char *dir);
/* Sorted by path; the first path of each (dev, inode) kept. */
void data_sort_dedupe(input_list *l);
/* Whether path lies below a directory named "fortunes" (realpath). */
bool data_under_fortunes_dir(const char *path);

/* --info: SHARD's header after validating it, as text or JSON; the exit status. */
int data_do_info(const char *path, bool json);

#endif
