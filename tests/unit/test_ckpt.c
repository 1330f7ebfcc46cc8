/* Checkpoint building blocks that need no MPI: the layout-independent
 * checksum (fast path vs the xxHash library, any partition of a tensor gives
 * the same sum), the chunk-shape rules, file names, and the directory
 * protocol (temporaries, `latest`, retention). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "ckpt_rollback.h"
#include "ckpt_test_hooks.h"

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 11;
}

Test(ckpt_hash, fast_path_equals_xxh3_library) {
  uint64_t st = 1;
  uint32_t v[1000];
  for (int i = 0; i < 1000; i++) v[i] = (uint32_t)lcg(&st);
  v[0] = 0, v[1] = 0xffffffffu, v[2] = 0x80000000u, v[3] = 0x7fc00001u;
  const uint64_t bases[] = {0, 1, 255, 0xffffff00ull, 0xfffffffeull, 0x100000000ull, 0x123456789abull, UINT64_MAX - 2000};
  for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
    uint64_t want = 0;
    for (int i = 0; i < 1000; i++) {
      unsigned char le[4] = {(unsigned char)v[i], (unsigned char)(v[i] >> 8), (unsigned char)(v[i] >> 16), (unsigned char)(v[i] >> 24)};
      want += XXH3_64bits_withSeed(le, 4, bases[b] + (uint64_t)i);
    }
    cr_assert_eq(ckpt_hash_run32(v, 1000, bases[b]), want, "base %llu", (unsigned long long)bases[b]);
    cr_assert_eq(ckpt_hash_run32_reference(v, 1000, bases[b]), want);
    /* unaligned input */
    unsigned char buf[4 * 1000 + 1];
    memcpy(buf + 1, v, sizeof v);
    cr_assert_eq(ckpt_hash_run32(buf + 1, 1000, bases[b]), want);
  }
}

Test(ckpt_hash, run64_is_the_8_byte_term) {
  int64_t x[3] = {-1, 0, 1234567890123ll};
  uint64_t want = 0;
  for (int i = 0; i < 3; i++) want += XXH3_64bits_withSeed(&x[i], 8, 7 + (uint64_t)i);
  cr_assert_eq(ckpt_hash_run64(x, 3, 7), want);
}

/* A [5, 6, 7] tensor: the whole, rows split, columns split, a middle block
 * split along every dim: the sums of the parts equal the whole. */
Test(ckpt_hash, any_partition_gives_the_same_sum) {
  enum { A = 5, B = 6, C = 7 };
  static float t[A][B][C];
  uint64_t st = 9;
  for (int i = 0; i < A; i++)
    for (int j = 0; j < B; j++)
      for (int k = 0; k < C; k++) t[i][j][k] = (float)((double)lcg(&st) / 9e15 - 1.0);
  const int64_t g[3] = {A, B, C};
  const uint64_t whole = ckpt_hash_run32(t, A * B * C, 0);
  const int64_t z[3] = {0, 0, 0};
  cr_assert_eq(ckpt_hash_slab32(t, 3, g, z, g), whole);
  /* split along each dim at an uneven point, every cut */
  for (int dim = 0; dim < 3; dim++)
    for (int cut = 1; cut < g[dim]; cut++) {
      uint64_t sum = 0;
      for (int part = 0; part < 2; part++) {
        int64_t off[3] = {0, 0, 0}, ext[3] = {A, B, C};
        off[dim] = part ? cut : 0;
        ext[dim] = part ? g[dim] - cut : cut;
        float *blk = malloc(sizeof(float) * (size_t)(ext[0] * ext[1] * ext[2]));
        size_t n = 0;
        for (int i = 0; i < ext[0]; i++)
          for (int j = 0; j < ext[1]; j++)
            for (int k = 0; k < ext[2]; k++) blk[n++] = t[off[0] + i][off[1] + j][off[2] + k];
        sum += ckpt_hash_slab32(blk, 3, g, off, ext);
        free(blk);
      }
      cr_assert_eq(sum, whole, "dim %d cut %d", dim, cut);
    }
  /* a changed or moved element changes the sum */
  float s = t[1][2][3];
  t[1][2][3] = t[1][2][4];
  t[1][2][4] = s;
  cr_assert_neq(ckpt_hash_run32(t, A * B * C, 0), whole);
}

