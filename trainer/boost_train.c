/* boost-train: trains a CoLA / LLaMA-style model from a config.
 *
 *   boost-train [--config FILE] [--set section.key=value ...]
 *
 * Under mpirun, world = dp * tp * pp ranks. Exit status: see usage(). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_select.h"
#include "ckpt_test_hooks.h"
#include "comm.h"
#include "config.h"
#include "log.h"
#include "preempt.h"
#include "resume_plan.h"
#include "test_hooks.h"
#include "trainer.h"
#include "watchdog.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: boost-train [--config FILE] [--set section.key=value ...] [--print-config] [--help]\n"
          "\n"
          "Trains a LLaMA-style model whose projections are CoLA bottlenecks y = B.silu(A.x)\n"
          "(or full-rank). Under mpirun, world = parallel.dp * parallel.tp * parallel.pp;\n"
          "plain `mpirun -n K` without a layout means K data-parallel replicas.\n"
          "\n"
          "  --config FILE      INI file; sections [model] [data] [train] [parallel] [ckpt]\n"
          "  --set KEY=VALUE    override one key, e.g. --set model.preset=cola-60m\n"
          "  --print-config     print the resolved config and exit\n"
          "  --help             this text\n"
          "\n"
          "Exit status: 0 done (final checkpoint committed when ckpt.dir is set), 1 error,\n"
          "75 preempted after its final checkpoint committed, or stopped before training with\n"
          "nothing to save (requeue), 74 ended, done or preempted, without its final state\n"
          "committed. Stop signals: SIGTERM, SIGUSR1, SIGINT, SIGHUP, at any time (start-up\n"
          "included); a second Ctrl-C 2 s or more after the first stop, or SIGUSR2, exits at\n"
          "once (75 if nothing is unsaved, else 74). Under mpirun, launch preemptible runs\n"
          "with tools/mpirun/boost-mpirun. A rank that waits for the others longer than\n"
          "parallel.timeout (a stopped or hung rank) ends the job: 74, or 75 when nothing\n"
          "was trained since the newest committed state.\n"
          "Presets: tiny, cola-60m, cola-130m, cola-350m, cola-1b, cola-7b and llama-* twins.\n"
          "Keys (section.key), with default and allowed values:\n");
  config_print_help(f);
}

int main(int argc, char **argv) {
  boost_log_program("boost-train"); /* first: every warning of the process carries this name */
  /* From here on a stop signal is remembered, never fatal: the run acts on
   * it once its state is consistent (trainer_run). */
  preempt_install_handlers();
  const char *config_path = NULL;
  char **sets = calloc((size_t)argc, sizeof *sets);
  int nsets = 0, print_only = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      free(sets);
      return 0;
    } else if (!strcmp(argv[i], "--config") && i + 1 < argc) {
      if (config_path) {
        fprintf(stderr, "boost-train: --config given twice\n");
        free(sets);
        return 1;
      }
      config_path = argv[++i];
    } else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
      sets[nsets++] = argv[++i];
    } else if (!strcmp(argv[i], "--print-config")) {
      print_only = 1;
    } else {
      fprintf(stderr, "boost-train: unknown or incomplete argument '%s' (see --help)\n", argv[i]);
      free(sets);
      return 1;
    }
  }

  test_sleep_ms(test_delay_ms("BOOST_TRAIN_TEST_START_DELAY_MS"));
  train_config cfg;
  boost_status err = {0};
  const int resolved = config_resolve(&cfg, config_path, nsets, sets, &err) == 0;
  int provided, rank;
  preempt_block(1); /* MPI's helper threads, and the watchdog, inherit the stop signals blocked */
  if (resolved && !print_only) watchdog_start(cfg.parallel.timeout, cfg.ckpt.timeout); /* MPI start-up is watched */
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  preempt_block(0);
  watchdog_mpi_ready(provided >= MPI_THREAD_MULTIPLE);
  watchdog_phase("start-up: resume plan", WATCH_WAIT);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int status = 0;
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) fprintf(stderr, "boost-train: the MPI library does not provide MPI_THREAD_MULTIPLE\n");
    status = 1;
  } else if (!resolved) {
    if (rank == 0) fprintf(stderr, "boost-train: %s\n", err.msg);
    status = 1;
  } else {
    if (rank == 0) {
      printf("boost-train %s | OpenBLAS core %s | config:\n", BOOST_VERSION, blas_core_name());
      config_print(&cfg, "  ");
      const char *launcher = preempt_launcher_note();
      if (launcher && !print_only) printf("%s\n", launcher);
      fflush(stdout);
    }
    char note[4096];
    if (print_only) {
      status = 0;
    } else if (resume_plan(&cfg, MPI_COMM_WORLD, note, sizeof note, &err) != 0) {
      if (rank == 0) fprintf(stderr, "boost-train: %s\n", err.msg);
      status = 1;
    } else {
      if (rank == 0 && note[0]) printf("resume plan: %s\n", note);
      status = trainer_run(&cfg, MPI_COMM_WORLD);
    }
  }
  free(sets);
  /* Every rank is done (saves, the local level, tear-down) before any enters
   * MPI_Finalize: a rank stopped until here is waited for in this watched
   * agreement or in the watched finalize after it, and the ranks enter
   * MPI_Finalize together. Its synchronization is the job's last: a rank
   * stopped after it (its share given, waiting for the others or tearing
   * down) is seen by no other rank -- they exit 0 -- so the window is kept
   * to that (docs/PARALLELISM.md, "The collective watchdog"). */
  watchdog_phase("the end: every rank done", WATCH_WAIT);
  ckpt_test_stop_in("end-agreement", rank);
  if (provided >= MPI_THREAD_MULTIPLE) comm_control_all(MPI_COMM_WORLD, COMM_WORLD, "end agreement", 1);
  watchdog_mpi_close(); /* MPI_Finalize waits for every rank: watched to the end */
  ckpt_test_stop_in("finalize", rank);
  MPI_Finalize();
  ckpt_test_stop_in("finalized", rank); /* past the job's last synchronization: what boost-chaos cannot count */
  watchdog_stop();
  return status;
}
