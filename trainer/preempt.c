#include "preempt.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t received;

static void on_signal(int sig) { received = sig; }

void preempt_install_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
}

int preempt_signal(void) { return (int)received; }

int preempt_agreed(MPI_Comm comm) {
  int mine = (int)received, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm);
  return any;
}