/* bf16 elements hash as the float32 values they widen to: a [3, 300] slab
 * (rows of more than one 256-element block, odd offsets) of bf16 bits sums
 * to the same terms as the widened float32 block, in any partition. */
Test(ckpt_hash, bf16_hashes_as_its_widened_float32) {
  enum { R = 3, C = 300 };
  static uint16_t h[R * C];
  static uint32_t w[R * C];
  uint64_t st = 5;
  for (int i = 0; i < R * C; i++) {
    h[i] = (uint16_t)lcg(&st);
    w[i] = (uint32_t)h[i] << 16;
  }
  h[0] = 0x7fc1, w[0] = 0x7fc10000u; /* a NaN and a negative zero keep their bits */
  h[1] = 0x8000, w[1] = 0x80000000u;
  cr_assert_eq(ckpt_hash_run_bf16(h, R * C, 11), ckpt_hash_run32(w, R * C, 11));
  const int64_t g[2] = {R, C}, off[2] = {1, 7}, ext[2] = {2, 290};
  static uint16_t hb[2 * 290];
  static uint32_t wb[2 * 290];
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 290; k++) hb[i * 290 + k] = h[(1 + i) * C + 7 + k], wb[i * 290 + k] = w[(1 + i) * C + 7 + k];
  cr_assert_eq(ckpt_hash_slab_bf16(hb, 2, g, off, ext), ckpt_hash_slab32(wb, 2, g, off, ext));
  const int64_t z[2] = {0, 0};
  cr_assert_eq(ckpt_hash_slab_bf16(h, 2, g, z, g), ckpt_hash_run32(w, R * C, 0));
  h[5] ^= 1; /* the lowest mantissa bit */
  cr_assert_neq(ckpt_hash_slab_bf16(h, 2, g, z, g), ckpt_hash_run32(w, R * C, 0));
}

Test(ckpt_h5, chunk_dims_depend_on_the_global_shape_only) {
  hsize_t c[3];
  const int64_t s1[2] = {32000, 512};
  ckpt_chunk_dims(2, s1, c);
  cr_assert(c[0] == 512 && c[1] == 512);
  const int64_t s2[1] = {64};
  ckpt_chunk_dims(1, s2, c);
  cr_assert(c[0] == 64);
  const int64_t s3[2] = {3, 300000};
  ckpt_chunk_dims(2, s3, c);
  cr_assert(c[0] == 1 && c[1] == 262144);
  const int64_t s4[3] = {3, 256, 768};
  ckpt_chunk_dims(3, s4, c);
  cr_assert(c[0] == 1 && c[1] == 256 && c[2] == 768, "%llu %llu %llu", (unsigned long long)c[0], (unsigned long long)c[1],
            (unsigned long long)c[2]);
}

/* The writers' hyperslabs meet at multiples of cut[d]: chunks follow them,
 * so each chunk has one writer. */
