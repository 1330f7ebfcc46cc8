/* test-backend-ops: every op of every backend this build has, against the
 * CPU backend with float activations (bops.h explains the method).
 *
 *   test-backend-ops [--backend NAME[:f32|bf16]]... [--small] [--seed N] [--list]
 *
 * Without --backend: cpu f32 (the reference against itself: determinism
 * and the gradient checks), cpu bf16, guarded f32 and bf16, and cuda f32
 * and bf16 where this build has CUDA and a GPU is usable (a line says so
 * where not). --small: small shapes only; --seed: the random shapes and
 * values (default 1); --list: the ops and the backends, nothing run.
 * Exit: 0 every check passed, 1 a failure, 2 bad arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bops.h"

typedef struct {
  const char *name;
  boost_dtype act;
} target;

static int usage(FILE *f, int status) {
  fprintf(f, "usage: test-backend-ops [--backend cpu|guarded|cuda[:f32|bf16]]... [--small] [--seed N] [--list]\n");
  return status;
}

/* "cpu", "cpu:bf16": one or both act types */
static int parse_target(const char *arg, target *out, int *n) {
  char name[32];
  const char *colon = strchr(arg, ':');
  const size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
  if (len == 0 || len >= sizeof name) return -1;
  memcpy(name, arg, len);
  name[len] = 0;
  if (strcmp(name, "cpu") && strcmp(name, "guarded") && strcmp(name, "cuda")) return -1;
  const char *act = colon ? colon + 1 : "both";
  const int f32 = !strcmp(act, "f32") || !strcmp(act, "both"), bf16 = !strcmp(act, "bf16") || !strcmp(act, "both");
  if (!f32 && !bf16) return -1;
  static char names[16][32];
  if (*n + f32 + bf16 > 16) return -1;
  for (int a = 0; a < 2; a++)
    if (a ? bf16 : f32) {
      snprintf(names[*n], sizeof names[*n], "%s", name);
      out[*n].name = names[*n];
      out[(*n)++].act = a ? BOOST_BF16 : BOOST_F32;
    }
  return 0;
}

int main(int argc, char **argv) {
  target t[16];
  int nt = 0, small = 0, list = 0;
  unsigned long long seed = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--small")) small = 1;
    else if (!strcmp(argv[i], "--list")) list = 1;
    else if (!strcmp(argv[i], "--help"))
      return usage(stdout, 0);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
      char *end;
      seed = strtoull(argv[++i], &end, 10);
      if (*end) return fprintf(stderr, "test-backend-ops: --seed wants a number, not '%s'\n", argv[i]), 2;
    } else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
      if (parse_target(argv[++i], t, &nt))
        return fprintf(stderr, "test-backend-ops: --backend cpu|guarded|cuda[:f32|bf16], not '%s'\n", argv[i]), 2;
    } else
      return usage(stderr, 2);
  }
  if (!nt) {
    const char *all[] = {"cpu", "guarded", "cuda"};
    for (int b = 0; b < 3; b++)
      if (boost_backend_built(all[b])) parse_target(all[b], t, &nt);
  }
  if (list) {
    for (int op = 0; op < BOOST_OP_COUNT; op++) printf("op %s\n", boost_op_names[op]);
    for (int i = 0; i < nt; i++) printf("backend %s %s\n", t[i].name, boost_dtype_names[t[i].act]);
    return 0;
  }
  boost_status err = {0};
  boost_backend *ref = NULL;
  boost_backend_create("cpu", BOOST_F32, 0, 0, &ref, &err);
  if (!ref) return fprintf(stderr, "test-backend-ops: the reference: %s\n", err.msg), 1;
  printf("test-backend-ops: %d ops, seed %llu%s\n", BOOST_OP_COUNT, seed, small ? ", small shapes" : "");
  int runs = 0;
  for (int i = 0; i < nt; i++) {
    boost_backend *be = NULL;
    boost_backend_create(t[i].name, t[i].act, 0, 0, &be, &err);
    if (!be) {
      /* a backend this build has but this machine cannot run (cuda without a GPU) */
      printf("note: %s %s not run: %s\n", t[i].name, boost_dtype_names[t[i].act], err.msg);
      continue;
    }
    g_seed(seed);
    printf("== %s %s: %s\n", t[i].name, boost_dtype_names[t[i].act], be->info);
    const int failed = bops_run(be, ref, small);
    printf("== %s %s: %s\n", t[i].name, boost_dtype_names[t[i].act], failed ? "FAILED" : "every op passed");
    boost_backend_destroy(be);
    runs++;
  }
  boost_backend_destroy(ref);
  int checks, failed;
  g_totals(&checks, &failed);
  printf("test-backend-ops: %d backends, %d checks, %d failed\n", runs, checks, failed);
  return failed || !runs ? 1 : 0;
}
