#include "job_abort.h"
#include "preempt.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"

static const int stop_signals[] = {SIGTERM, SIGUSR1, SIGINT, SIGHUP};
#define NSTOP ((int)(sizeof stop_signals / sizeof stop_signals[0]))

static volatile sig_atomic_t received;      /* the first stop signal */
static volatile sig_atomic_t committed = 1; /* the forced exit's status: 75 if set, else 74 */
static struct timespec first_at;            /* when the first one came (written before `received`) */

/* Async-signal-safe: write(2) and job_exit_now (_exit) only. */
static void force_exit(int sig) {
  const int status = committed ? BOOST_EXIT_PREEMPTED : BOOST_EXIT_UNSAVED;
  char num[4] = {(char)('0' + sig / 10 % 10), (char)('0' + sig % 10), 0, 0};
  const char *n = sig >= 10 ? num : num + 1;
  const char *a = "boost-train: signal ", *b = sig == SIGUSR2 ? ": exiting now with status " : " again: exiting now with status ";
  const char *c = committed ? "75 (nothing to save since the newest committed state)\n"
                            : "74 (the final state is not committed; a checkpoint in flight is abandoned)\n";
  (void)!write(STDERR_FILENO, a, strlen(a));
  (void)!write(STDERR_FILENO, n, strlen(n));
  (void)!write(STDERR_FILENO, b, strlen(b));
  (void)!write(STDERR_FILENO, c, strlen(c));
  job_exit_now(status);
}

static void on_stop(int sig) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (!received) {
    first_at = now;
    received = sig;
    return;
  }
  /* Only a person presses Ctrl-C twice; batch systems repeat SIGTERM right
   * before their SIGKILL, and the seconds left may still finish the save. */
  if (sig != SIGINT) return;
  const double since = (double)(now.tv_sec - first_at.tv_sec) + 1e-9 * (double)(now.tv_nsec - first_at.tv_nsec);
  if (since >= PREEMPT_REPEAT_S) force_exit(sig);
}

static void on_force(int sig) { force_exit(sig); }

static void stop_set(sigset_t *set) {
  sigemptyset(set);
  for (int i = 0; i < NSTOP; i++) sigaddset(set, stop_signals[i]);
  sigaddset(set, SIGUSR2);
}

void preempt_install_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  stop_set(&sa.sa_mask); /* one handler at a time */
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < NSTOP; i++) {
    const int sig = stop_signals[i];
    struct sigaction old;
    sigaction(sig, NULL, &old);
    if ((sig == SIGINT || sig == SIGHUP) && old.sa_handler == SIG_IGN) continue;
    sa.sa_handler = on_stop;
    sigaction(sig, &sa, NULL);
  }
  sa.sa_handler = on_force;
  sigaction(SIGUSR2, &sa, NULL);
}

void preempt_block(int block) {
  sigset_t set;
  stop_set(&set);
  pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

void preempt_set_committed(int c) { committed = c != 0; }

int preempt_signal(void) { return (int)received; }

int preempt_agreed(MPI_Comm comm) {
  int any = (int)received;
  comm_control(comm, COMM_WORLD, "stop-signal agreement", &any, 1, MPI_INT, MPI_MAX);
  return any;
}

const char *preempt_launcher_note(void) {
  const char *wrapped = getenv("BOOST_MPIRUN_WRAPPER");
  if (!getenv("OMPI_MCA_orte_hnp_uri") || (wrapped && *wrapped)) return NULL; /* not Open MPI's mpirun, or wrapped */
  return "launcher: plain Open MPI mpirun: SIGTERM or Ctrl-C to mpirun kills the ranks about 1 s after forwarding "
         "it and mpirun exits 1, so a final checkpoint that takes longer is lost; for preemptible runs launch with "
         "tools/mpirun/boost-mpirun, or signal the ranks themselves (as srun does)";
}