Test(ckpt_h5, chunk_dims_follow_the_cuts) {
  hsize_t c[3];
  const int64_t s1[2] = {32000, 512}, k1[2] = {16000, 0}; /* vocab-parallel tp=2 */
  ckpt_chunk_dims_cut(2, s1, k1, c);
  cr_assert(c[0] == 500 && c[1] == 512, "%llu %llu", (unsigned long long)c[0], (unsigned long long)c[1]);
  const int64_t s2[3] = {2048, 3, 128}, k2[3] = {1024, 0, 0}; /* activations of 2 replicas, B*T = 1024 */
  ckpt_chunk_dims_cut(3, s2, k2, c);
  cr_assert(c[0] == 512 && c[1] == 3 && c[2] == 128, "%llu", (unsigned long long)c[0]);
  const int64_t s3[2] = {1024, 512}, k3[2] = {0, 256}; /* columns of tp=2: the cell [1024, 256] fits one chunk */
  ckpt_chunk_dims_cut(2, s3, k3, c);
  cr_assert(c[0] == 1024 && c[1] == 256);
  const int64_t none[2] = {0, 0};
  ckpt_chunk_dims_cut(2, s1, none, c);
  cr_assert(c[0] == 512 && c[1] == 512, "no cuts: the default rule");

  int64_t cut[2] = {0, 0};
  const int64_t sh[2] = {100, 64}, st1[2] = {25, 0}, ct1[2] = {25, 64}, st2[2] = {50, 32}, ct2[2] = {50, 32};
  ckpt_chunk_cut_add(2, sh, st1, ct1, cut);
  cr_assert(cut[0] == 25 && cut[1] == 0, "%lld %lld", (long long)cut[0], (long long)cut[1]);
  ckpt_chunk_cut_add(2, sh, st2, ct2, cut); /* 100 is the edge, not a cut */
  cr_assert(cut[0] == 25 && cut[1] == 32, "%lld %lld", (long long)cut[0], (long long)cut[1]);

  /* Uneven shards of 7 rows over [0, 7), [7, 15), [15, 21): every shard a union of whole chunks */
  const int64_t s4[2] = {21, 5}, bounds[4] = {0, 7, 15, 21};
  int64_t k4[2] = {0, 0};
  for (int r = 0; r < 3; r++) {
    const int64_t st[2] = {bounds[r], 0}, ct[2] = {bounds[r + 1] - bounds[r], 5};
    ckpt_chunk_cut_add(2, s4, st, ct, k4);
  }
  ckpt_chunk_dims_cut(2, s4, k4, c);
  for (int r = 0; r < 4; r++) cr_assert(bounds[r] % (int64_t)c[0] == 0 || bounds[r] == 21, "chunk %llu", (unsigned long long)c[0]);
}

Test(ckpt_h5, file_names) {
  char n[64];
  ckpt_file_name(n, sizeof n, 40);
  cr_assert_str_eq(n, "step_00000040.h5");
  cr_assert_eq(ckpt_parse_file_name(n), 40);
  cr_assert_eq(ckpt_parse_file_name("step_123456789.h5"), 123456789);
  cr_assert_eq(ckpt_parse_file_name("step_00000040.h5.tmp"), -1);
  cr_assert_eq(ckpt_parse_file_name("step_0040.h5"), -1);
  cr_assert_eq(ckpt_parse_file_name("step_00000040.h5.superseded"), -1);
  cr_assert_eq(ckpt_parse_file_name("step_00000040.h5.superseded.3"), -1);
  cr_assert_eq(ckpt_parse_file_name("latest"), -1);
}

static void touch(const char *dir, const char *name) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  cr_assert(f);
  fputs("x", f);
  fclose(f);
}

static int exists(const char *dir, const char *name) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

