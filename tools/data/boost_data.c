/* boost-data: turn text files into a boost token shard (byte-v1 tokenizer,
 * or BPE with a tiktoken rank file: bpe.h), or describe an existing shard
 * (--info). See docs/DATA_FORMAT.md. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bpe.h"
#include "check.h"
#include "util.h"
#include "data.h"
#include "data_tool.h"
#include "data_writer.h"
#include "tool.h"
#include "log.h"

#ifndef BOOST_VERSION
#define BOOST_VERSION "unknown"
#endif

static const char *usage_text =
    "usage: boost-data [options] -o OUT.tok INPUT...\n"
    "       boost-data --info [--json] SHARD\n"
    "\n"
    "Tokenizes text with the byte-level tokenizer byte-v1 (token = byte value,\n"
    "EOT = 256 before every document, vocab 257) into one boost token shard,\n"
    "or with --tokenizer, byte-pair encoding as tiktoken's encode_ordinary\n"
    "does with the same rank file (EOT = <|endoftext|> = largest rank + 1\n"
    "before every document; invalid UTF-8 bytes read as U+FFFD).\n"
    "Each input file is a document; fortune files are split on lines that are\n"
    "exactly \"%\" (one document per fortune).\n"
    "\n"
    "INPUT is a file or a directory (walked recursively). In directories, hidden\n"
    "entries, symlinks and files ending in .dat or .u8 are skipped; files with\n"
    "NUL bytes (binary) and empty files are skipped everywhere. Files are read\n"
    "in sorted path order, each file once.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE      shard to write (via FILE.tmp, fsync, rename)\n"
    "      --fortune-split    split every input on \"%\" lines\n"
    "      --no-fortune-split never split (each file is one document)\n"
    "                         default: split files below a directory named\n"
    "                         \"fortunes\" (path resolved with realpath)\n"
    "      --tokenizer FILE   BPE with a tiktoken rank file (BASE64 RANK per\n"
    "                         line), e.g. GPT-2's gpt2.tiktoken, or a GPT-2-\n"
    "                         style Hugging Face tokenizer.json\n"
    "      --pretokenizer NAME  gpt2 (default), cl100k or llama3\n"
    "      --pattern RE       a PCRE2 pre-tokenizer pattern instead\n"
    "      --threads N        encoding threads (default: OpenMP's)\n"
    "      --json             print a machine-readable summary on stdout\n"
    "  -q, --quiet            no progress lines on stderr\n"
    "      --info             print the header of SHARD (boost or llm.c .bin)\n"
    "                         after validating it (size, checksum, tokens)\n"
    "  -h, --help             this text\n"
    "      --version          print the version\n";

void data_die(int code, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (char *p = msg; *p; p++)
    if (*p == '\n') *p = ' ';
  tool_tmp_remove(); /* never leave a half-written shard */
  fprintf(stderr, "boost-data: %s\n", msg);
  exit(code);
}


/* ---- tokenizing ---- */

/* BPE documents wait in a batch (copies: the files are unmapped) and are
 * encoded over the threads together, then written in input order. */
#define BPE_BATCH_BYTES ((size_t)64 << 20)

typedef struct {
  data_writer *w;
  uint64_t files, docs, bytes;
  const bpe_tokenizer *bpe; /* NULL: byte-v1 */
  int threads;
  uint8_t **text;
  size_t *len, n, cap, batch_bytes;
} stats;

static void bpe_flush(stats *s) {
  if (s->n == 0) return;
  bpe_tokens *out = boost_calloc(s->n, sizeof *out);
  boost_status err = {0};
  int rc = bpe_encode_batch(s->bpe, s->n, (const uint8_t *const *)s->text, s->len, out, s->threads, &err);
  for (size_t i = 0; i < s->n; i++) {
    if (rc == 0) rc = data_writer_add_encoded(s->w, out[i].v, out[i].n, &err);
    bpe_tokens_free(&out[i]);
    free(s->text[i]);
  }
  boost_free(out);
  s->n = s->batch_bytes = 0;
  if (rc != 0) {
    tool_tmp_disarm();
    data_writer_abort(s->w);
    data_die(1, "%s", err.msg);
  }
}

static void bpe_add(stats *s, const uint8_t *b, size_t n) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 1024;
    s->text = boost_realloc(s->text, s->cap, sizeof *s->text);
    s->len = boost_realloc(s->len, s->cap, sizeof *s->len);
  }
  s->text[s->n] = boost_realloc(NULL, n ? n : 1, 1);
  memcpy(s->text[s->n], b, n);
  s->len[s->n++] = n;
  s->batch_bytes += n;
  if (s->batch_bytes >= BPE_BATCH_BYTES) bpe_flush(s);
}

