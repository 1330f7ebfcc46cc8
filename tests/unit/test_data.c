/* Token shards, loader, splits and the sample permutation (trainer/data/data.h). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "data.h"
#include "data_writer.h"

static char g_dir[256];
static boost_status g_status;
static const char *const g_err = g_status.msg;

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(p);
}
static void setup(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/boost-test-data-XXXXXX");
  cr_assert_not_null(mkdtemp(g_dir));
}
static void teardown(void) { nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

TestSuite(data, .init = setup, .fini = teardown);

static const char *tpath(const char *name) {
  static char buf[4][512];
  static int k;
  char *p = buf[k++ & 3];
  snprintf(p, 512, "%s/%s", g_dir, name);
  return p;
}

static uint32_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*s >> 33);
}

/* Write a shard through the public writer. */
static void write_shard(const char *path, uint32_t width, uint32_t vocab, const int32_t *tok, size_t n) {
  data_writer *w = NULL;
  cr_assert_eq(data_writer_open(path, width, vocab, "test-v1", DATA_NO_EOT, &w, &g_status), 0, "%s", g_err);
  cr_assert_eq(data_writer_add(w, tok, n, &g_status), 0, "%s", g_err);
  cr_assert_eq(data_writer_finish(w, NULL, &g_status), 0, "%s", g_err);
}

/* Write a boost shard byte by byte from docs/DATA_FORMAT.md (no library code),
 * with whatever header values the test wants. */
static void write_raw(const char *path, uint32_t version, uint32_t width, uint32_t vocab, const uint32_t *tok,
                      uint64_t n, const char *tokenizer, uint32_t eot, uint64_t docs) {
  uint8_t h[256] = {0};
  size_t pay = (size_t)(n * width);
  uint8_t *p = calloc(pay + 1, 1);
  for (uint64_t i = 0; i < n; i++) {
    if (width == 2) {
      uint16_t v = (uint16_t)tok[i];
      memcpy(p + 2 * i, &v, 2);
    } else {
      memcpy(p + (size_t)width * i, &tok[i], width < 4 ? width : 4); /* width 3: a malformed test file */
    }
  }
  uint32_t hb = 256, flags = 0;
  uint64_t sum = XXH3_64bits(p, pay);
  memcpy(h, "BOOSTTOK", 8);
  memcpy(h + 8, &version, 4);
  memcpy(h + 12, &hb, 4);
  memcpy(h + 16, &width, 4);
  memcpy(h + 20, &vocab, 4);
  memcpy(h + 24, &n, 8);
  memcpy(h + 32, &docs, 8);
  memcpy(h + 40, &eot, 4);
  memcpy(h + 44, &flags, 4);
  strncpy((char *)h + 48, tokenizer, 32);
  memcpy(h + 80, &sum, 8);
  uint64_t hsum = XXH3_64bits(h, 88);
  memcpy(h + 88, &hsum, 8);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(h, 1, 256, f), 256);
  cr_assert_eq(fwrite(p, 1, pay, f), pay);
  fclose(f);
  free(p);
}

static void write_llmc(const char *path, int32_t magic, int32_t version, const uint32_t *tok, int32_t n,
                       int width) {
  int32_t h[256] = {0};
  h[0] = magic;
  h[1] = version;
  h[2] = n;
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(h, 4, 256, f), 256);
  for (int32_t i = 0; i < n; i++) {
    if (width == 2) {
      uint16_t v = (uint16_t)tok[i];
      fwrite(&v, 2, 1, f);
    } else {
      fwrite(&tok[i], 4, 1, f);
    }
  }
  fclose(f);
}

static void flip_byte(const char *path, long off) {
  FILE *f = fopen(path, "r+b");
  cr_assert_not_null(f);
  fseek(f, off, SEEK_SET);
  int c = fgetc(f);
  fseek(f, off, SEEK_SET);
  fputc(c ^ 0x5a, f);
  fclose(f);
}

static void expect_open_fails(const char *path, const char *what) {
  g_status = (boost_status){0};
  data_source *src = NULL;
  cr_assert_eq(data_open(path, &src, &g_status), -1, "data_open(%s) should fail with \"%s\"", path, what);
  cr_assert_null(src);
  cr_assert(g_status.failed);
  cr_assert(strstr(g_err, what), "err \"%s\" lacks \"%s\"", g_err, what);
  cr_assert(strstr(g_err, path), "err \"%s\" does not name %s", g_err, path);
  cr_assert_null(strchr(g_err, '\n'), "err must be one line");
}