Test(ckpt_fs, temporaries_latest_retention) {
  char dir[] = "/tmp/test_ckpt_fs.XXXXXX";
  cr_assert(mkdtemp(dir));
  char sub[600];
  boost_status err = {0};
  snprintf(sub, sizeof sub, "%s/a/b", dir);
  cr_assert_eq(ckpt_fs_mkdirs(sub, &err), 0, "%s", err.msg);
  for (int s = 2; s <= 12; s += 2) {
    char n[64];
    ckpt_file_name(n, sizeof n, s);
    touch(sub, n);
  }
  touch(sub, "step_00000014.h5.tmp");
  touch(sub, "latest.tmp");
  touch(sub, "notes.txt");
  char removed[256];
  cr_assert_eq(ckpt_fs_clean_temporaries(sub, removed, sizeof removed), 2);
  cr_assert(!exists(sub, "step_00000014.h5.tmp") && !exists(sub, "latest.tmp") && exists(sub, "notes.txt"));
  int64_t *steps;
  int n;
  cr_assert_eq(ckpt_fs_list(sub, &steps, &n, &err), 0);
  cr_assert_eq(n, 6);
  cr_assert(steps[0] == 12 && steps[5] == 2);
  free(steps);
  cr_assert_eq(ckpt_fs_write_latest(sub, "step_00000012.h5", &err), 0, "%s", err.msg);
  char latest[64];
  cr_assert_eq(ckpt_fs_read_latest(sub, latest, sizeof latest), 0);
  cr_assert_str_eq(latest, "step_00000012.h5");
  /* committed 8 after a resume from 6: 10 and 12 belong to an abandoned run.
   * `latest` names step 2 here (say its update to 8 failed): that file is
   * kept although retention would delete it. */
  cr_assert_eq(ckpt_fs_write_latest(sub, "step_00000002.h5", &err), 0, "%s", err.msg);
  char report[512];
  ckpt_fs_retain(sub, 8, 2, 4, report, sizeof report);
  cr_assert(exists(sub, "step_00000002.h5"), "the file latest names was removed: %s", report);
  cr_assert_eq(ckpt_fs_write_latest(sub, "step_00000008.h5", &err), 0, "%s", err.msg);
  ckpt_fs_retain(sub, 8, 2, 4, report, sizeof report);
  cr_assert(exists(sub, "step_00000008.h5") && exists(sub, "step_00000006.h5"), "%s", report);
  cr_assert(exists(sub, "step_00000004.h5"), "keep_every 4: %s", report);
  cr_assert(!exists(sub, "step_00000002.h5"), "%s", report);
  /* newer ones are the set-aside's (before the commit), never retention's */
  cr_assert(exists(sub, "step_00000010.h5") && exists(sub, "step_00000012.h5"), "%s", report);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* The test switches live outside the session: a test puts them in place
 * and takes them away, and the environment sets them at open. */
Test(ckpt_test_hooks, setter_and_env) {
  ckpt_test_hooks_set(NULL);
  cr_assert(!ckpt_test_fails(7, 0), "all off by default");
  cr_assert_eq(ckpt_test_hooks_now()->flip_step, -1);
  ckpt_test_hooks h = *ckpt_test_hooks_now();
  h.fail_step = 7;
  h.fail_rank = 1;
  ckpt_test_hooks_set(&h);
  cr_assert(ckpt_test_fails(7, 1));
  cr_assert(!ckpt_test_fails(7, 0), "another rank");
  cr_assert(!ckpt_test_fails(6, 1), "another step");
  h.fail_rank = -1;
  ckpt_test_hooks_set(&h);
  cr_assert(ckpt_test_fails(7, 0) && ckpt_test_fails(7, 3), "every rank");
  setenv("BOOST_CKPT_TEST_FAIL", "5:2", 1);
  setenv("BOOST_CKPT_TEST_FLIP_AFTER_WRITE", "9", 1);
  ckpt_test_hooks_from_env();
  cr_assert(ckpt_test_fails(5, 2) && !ckpt_test_fails(5, 1) && !ckpt_test_fails(7, 0));
  cr_assert_eq(ckpt_test_hooks_now()->flip_step, 9);
  cr_assert_eq(ckpt_test_hooks_now()->delay_ms, 0);
  unsetenv("BOOST_CKPT_TEST_FAIL");
  unsetenv("BOOST_CKPT_TEST_FLIP_AFTER_WRITE");
  ckpt_test_hooks_from_env();
  cr_assert(!ckpt_test_fails(5, 2), "unset again");
}

/* ---- set-aside branches (ckpt_rollback.h) ---------------------------------- */

Test(ckpt_set_aside, names) {
  char n[64];
  int b = -1;
  ckpt_set_aside_name(n, sizeof n, 8, 3);
  cr_assert_str_eq(n, "step_00000008.h5.superseded.3");
  cr_assert_eq(ckpt_parse_set_aside_name(n, &b), 8);
  cr_assert_eq(b, 3);
  ckpt_set_aside_name(n, sizeof n, 8, 0); /* an older boost's name: branch 0 */
  cr_assert_str_eq(n, "step_00000008.h5.superseded");
  cr_assert_eq(ckpt_parse_set_aside_name(n, &b), 8);
  cr_assert_eq(b, 0);
  cr_assert_eq(ckpt_parse_set_aside_name("step_00000012.h5.superseded.12", &b), 12);
  cr_assert_eq(b, 12);
  static const char *const not_aside[] = {"step_00000008.h5", "step_00000008.h5.superseded.0",
                                          "step_00000008.h5.superseded.01", "step_00000008.h5.superseded.x",
                                          "step_00000008.h5.superseded.1.tmp", "step_0008.h5.superseded.1",
                                          "step_00000008.h5.superseded.", "step_00000008.h5.supersededX",
                                          "step_00000008.h5.superseded.99999999999", "latest", "set_aside.pending"};
  for (size_t i = 0; i < sizeof not_aside / sizeof *not_aside; i++)
    cr_assert_eq(ckpt_parse_set_aside_name(not_aside[i], &b), -1, "%s", not_aside[i]);
}

static void put(const char *dir, const char *name, const char *text) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  cr_assert(f, "%s", p);
  fputs(text, f);
  fclose(f);
}