static bool blank(const uint8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r') return false;
  return true;
}

static void add_doc(stats *s, const uint8_t *b, size_t n) {
  boost_status err = {0};
  if (s->bpe) {
    bpe_add(s, b, n);
  } else if (data_writer_add_document(s->w, b, n, &err) != 0) {
    tool_tmp_disarm();
    data_writer_abort(s->w);
    data_die(1, "%s", err.msg);
  }
  s->docs++;
}

/* Documents are the runs of lines between lines that are exactly "%". */
static void add_fortunes(stats *s, const uint8_t *b, size_t n) {
  size_t doc = 0, line = 0;
  while (line < n) {
    const uint8_t *nl = memchr(b + line, '\n', n - line);
    size_t end = nl ? (size_t)(nl - b) + 1 : n; /* one past this line */
    size_t len = (nl ? (size_t)(nl - b) : n) - line;
    if (len > 0 && b[line + len - 1] == '\r') len--;
    if (len == 1 && b[line] == '%') {
      if (!blank(b + doc, line - doc)) add_doc(s, b + doc, line - doc);
      doc = end;
    }
    line = end;
  }
  if (doc < n && !blank(b + doc, n - doc)) add_doc(s, b + doc, n - doc);
}

/* Returns 1 if used, 0 if skipped (binary/empty). */
static int add_file_tokens(stats *s, input_list *l, const char *path, int split_mode) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) data_die(1, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) data_die(1, "%s: cannot stat: %s", path, strerror(errno));
  if (st.st_size == 0) {
    close(fd);
    l->skip_empty++;
    return 0;
  }
  size_t n = (size_t)st.st_size;
  void *map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) data_die(1, "%s: cannot mmap: %s", path, strerror(errno));
  close(fd);
  const uint8_t *b = map;
  int used = 0;
  if (memchr(b, 0, n)) {
    l->skip_binary++;
  } else {
    bool split = split_mode > 0 || (split_mode < 0 && data_under_fortunes_dir(path));
    if (split)
      add_fortunes(s, b, n);
    else
      add_doc(s, b, n);
    s->files++;
    s->bytes += n;
    used = 1;
  }
  munmap(map, n);
  return used;
}

/* ---- main ---- */

enum { OPT_FORTUNE = 256, OPT_NO_FORTUNE, OPT_JSON, OPT_INFO, OPT_VERSION, OPT_TOKENIZER, OPT_PRETOK, OPT_PATTERN,
       OPT_THREADS };

typedef struct {
  const char *out;
  int split_mode; /* -1 auto, 0 off, 1 on */
  bool json, quiet, info;
  const char *tokenizer, *pretok, *pattern; /* BPE: rank file, pre-tokenizer */
  int threads;
  int ninputs;
  char **inputs;
} data_args;

static data_args parse_args(int argc, char **argv) {
  static const struct option opts[] = {
      {"output", required_argument, NULL, 'o'},
      {"fortune-split", no_argument, NULL, OPT_FORTUNE},
      {"no-fortune-split", no_argument, NULL, OPT_NO_FORTUNE},
      {"json", no_argument, NULL, OPT_JSON},
      {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
      {"pretokenizer", required_argument, NULL, OPT_PRETOK},
      {"pattern", required_argument, NULL, OPT_PATTERN},
      {"threads", required_argument, NULL, OPT_THREADS},
      {"quiet", no_argument, NULL, 'q'},
      {"info", no_argument, NULL, OPT_INFO},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, OPT_VERSION},
      {NULL, 0, NULL, 0},
  };
  data_args a = {.split_mode = -1};
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":o:qh", opts, NULL)) != -1) {
    switch (c) {
      case 'o': a.out = optarg; break;
      case OPT_FORTUNE: a.split_mode = 1; break;
      case OPT_NO_FORTUNE: a.split_mode = 0; break;
      case OPT_JSON: a.json = true; break;
      case OPT_TOKENIZER: a.tokenizer = optarg; break;
      case OPT_PRETOK: a.pretok = optarg; break;
      case OPT_PATTERN: a.pattern = optarg; break;
      case OPT_THREADS: {
        char *end;
        long v = strtol(optarg, &end, 10);
        if (*end || v < 1 || v > 1024) data_die(2, "--threads %s: expected a whole number 1..1024", optarg);
        a.threads = (int)v;
        break;
      }
      case 'q': a.quiet = true; break;
      case OPT_INFO: a.info = true; break;
      case 'h': fputs(usage_text, stdout); exit(0);
      case OPT_VERSION: printf("boost-data %s\n", BOOST_VERSION); exit(0);
      case ':': data_die(2, "option %s needs an argument (see --help)", argv[optind - 1]);
      default:
        if (optopt)
          data_die(2, "unknown option -%c (see --help)", optopt);
        else
          data_die(2, "unknown option %s (see --help)", argv[optind - 1]);
    }
  }
  if (a.pretok && a.pattern) data_die(2, "--pretokenizer and --pattern both given: one of them");
  if (!a.tokenizer && (a.pretok || a.pattern)) data_die(2, "--pretokenizer/--pattern need --tokenizer FILE");
  if (a.tokenizer && !a.pattern && !a.pretok) a.pretok = "gpt2";
  a.ninputs = argc - optind;
  a.inputs = argv + optind;
  return a;
}