/* ---- round trips ---- */

static void roundtrip(uint32_t width, uint32_t vocab, size_t n) {
  int32_t *tok = malloc(n * sizeof *tok);
  uint64_t s = 42;
  for (size_t i = 0; i < n; i++) tok[i] = (int32_t)(lcg(&s) % vocab);
  tok[n / 2] = (int32_t)vocab - 1;
  const char *p = tpath("a.tok");
  write_shard(p, width, vocab, tok, n);
  cr_assert_eq(access(tpath("a.tok.tmp"), F_OK), -1, "temp file left behind");

  data_source *src = NULL;
  data_open(p, &src, &g_status);
  cr_assert_not_null(src, "%s", g_err);
  cr_assert_eq(data_num_tokens(src), (int64_t)n);
  cr_assert_eq(data_vocab_size(src), (int)vocab);
  cr_assert_eq(data_num_shards(src), 1);
  int32_t *back = malloc(n * sizeof *back);
  data_read_tokens(src, 0, (int64_t)n, back);
  cr_assert_arr_eq(back, tok, n * sizeof *tok);
  data_read_tokens(src, 7, 5, back);
  cr_assert_arr_eq(back, tok + 7, 5 * sizeof *tok);
  data_close(src);

  data_shard_info in;
  cr_assert_eq(data_shard_info_read(p, &in, &g_status), 0, "%s", g_err);
  cr_assert_eq(in.format, DATA_FORMAT_BOOST);
  cr_assert_eq(in.version, 1);
  cr_assert_eq(in.header_bytes, 256);
  cr_assert_eq(in.token_bytes, width);
  cr_assert_eq(in.vocab_size, vocab);
  cr_assert_eq(in.num_tokens, n);
  cr_assert_eq(in.max_token, vocab - 1);
  cr_assert_str_eq(in.tokenizer, "test-v1");
  cr_assert_eq(in.eot_token, DATA_NO_EOT);
  FILE *f = fopen(p, "rb");
  size_t pay = n * width;
  uint8_t *bytes = malloc(pay);
  fseek(f, 256, SEEK_SET);
  cr_assert_eq(fread(bytes, 1, pay, f), pay);
  fclose(f);
  cr_assert_eq(in.checksum, XXH3_64bits(bytes, pay), "checksum is XXH3-64 of the payload");
  free(bytes);
  free(tok);
  free(back);
}

Test(data, roundtrip_uint16) { roundtrip(2, 50257, 100003); }
Test(data, roundtrip_uint32) { roundtrip(4, 100000, 4099); }

Test(data, writer_matches_documented_layout) {
  uint32_t raw[6] = {256, 'h', 'i', 256, '!', '\n'};
  write_raw(tpath("raw.tok"), 1, 2, 257, raw, 6, "byte-v1", 256, 2);
  data_writer *w = NULL;
  cr_assert_eq(data_writer_open(tpath("lib.tok"), 2, DATA_BYTE_VOCAB, DATA_BYTE_TOKENIZER, DATA_BYTE_EOT, &w, &g_status),
               0, "%s", g_err);
  cr_assert_eq(data_writer_add_document(w, "hi", 2, &g_status), 0);
  cr_assert_eq(data_writer_add_document(w, "!\n", 2, &g_status), 0);
  cr_assert_eq(data_writer_num_documents(w), 2);
  cr_assert_eq(data_writer_num_tokens(w), 6);
  cr_assert_eq(data_writer_finish(w, NULL, &g_status), 0, "%s", g_err);
  uint8_t a[300], b[300];
  FILE *fa = fopen(tpath("raw.tok"), "rb"), *fb = fopen(tpath("lib.tok"), "rb");
  size_t na = fread(a, 1, sizeof a, fa), nb = fread(b, 1, sizeof b, fb);
  fclose(fa);
  fclose(fb);
  cr_assert_eq(na, 256 + 12);
  cr_assert_eq(nb, na);
  cr_assert_arr_eq(a, b, na, "writer output differs from the documented layout");

  data_shard_info in;
  cr_assert_eq(data_shard_info_read(tpath("lib.tok"), &in, &g_status), 0, "%s", g_err);
  cr_assert_eq(in.num_documents, 2);
  cr_assert_eq(in.eot_token, 256);
  cr_assert_str_eq(in.tokenizer, "byte-v1");
}