static const char *content(const char *dir, const char *name) {
  static char buf[128];
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "r");
  if (!f) return "(absent)";
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

static const char *latest_of(const char *dir) {
  static char name[256];
  return ckpt_fs_read_latest(dir, name, sizeof name) == 0 ? name : "(none)";
}

static void remove_dir(const char *dir) {
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* Two rollbacks past step 8: both branches' step 8 kept, each its own. */
Test(ckpt_set_aside, two_rollbacks_past_one_step_keep_both) {
  char dir[] = "/tmp/test_ckpt_aside.XXXXXX";
  cr_assert(mkdtemp(dir));
  boost_status err = {0};
  char note[600];
  put(dir, "step_00000004.h5", "s4");
  put(dir, "step_00000012.h5.superseded", "old-12"); /* an older boost's set-aside: branch 0 */
  for (int round = 1; round <= 2; round++) {
    char text[16];
    snprintf(text, sizeof text, "b%d-8", round);
    put(dir, "step_00000008.h5", text);
    cr_assert_eq(ckpt_fs_write_latest(dir, "step_00000008.h5", &err), 0, "%s", err.msg);
    cr_assert_eq(ckpt_set_aside_after(dir, 4, 0, note, sizeof note, &err), 1, "%s", err.msg);
    char want[96];
    snprintf(want, sizeof want, "set aside step_00000008.h5 as branch %d (*.h5.superseded.%d)", round, round);
    cr_assert_str_eq(note, want);
    cr_assert_str_eq(latest_of(dir), "step_00000004.h5");
    cr_assert(!exists(dir, "step_00000008.h5") && !exists(dir, CKPT_SET_ASIDE_PENDING));
  }
  cr_assert_str_eq(content(dir, "step_00000008.h5.superseded.1"), "b1-8");
  cr_assert_str_eq(content(dir, "step_00000008.h5.superseded.2"), "b2-8");
  cr_assert_str_eq(content(dir, "step_00000012.h5.superseded"), "old-12");
  ckpt_branch *b;
  int n;
  cr_assert_eq(ckpt_branches_list(dir, &b, &n, &err), 0, "%s", err.msg);
  cr_assert_eq(n, 3);
  cr_assert(b[0].branch == 0 && b[0].nsteps == 1 && b[0].steps[0] == 12 && b[0].bytes == 6);
  cr_assert(b[1].branch == 1 && b[1].steps[0] == 8 && b[2].branch == 2 && b[2].bytes == 4);
  ckpt_branches_free(b, n);
  /* nothing newer: nothing set aside, `latest` untouched, no branch made */
  cr_assert_eq(ckpt_set_aside_after(dir, 4, 1, note, sizeof note, &err), 0);
  cr_assert(note[0] == 0 && exists(dir, "step_00000012.h5.superseded"), "no set-aside, no bound: %s", note);
  /* every checkpoint newer: `latest` removed, the next branch numbered 3 */
  cr_assert_eq(ckpt_set_aside_after(dir, -1, 0, note, sizeof note, &err), 1, "%s", err.msg);
  cr_assert(exists(dir, "step_00000004.h5.superseded.3") && !exists(dir, CKPT_LATEST), "%s", note);
  remove_dir(dir);
}

/* ckpt.keep_set_aside: a set-aside beyond the bound removes the oldest
 * branches' files and nothing else; 0 keeps them all. */
Test(ckpt_set_aside, bound_removes_the_oldest_only) {
  char dir[] = "/tmp/test_ckpt_bound.XXXXXX";
  cr_assert(mkdtemp(dir));
  boost_status err = {0};
  char note[600];
  put(dir, "step_00000002.h5", "s2");
  put(dir, "step_00000010.h5.superseded", "old-10");
  put(dir, "step_00000004.h5.superseded.1", "b1-4");
  put(dir, "step_00000006.h5.superseded.1", "b1-6");
  put(dir, "step_00000004.h5.superseded.2", "b2-4");
  put(dir, "notes.txt", "mine");
  put(dir, "step_00000004.h5", "b3-4");
  cr_assert_eq(ckpt_set_aside_after(dir, 2, 3, note, sizeof note, &err), 1, "%s", err.msg); /* branches 0-3: one too many */
  cr_assert(strstr(note, "set aside step_00000004.h5 as branch 3") && strstr(note, "removed the oldest set-aside branch 0 (step_00000010.h5; 0 KiB)") &&
                strstr(note, "ckpt.keep_set_aside=3") && !strstr(note, "branch 1 ("),
            "%s", note);
  cr_assert(!exists(dir, "step_00000010.h5.superseded"));
  cr_assert_str_eq(content(dir, "step_00000004.h5.superseded.1"), "b1-4");
  cr_assert_str_eq(content(dir, "step_00000006.h5.superseded.1"), "b1-6");
  cr_assert_str_eq(content(dir, "step_00000004.h5.superseded.2"), "b2-4");
  cr_assert_str_eq(content(dir, "step_00000004.h5.superseded.3"), "b3-4");
  cr_assert(exists(dir, "notes.txt") && exists(dir, "step_00000002.h5"));
  /* a smaller bound: every branch beyond it goes, oldest first, in one note */
  put(dir, "step_00000004.h5", "b4-4");
  cr_assert_eq(ckpt_set_aside_after(dir, 2, 2, note, sizeof note, &err), 1, "%s", err.msg);
  cr_assert(strstr(note, "branch 1 (step_00000004.h5, step_00000006.h5; 0 KiB), removed the oldest set-aside branch 2"),
            "%s", note);
  cr_assert(!exists(dir, "step_00000004.h5.superseded.1") && !exists(dir, "step_00000006.h5.superseded.1") &&
            !exists(dir, "step_00000004.h5.superseded.2"));
  cr_assert(exists(dir, "step_00000004.h5.superseded.3") && exists(dir, "step_00000004.h5.superseded.4"));
  /* 0 = keep all */
  for (int k = 0; k < 3; k++) {
    put(dir, "step_00000004.h5", "more");
    cr_assert_eq(ckpt_set_aside_after(dir, 2, 0, note, sizeof note, &err), 1, "%s", err.msg);
    cr_assert(!strstr(note, "removed"), "%s", note);
  }
  ckpt_branch *b;
  int n;
  cr_assert_eq(ckpt_branches_list(dir, &b, &n, &err), 0, "%s", err.msg);
  cr_assert(n == 5 && b[0].branch == 3 && b[4].branch == 7, "%d branches", n);
  ckpt_branches_free(b, n);
  /* an oldest branch that cannot be removed (a directory by that name): the
   * set-aside is done and says so, never an error that would fail a commit */
  char d3[700];
  snprintf(d3, sizeof d3, "%s/step_00000004.h5.superseded.3", dir);
  cr_assert_eq(unlink(d3), 0);
  cr_assert_eq(mkdir(d3, 0700), 0);
  put(d3, "inside", "x");
  put(dir, "step_00000004.h5", "last");
  cr_assert_eq(ckpt_set_aside_after(dir, 2, 2, note, sizeof note, &err), 1, "%s", err.msg);
  cr_assert(strstr(note, "set aside step_00000004.h5 as branch 8") &&
                strstr(note, "; ckpt.keep_set_aside: cannot remove ") && strstr(note, "remove it by hand"),
            "%s", note);
  cr_assert(exists(dir, "step_00000004.h5.superseded.8") && exists(dir, "step_00000004.h5.superseded.4"));
  remove_dir(dir);
}

/* A kill -9 at every point of a set-aside (the test hook kills the child
 * there for real): the folder is consistent, and the next start's recovery
 * finishes the set-aside -- every newer checkpoint in the new branch, none
 * left as a checkpoint a resume would take, `latest` at the newest left,
 * every other branch's file intact. */
Test(ckpt_set_aside, kill_at_every_point) {
  for (int point = 0; point <= CKPT_ASIDE_POINTS; point++) {
    char dir[] = "/tmp/test_ckpt_kill.XXXXXX";
    cr_assert(mkdtemp(dir));
    boost_status err = {0};
    put(dir, "step_00000004.h5", "s4");
    put(dir, "step_00000008.h5", "s8");
    put(dir, "step_00000012.h5", "s12");
    put(dir, "step_00000008.h5.superseded", "old-8");
    put(dir, "step_00000008.h5.superseded.1", "b1-8");
    cr_assert_eq(ckpt_fs_write_latest(dir, "step_00000012.h5", &err), 0, "%s", err.msg);
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
      ckpt_test_hooks h = *ckpt_test_hooks_now();
      h.set_aside_kill = point;
      ckpt_test_hooks_set(&h);
      char note[600];
      _exit(ckpt_set_aside_after(dir, 4, 2, note, sizeof note, &err) == 2 ? 0 : 3);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    if (point == 0) cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "no kill point: %#x", status);
    else cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "point %d: status %#x", point, status);
    /* as the crash left it: `latest` names a file that exists, or the intent finishes the set-aside */
    char l[256];
    snprintf(l, sizeof l, "%s", latest_of(dir));
    cr_assert(exists(dir, l) || exists(dir, CKPT_SET_ASIDE_PENDING), "point %d: latest %s is gone, no intent", point, l);
    char note[600];
    const int rc = ckpt_set_aside_recover(dir, note, sizeof note, &err);
    cr_assert_eq(rc, point >= 1 && point <= 4 ? 1 : 0, "point %d: %s %s", point, note, err.msg);
    cr_assert(rc == 0 || strstr(note, "finished the set-aside of branch 2"), "point %d: %s", point, note);
    int64_t *steps;
    int n;
    cr_assert_eq(ckpt_fs_list(dir, &steps, &n, &err), 0);
    cr_assert(n == 1 && steps[0] == 4, "point %d: a resume would take step %lld", point, (long long)steps[0]);
    free(steps);
    cr_assert_str_eq(latest_of(dir), "step_00000004.h5", "point %d", point);
    cr_assert(!exists(dir, CKPT_SET_ASIDE_PENDING), "point %d", point);
    cr_assert_str_eq(content(dir, "step_00000008.h5.superseded.2"), "s8", "point %d", point);
    cr_assert_str_eq(content(dir, "step_00000012.h5.superseded.2"), "s12", "point %d", point);
    cr_assert_str_eq(content(dir, "step_00000008.h5.superseded.1"), "b1-8", "point %d", point);
    /* the bound (keep 2) removes branch 0 after the intent is gone; a kill before it leaves branch 0 whole */
    cr_assert_eq(exists(dir, "step_00000008.h5.superseded"), point >= 1 && point <= CKPT_ASIDE_AT_DONE, "point %d", point);
    remove_dir(dir);
  }
}

/* An intent that cannot be read stops the start with one line naming it. */
Test(ckpt_set_aside, unreadable_intent) {
  char dir[] = "/tmp/test_ckpt_intent.XXXXXX";
  cr_assert(mkdtemp(dir));
  boost_status err = {0};
  char note[600];
  put(dir, "step_00000008.h5", "s8");
  put(dir, CKPT_SET_ASIDE_PENDING CKPT_TMP_SUFFIX, "branch 1 af"); /* a kill while writing the intent */
  cr_assert_eq(ckpt_set_aside_recover(dir, note, sizeof note, &err), 0);
  cr_assert(!exists(dir, CKPT_SET_ASIDE_PENDING CKPT_TMP_SUFFIX) && exists(dir, "step_00000008.h5"));
  put(dir, CKPT_SET_ASIDE_PENDING, "garbage\n");
  cr_assert_eq(ckpt_set_aside_recover(dir, note, sizeof note, &err), -1);
  cr_assert(strstr(err.msg, "set_aside.pending is not a set-aside intent") && !strchr(err.msg, '\n'), "%s", err.msg);
  cr_assert(exists(dir, "step_00000008.h5"), "nothing moved on a bad intent");
  remove_dir(dir);
}