/* Every input file, directories walked, sorted and de-duplicated; the output
 * checked so that it never overwrites an input (as the output or its temp
 * file), a device or a FIFO. */
static void gather_inputs(input_list *l, const data_args *a) {
  for (int i = 0; i < a->ninputs; i++) {
    struct stat st;
    if (stat(a->inputs[i], &st) != 0) data_die(1, "%s: %s", a->inputs[i], strerror(errno));
    if (S_ISDIR(st.st_mode))
      data_walk(l, a->inputs[i]);
    else if (S_ISREG(st.st_mode))
      data_add_file(l, a->inputs[i], &st);
    else
      data_die(1, "%s: not a regular file or directory", a->inputs[i]);
  }
  data_sort_dedupe(l);
  if (l->n == 0) data_die(1, "no input files found (all %d inputs empty or skipped)", a->ninputs);
  boost_status err = {0};
  const char **paths = boost_calloc(l->n, sizeof *paths);
  for (size_t i = 0; i < l->n; i++) paths[i] = l->v[i].path;
  const int out_ok = boost_check_output(a->out, paths, (int)l->n, &err) == 0;
  boost_free(paths);
  if (!out_ok) data_die(1, "%s", err.msg);
}

static void tokenize_all(stats *s, input_list *l, const data_args *a, double t0) {
  bool tty = isatty(2);
  double last = t0;
  bool progress_shown = false;
  for (size_t i = 0; i < l->n; i++) {
    add_file_tokens(s, l, l->v[i].path, a->split_mode);
    double t = boost_now_s();
    if (!a->quiet && t - last >= (tty ? 0.25 : 2.0)) {
      last = t;
      fprintf(stderr, "%sboost-data: %zu/%zu files, %" PRIu64 " documents, %" PRIu64 " tokens, %.1f MB/s%s",
              tty ? "\r" : "", i + 1, l->n, s->docs, data_writer_num_tokens(s->w),
              (double)s->bytes / 1e6 / (t - t0), tty ? "\033[K" : "\n");
      progress_shown = true;
    }
  }
  if (progress_shown && tty) fputs("\n", stderr);
}

/* Renames the temp file into place; the stop-signal handler must not unlink
 * a temp name that the finish is renaming, so stop signals wait. */
static uint64_t finish_output(stats *s) {
  boost_status err = {0};
  uint64_t checksum = 0;
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGHUP);
  sigprocmask(SIG_BLOCK, &block, &old);
  int rc = data_writer_finish(s->w, &checksum, &err);
  tool_tmp_disarm();
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) data_die(1, "%s", err.msg);
  return checksum;
}

static void report_json(const char *out, const char *tok_name, uint64_t tok_hash, uint32_t vocab, uint32_t width,
                        const stats *s, const input_list *l, uint64_t tokens, uint64_t skipped,
                        uint64_t checksum, double secs) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "output", out);
  cJSON_AddStringToObject(o, "format", "boost");
  cJSON_AddNumberToObject(o, "version", tok_hash ? DATA_VERSION_HASHED : DATA_VERSION);
  cJSON_AddStringToObject(o, "tokenizer", tok_name);
  char th[32];
  snprintf(th, sizeof th, "%016" PRIx64, tok_hash);
  if (tok_hash)
    cJSON_AddStringToObject(o, "tokenizer_hash", th);
  else
    cJSON_AddNullToObject(o, "tokenizer_hash");
  cJSON_AddNumberToObject(o, "vocab_size", vocab);
  cJSON_AddNumberToObject(o, "token_bytes", width);
  cJSON_AddNumberToObject(o, "files", (double)s->files);
  cJSON_AddNumberToObject(o, "documents", (double)s->docs);
  cJSON_AddNumberToObject(o, "tokens", (double)tokens);
  cJSON_AddNumberToObject(o, "bytes", (double)s->bytes);
  char sum[32];
  snprintf(sum, sizeof sum, "%016" PRIx64, checksum);
  cJSON_AddStringToObject(o, "checksum_xxh3", sum);
  cJSON *sk = cJSON_AddObjectToObject(o, "skipped");
  cJSON_AddNumberToObject(sk, "total", (double)skipped);
  cJSON_AddNumberToObject(sk, "dat_u8", (double)l->skip_ext);
  cJSON_AddNumberToObject(sk, "symlinks", (double)l->skip_link);
  cJSON_AddNumberToObject(sk, "hidden", (double)l->skip_hidden);
  cJSON_AddNumberToObject(sk, "binary", (double)l->skip_binary);
  cJSON_AddNumberToObject(sk, "empty", (double)l->skip_empty);
  cJSON_AddNumberToObject(sk, "duplicates", (double)l->skip_dup);
  cJSON_AddNumberToObject(sk, "other", (double)l->skip_other);
  cJSON_AddNumberToObject(o, "seconds", secs);
  char *txt = cJSON_Print(o);
  printf("%s\n", txt);
  cJSON_free(txt);
  cJSON_Delete(o);
}