Test(data, llmc_roundtrip) {
  uint32_t tok[1000];
  uint64_t s = 7;
  for (int i = 0; i < 1000; i++) tok[i] = lcg(&s) % 50000;
  tok[10] = 50256;
  write_llmc(tpath("gpt2.bin"), LLMC_MAGIC_GPT2, 1, tok, 1000, 2);
  data_source *src = NULL;
  data_open(tpath("gpt2.bin"), &src, &g_status);
  cr_assert_not_null(src, "%s", g_err);
  cr_assert_eq(data_num_tokens(src), 1000);
  cr_assert_eq(data_vocab_size(src), 50257, "llm.c vocab = max token + 1");
  int32_t back[1000];
  data_read_tokens(src, 0, 1000, back);
  for (int i = 0; i < 1000; i++) cr_assert_eq(back[i], (int32_t)tok[i]);
  data_close(src);

  data_shard_info in;
  cr_assert_eq(data_shard_info_read(tpath("gpt2.bin"), &in, &g_status), 0, "%s", g_err);
  cr_assert_eq(in.format, DATA_FORMAT_LLMC);
  cr_assert_eq(in.vocab_size, 0);
  cr_assert_eq(in.token_bytes, 2);
  cr_assert_eq(in.header_bytes, 1024);

  tok[3] = 128255;
  write_llmc(tpath("llama3.bin"), LLMC_MAGIC_LLAMA3, 7, tok, 1000, 4);
  data_open(tpath("llama3.bin"), &src, &g_status);
  cr_assert_not_null(src, "%s", g_err);
  cr_assert_eq(data_vocab_size(src), 128256);
  data_read_tokens(src, 0, 1000, back);
  for (int i = 0; i < 1000; i++) cr_assert_eq(back[i], (int32_t)tok[i]);
  data_close(src);
}

Test(data, several_shards_list_and_directory) {
  mkdir(tpath("shards"), 0755);
  int32_t a[100], b[50];
  uint32_t c[30];
  for (int i = 0; i < 100; i++) a[i] = i;
  for (int i = 0; i < 50; i++) b[i] = 1000 + i;
  for (int i = 0; i < 30; i++) c[i] = 2000 + (uint32_t)i;
  write_shard(tpath("shards/01.tok"), 2, 1100, a, 100);
  write_shard(tpath("shards/02.tok"), 4, 1200, b, 50);
  write_llmc(tpath("shards/03.bin"), LLMC_MAGIC_GPT2, 1, c, 30, 2);
  FILE *f = fopen(tpath("shards/README"), "w"); /* ignored: not *.tok / *.bin */
  fputs("notes\n", f);
  fclose(f);

  data_source *src = NULL;
  data_open(tpath("shards"), &src, &g_status);
  cr_assert_not_null(src, "%s", g_err);
  cr_assert_eq(data_num_shards(src), 3);
  cr_assert_eq(data_num_tokens(src), 180);
  cr_assert_eq(data_vocab_size(src), 2030);
  int32_t all[180];
  data_read_tokens(src, 0, 180, all);
  for (int i = 0; i < 100; i++) cr_assert_eq(all[i], a[i]);
  for (int i = 0; i < 50; i++) cr_assert_eq(all[100 + i], b[i]);
  for (int i = 0; i < 30; i++) cr_assert_eq(all[150 + i], (int32_t)c[i]);
  int32_t x[60];
  data_read_tokens(src, 95, 60, x); /* spans all three shards */
  cr_assert_arr_eq(x, all + 95, sizeof x);
  data_close(src);

  char list[1600];
  snprintf(list, sizeof list, "%s,%s", tpath("shards/02.tok"), tpath("shards/01.tok"));
  data_open(list, &src, &g_status);
  cr_assert_not_null(src, "%s", g_err);
  cr_assert_eq(data_num_tokens(src), 150);
  data_read_tokens(src, 0, 1, x);
  cr_assert_eq(x[0], 1000, "comma list keeps the given order");
  data_close(src);
}

/* ---- permutation and samples ---- */

