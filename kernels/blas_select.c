/* Picks OpenBLAS's fastest correct kernel before any program of ours runs.
 *
 * OpenBLAS reads OPENBLAS_CORETYPE once, when the library loads; on some VMs
 * it misdetects the CPU (e.g. an AVX-512 Xeon reported as "Prescott") and runs
 * sgemm ~8x slower. This constructor runs after OpenBLAS initialised itself,
 * compares the core it chose with what CPUID says the CPU can execute, and
 * when OpenBLAS chose a weaker core it sets OPENBLAS_CORETYPE and re-executes
 * the program once (through its own path, so that its process name stays
 * its own). It never asks for instructions the CPU lacks, and it
 * leaves a user's own OPENBLAS_CORETYPE alone. BOOST_BLAS_AUTOSELECT=0 turns
 * it off. */
#include "blas_select.h"

#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *openblas_get_corename(void);

static unsigned xgetbv0(void) {
  unsigned eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return eax;
}

blas_isa blas_cpu_isa(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return BLAS_ISA_BASELINE;
  int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
  if (!osxsave || !avx) return BLAS_ISA_BASELINE;
  unsigned xcr0 = xgetbv0();
  if ((xcr0 & 0x6) != 0x6) return BLAS_ISA_BASELINE; /* OS does not save YMM */
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return BLAS_ISA_BASELINE;
  int avx2 = (b >> 5) & 1;
  int avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1, avx512cd = (b >> 28) & 1;
  int avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
  if (avx512f && avx512dq && avx512cd && avx512bw && avx512vl && (xcr0 & 0xe6) == 0xe6) return BLAS_ISA_AVX512;
  if (avx2 && fma) return BLAS_ISA_AVX2;
  return BLAS_ISA_BASELINE;
}

/* Which ISA tier an OpenBLAS core name's sgemm kernel uses. */
static blas_isa core_tier(const char *core) {
  static const char *const avx512[] = {"skylakex", "cooperlake", "sapphirerapids", NULL};
  static const char *const avx2[] = {"haswell", "zen", "skylake", "broadwell", NULL};
  for (int i = 0; avx512[i]; i++)
    if (strncasecmp(core, avx512[i], strlen(avx512[i])) == 0) return BLAS_ISA_AVX512;
  for (int i = 0; avx2[i]; i++)
    if (strncasecmp(core, avx2[i], strlen(avx2[i])) == 0) return BLAS_ISA_AVX2;
  return BLAS_ISA_BASELINE;
}

const char *blas_better_core(const char *current_core, blas_isa cpu) {
  blas_isa have = core_tier(current_core);
  if (cpu == BLAS_ISA_AVX512 && have < BLAS_ISA_AVX512) return "SkylakeX";
  if (cpu == BLAS_ISA_AVX2 && have < BLAS_ISA_AVX2) return "Haswell";
  return NULL;
}

const char *blas_core_name(void) { return openblas_get_corename(); }

__attribute__((constructor)) static void blas_select_at_start(void) {
  if (getenv("OPENBLAS_CORETYPE")) return;
  const char *flag = getenv("BOOST_BLAS_AUTOSELECT");
  if (flag && strcmp(flag, "0") == 0) return;
  /* Tests pretend OpenBLAS misdetected the CPU to exercise the re-exec. */
  const char *pretend = getenv("BOOST_BLAS_PRETEND_CORE");
  const char *better = blas_better_core(pretend ? pretend : openblas_get_corename(), blas_cpu_isa());
  if (!better) return;
  /* argv is not reachable from a constructor: re-exec with the arguments
   * the kernel recorded (/proc/self/cmdline). */
  FILE *f = fopen("/proc/self/cmdline", "rb");
  if (!f) return;
  static char buf[1 << 16];
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  if (len == 0 || len >= sizeof buf - 1) return;
  buf[len] = '\0';
  char *argv[1024];
  int argc = 0;
  for (size_t i = 0; i < len && argc < 1023; i += strlen(buf + i) + 1) argv[argc++] = buf + i;
  argv[argc] = NULL;
  setenv("OPENBLAS_CORETYPE", better, 1);
  /* The program's own path, not /proc/self/exe: the kernel names a process
   * after the file it executes, and ps, pkill, batch systems and
   * boost-chaos must see "boost-train" (or the tool's name), not "exe". */
  static char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  struct stat path_st, exe_st;
  if (n > 0 && (size_t)n < sizeof self - 1) {
    self[n] = '\0';
    /* only while the path still names the file running now (a rebuild may
     * have replaced it since this process started) */
    if (stat(self, &path_st) == 0 && stat("/proc/self/exe", &exe_st) == 0 && path_st.st_dev == exe_st.st_dev &&
        path_st.st_ino == exe_st.st_ino)
      execv(self, argv);
  }
  execv("/proc/self/exe", argv); /* the file was replaced or removed since: still the same program */
  /* exec failed: carry on with the slower kernel rather than fail. */
  unsetenv("OPENBLAS_CORETYPE");
}