int main(int argc, char **argv) {
  boost_log_program("boost-data"); /* first: every warning of the process carries this name */
  const data_args a = parse_args(argc, argv);
  if (a.info) {
    if (a.out) data_die(2, "--info does not write: drop -o");
    if (a.ninputs != 1) data_die(2, "--info takes exactly one shard file, got %d", a.ninputs);
    return data_do_info(a.inputs[0], a.json);
  }
  if (!a.out) data_die(2, "no output given: use -o OUT.tok (see --help)");
  if (a.ninputs == 0) data_die(2, "no inputs given: usage boost-data [options] -o OUT.tok INPUT...");

  double t0 = boost_now_s();
  input_list l = {0};
  gather_inputs(&l, &a);
  boost_status err = {0};
  stats s = {.threads = a.threads};
  bpe_tokenizer *bpe = NULL;
  const char *tok_name = DATA_BYTE_TOKENIZER;
  uint32_t vocab = DATA_BYTE_VOCAB, eot = DATA_BYTE_EOT, width = 2;
  if (a.tokenizer) {
    if (bpe_open(a.tokenizer, a.pretok, a.pattern, &bpe, &err) != 0) data_die(1, "%s", err.msg);
    s.bpe = bpe;
    tok_name = bpe_name(bpe);
    vocab = bpe_vocab_size(bpe);
    eot = (uint32_t)bpe_eot(bpe);
    width = vocab <= 65536 ? 2 : 4;
  }
  if (data_writer_open(a.out, width, vocab, tok_name, eot, &s.w, &err) != 0) data_die(1, "%s", err.msg);
  if (bpe) data_writer_set_tokenizer_hash(s.w, bpe_hash(bpe));
  tool_tmp_arm(data_writer_tmp_path(s.w));
  tokenize_all(&s, &l, &a, t0);
  if (bpe) bpe_flush(&s);
  uint64_t skipped = l.skip_ext + l.skip_link + l.skip_hidden + l.skip_other + l.skip_binary + l.skip_empty +
                     l.skip_dup;
  if (s.docs == 0) {
    tool_tmp_disarm();
    data_writer_abort(s.w);
    data_die(1, "no text documents in the inputs (%" PRIu64 " files skipped: %" PRIu64 " binary, %" PRIu64 " empty)",
        skipped, l.skip_binary, l.skip_empty);
  }
  const uint64_t tokens = data_writer_num_tokens(s.w);
  const uint64_t checksum = finish_output(&s);
  const double secs = boost_now_s() - t0;
  if (a.json) {
    report_json(a.out, tok_name, bpe ? bpe_hash(bpe) : 0, vocab, width, &s, &l, tokens, skipped, checksum, secs);
  } else {
    printf("boost-data: wrote %s: %" PRIu64 " files, %" PRIu64 " documents, %" PRIu64 " tokens from %" PRIu64
           " bytes in %.2f s\n",
           a.out, s.files, s.docs, tokens, s.bytes, secs);
    printf("boost-data: skipped %" PRIu64 " (%" PRIu64 " .dat/.u8, %" PRIu64 " symlinks, %" PRIu64 " hidden, %" PRIu64
           " binary, %" PRIu64 " empty, %" PRIu64 " duplicates, %" PRIu64 " other)\n",
           skipped, l.skip_ext, l.skip_link, l.skip_hidden, l.skip_binary, l.skip_empty, l.skip_dup, l.skip_other);
  }
  for (size_t i = 0; i < l.n; i++) boost_free(l.v[i].path);
  boost_free(l.v);
  free(s.text);
  free(s.len);
  bpe_close(bpe);
  return 0;
}