Test(data, permutation_is_a_bijection) {
  const int64_t sizes[] = {1, 2, 3, 7, 16, 17, 1000, 4097};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    int64_t n = sizes[k];
    for (uint64_t epoch = 0; epoch < 3; epoch++) {
      char *seen = calloc((size_t)n, 1);
      for (int64_t i = 0; i < n; i++) {
        int64_t j = data_permute(n, 1234, epoch, i);
        cr_assert(j >= 0 && j < n, "n=%lld i=%lld -> %lld", (long long)n, (long long)i, (long long)j);
        cr_assert_eq(seen[j], 0, "n=%lld: %lld hit twice", (long long)n, (long long)j);
        seen[j] = 1;
      }
      free(seen);
    }
  }
}

static bool same_perm(int64_t n, uint64_t s1, uint64_t e1, uint64_t s2, uint64_t e2) {
  for (int64_t i = 0; i < n; i++)
    if (data_permute(n, s1, e1, i) != data_permute(n, s2, e2, i)) return false;
  return true;
}

Test(data, permutation_differs_across_epochs_and_seeds) {
  cr_assert(!same_perm(1000, 1, 0, 1, 1));
  cr_assert(!same_perm(1000, 1, 1, 1, 2));
  cr_assert(!same_perm(1000, 1, 0, 2, 0));
  int differ = 0; /* n = 7: 5040 orders, some of 10 epochs must differ from epoch 0 */
  for (uint64_t e = 1; e <= 10; e++) differ += !same_perm(7, 99, 0, 99, e);
  cr_assert_gt(differ, 5);
  cr_assert(same_perm(1000, 1, 0, 1, 0), "deterministic");
  /* not the identity */
  int fixed = 0;
  for (int64_t i = 0; i < 1000; i++) fixed += data_permute(1000, 5, 0, i) == i;
  cr_assert_lt(fixed, 20);
}

static data_source *seq_source(int64_t n) {
  int32_t *tok = malloc((size_t)n * sizeof *tok);
  for (int64_t i = 0; i < n; i++) tok[i] = (int32_t)(i % 60000);
  write_shard(tpath("seq.tok"), 2, 60000, tok, (size_t)n);
  free(tok);
  data_source *src = NULL;
  data_open(tpath("seq.tok"), &src, &g_status);
  cr_assert_not_null(src, "%s", g_err);
  return src;
}

Test(data, split_sizes) {
  data_source *src = seq_source(1001);
  data_split tr, va;
  cr_assert_eq(data_split_make(src, 0.1, 10, &tr, &va, &g_status), 0, "%s", g_err);
  cr_assert_eq(va.num_tokens, 100);
  cr_assert_eq(tr.num_tokens, 901);
  cr_assert_eq(va.start, 901);
  cr_assert_eq(data_split_num_samples(&tr), 90);
  cr_assert_eq(data_split_num_samples(&va), 9);

  cr_assert_eq(data_split_make(src, 0.0001, 10, &tr, &va, &g_status), 0, "%s", g_err);
  cr_assert_eq(va.num_tokens, 11, "at least one validation sample");
  cr_assert_eq(data_split_num_samples(&va), 1);
  cr_assert_eq(tr.num_tokens, 990);
  cr_assert_eq(data_split_num_samples(&tr), 98);

  cr_assert_eq(data_split_make(src, 0.0, 10, &tr, &va, &g_status), 0, "%s", g_err);
  cr_assert_eq(data_split_num_samples(&va), 0);
  cr_assert_eq(data_split_num_samples(&tr), 100);
  cr_assert_eq(data_split_make(src, 0.0, 1000, &tr, NULL, &g_status), 0, "%s", g_err);
  cr_assert_eq(data_split_num_samples(&tr), 1);

  cr_assert_eq(data_split_make(src, 0.0, 1001, &tr, &va, &g_status), -1);
  cr_assert(strstr(g_err, "too few tokens"), "%s", g_err);
  cr_assert(strstr(g_err, tpath("seq.tok")), "%s", g_err);
  cr_assert_eq(data_split_make(src, 0.5, 600, &tr, &va, &g_status), -1);
  cr_assert(strstr(g_err, "too few tokens"), "%s", g_err);
  cr_assert_eq(data_split_make(src, 1.0, 10, &tr, &va, &g_status), -1);
  cr_assert(strstr(g_err, "fraction"), "%s", g_err);
  cr_assert_eq(data_split_make(src, 0.1, 0, &tr, &va, &g_status), -1);
  cr_assert(strstr(g_err, "seq_len"), "%s", g_err);
  data_close(src);
}

