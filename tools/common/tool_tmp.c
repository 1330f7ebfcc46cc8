#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job_abort.h"
#include "tool.h"

#include "comm.h"
#include "util.h"

static volatile sig_atomic_t g_armed;
static char g_tmp[4200];

static void on_stop_signal(int sig) {
  if (g_armed) unlink(g_tmp);
  job_exit_now(128 + sig);
}

void tool_tmp_arm(const char *tmp) {
  g_armed = 0;
  snprintf(g_tmp, sizeof g_tmp, "%s", tmp);
  g_armed = 1;
  tool_on_stop_signals(on_stop_signal);
}

void tool_on_stop_signals(void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (const int *sig = (const int[]){SIGINT, SIGTERM, SIGHUP, 0}; *sig; sig++) sigaction(*sig, &sa, NULL);
}

int tool_under_mpirun(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") || getenv("MPI_LOCALNRANKS");
}

void tool_tmp_disarm(void) { g_armed = 0; }

void tool_tmp_remove(void) {
  if (g_armed) unlink(g_tmp);
  g_armed = 0;
}

int tool_mpi_start(int *argc, char ***argv, int *rank, int *nranks) {
  *rank = 0, *nranks = 1;
  if (!tool_under_mpirun()) return 0;
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, nranks);
  return 1;
}

int tool_agree(int nranks, int ok, boost_status *err) {
  if (nranks <= 1) return ok;
  char msg[1024];
  boost_msgf(msg, sizeof msg, "%s", ok || !err ? "" : err->msg);
  if (comm_control_first_failure(MPI_COMM_WORLD, COMM_WORLD, "tool agreement", ok, msg, (int)sizeof msg) < 0) return 1;
  boost_err(err, "%s", msg);
  return 0;
}

int tool_threads_per_rank(int nranks) {
  int local = 1;
  if (nranks > 1) { /* the ranks sharing this node's cores */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
  }
  const int t = omp_get_max_threads() / local;
  return t > 0 ? t : 1;
}