Test(data, samples_are_windows_and_deterministic) {
  data_source *src = seq_source(5000);
  data_split tr, va;
  cr_assert_eq(data_split_make(src, 0.05, 16, &tr, &va, &g_status), 0, "%s", g_err);
  int64_t n = data_split_num_samples(&tr);
  cr_assert_eq(n, (tr.num_tokens - 1) / 16);
  int32_t in[16], tg[16], in2[16], tg2[16];
  char *seen = calloc((size_t)n, 1);
  for (int64_t i = 0; i < 3 * n; i++) {
    data_get_sample(&tr, 77, i, in, tg);
    int64_t w = data_permute(n, 77, (uint64_t)(i / n), i % n);
    for (int t = 0; t < 16; t++) {
      cr_assert_eq(in[t], (int32_t)(w * 16 + t), "inputs are window w");
      cr_assert_eq(tg[t], in[t] + 1, "targets are inputs shifted by one");
    }
    if (i < n) seen[w]++;
  }
  for (int64_t w = 0; w < n; w++) cr_assert_eq(seen[w], 1, "each window once per epoch");
  free(seen);

  /* Same (seed, i) -> same tokens, from a freshly opened source too (another
   * rank), in any order of reads. */
  data_source *src2 = NULL;
  data_open(tpath("seq.tok"), &src2, &g_status);
  data_split tr2, va2;
  cr_assert_eq(data_split_make(src2, 0.05, 16, &tr2, &va2, &g_status), 0);
  for (int64_t i = 5 * n + 3; i >= 0; i -= 7) {
    data_get_sample(&tr, 9, i, in, tg);
    data_get_sample(&tr2, 9, i, in2, tg2);
    cr_assert_arr_eq(in, in2, sizeof in);
    cr_assert_arr_eq(tg, tg2, sizeof tg);
  }
  /* Different seeds give a different order. */
  int differ = 0;
  for (int64_t i = 0; i < 20; i++) {
    data_get_sample(&tr, 1, i, in, tg);
    data_get_sample(&tr, 2, i, in2, tg2);
    differ += in[0] != in2[0];
  }
  cr_assert_gt(differ, 10);
  /* data.order=sequential: window i % n, the stored order, whatever the
   * seed; shuffled: what data_get_sample reads. */
  for (int64_t i = 0; i < 3 * n; i += 5) {
    cr_assert_eq(data_sample_window(&tr, DATA_ORDER_SEQUENTIAL, 9, i), i % n);
    data_get_window(&tr, data_sample_window(&tr, DATA_ORDER_SHUFFLED, 9, i), in, tg);
    data_get_sample(&tr, 9, i, in2, tg2);
    cr_assert_arr_eq(in, in2, sizeof in);
  }

  /* Validation: stored order, after the training tokens. */
  for (int64_t k = 0; k < data_split_num_samples(&va); k++) {
    data_get_window(&va, k, in, tg);
    cr_assert_eq(in[0], (int32_t)(va.start + 16 * k));
    cr_assert_eq(tg[15], (int32_t)(va.start + 16 * k + 16));
  }
  data_close(src2);
  data_close(src);
}

/* ---- bad inputs ---- */

Test(data, missing_file) {
  expect_open_fails(tpath("nope.tok"), "No such file");
  char list[1200];
  data_source *ok = seq_source(100);
  data_close(ok);
  snprintf(list, sizeof list, "%s,%s", tpath("seq.tok"), tpath("gone.bin"));
  g_status = (boost_status){0};
  data_source *none = NULL;
  cr_assert_eq(data_open(list, &none, &g_status), -1);
  cr_assert_null(none);
  cr_assert(strstr(g_err, "gone.bin") && strstr(g_err, "No such file"), "%s", g_err);
  cr_assert_eq(data_open("", &none, &g_status), -1);
  cr_assert(strstr(g_err, "empty"), "%s", g_err);
}

Test(data, empty_directory) {
  mkdir(tpath("empty"), 0755);
  expect_open_fails(tpath("empty"), "no *.tok or *.bin");
}

Test(data, truncated_file) {
  data_source *ok = seq_source(1000);
  data_close(ok);
  cr_assert_eq(truncate(tpath("seq.tok"), 256 + 2 * 1000 - 3), 0);
  expect_open_fails(tpath("seq.tok"), "truncated");
  cr_assert_eq(truncate(tpath("seq.tok"), 100), 0);
  expect_open_fails(tpath("seq.tok"), "truncated");
  cr_assert_eq(truncate(tpath("seq.tok"), 3), 0);
  expect_open_fails(tpath("seq.tok"), "too small");

  uint32_t tok[10] = {1, 2, 3};
  write_llmc(tpath("t.bin"), LLMC_MAGIC_GPT2, 1, tok, 10, 2);
  cr_assert_eq(truncate(tpath("t.bin"), 1024 + 15), 0);
  expect_open_fails(tpath("t.bin"), "truncated");
}

Test(data, trailing_bytes) {
  data_source *ok = seq_source(1000);
  data_close(ok);
  FILE *f = fopen(tpath("seq.tok"), "ab");
  fputs("xx", f);
  fclose(f);
  expect_open_fails(tpath("seq.tok"), "size mismatch");
}

Test(data, bad_magic) {
  data_source *ok = seq_source(100);
  data_close(ok);
  flip_byte(tpath("seq.tok"), 0);
  expect_open_fails(tpath("seq.tok"), "bad magic");
  FILE *f = fopen(tpath("text.txt"), "w");
  fputs("just some text, definitely not a shard\n", f);
  fclose(f);
  expect_open_fails(tpath("text.txt"), "bad magic");
}

Test(data, unknown_version) {
  uint32_t tok[4] = {1, 2, 3, 4};
  write_raw(tpath("v3.tok"), 3, 2, 257, tok, 4, "byte-v1", 256, 1);
  expect_open_fails(tpath("v3.tok"), "unsupported boost token shard version 3");
  write_llmc(tpath("v3.bin"), LLMC_MAGIC_GPT2, 3, tok, 4, 2);
  expect_open_fails(tpath("v3.bin"), "unsupported llm.c shard version 3");
}

Test(data, checksum_mismatch) {
  data_source *ok = seq_source(1000);
  data_close(ok);
  flip_byte(tpath("seq.tok"), 256 + 777);
  expect_open_fails(tpath("seq.tok"), "checksum mismatch");
}

Test(data, header_corruption) {
  data_source *ok = seq_source(1000);
  data_close(ok);
  flip_byte(tpath("seq.tok"), 20); /* vocab size */
  expect_open_fails(tpath("seq.tok"), "header checksum mismatch");
}

Test(data, token_out_of_vocab) {
  uint32_t tok[5] = {1, 2, 300, 4, 5};
  write_raw(tpath("oov.tok"), 1, 2, 257, tok, 5, "byte-v1", 256, 1);
  expect_open_fails(tpath("oov.tok"), "token 300 at index 2 >= vocab size 257");
  write_raw(tpath("w3.tok"), 1, 3, 257, tok, 5, "byte-v1", 256, 1);
  expect_open_fails(tpath("w3.tok"), "token width 3");

  int32_t bad = 257;
  data_writer *w = NULL;
  cr_assert_eq(data_writer_open(tpath("w.tok"), 2, 257, "byte-v1", 256, &w, &g_status), 0);
  cr_assert_not_null(w);
  cr_assert_eq(data_writer_add(w, &bad, 1, &g_status), -1);
  cr_assert(strstr(g_err, "out of range"), "%s", g_err);
  data_writer_abort(w);
  cr_assert_eq(access(tpath("w.tok.tmp"), F_OK), -1);
  cr_assert_eq(access(tpath("w.tok"), F_OK), -1);
}

Test(data, writer_bad_arguments) {
  data_writer *nw = NULL;
  cr_assert_eq(data_writer_open(tpath("x.tok"), 2, 70000, "t", DATA_NO_EOT, &nw, &g_status), -1);
  cr_assert_null(nw);
  cr_assert(strstr(g_err, "vocab size 70000"), "%s", g_err);
  cr_assert_eq(data_writer_open(tpath("x.tok"), 8, 100, "t", DATA_NO_EOT, &nw, &g_status), -1);
  cr_assert_null(nw);
  cr_assert_eq(data_writer_open(tpath("x.tok"), 2, 100, "t", 100, &nw, &g_status), -1);
  cr_assert_null(nw);
  cr_assert(strstr(g_err, "EOT"), "%s", g_err);
  cr_assert_eq(data_writer_open(tpath("no/such/dir/x.tok"), 2, 100, "t", DATA_NO_EOT, &nw, &g_status), -1);
  cr_assert_null(nw);
  cr_assert(strstr(g_err, "cannot create"), "%s", g_err);
}
