#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

static volatile sig_atomic_t g_armed;
static char g_tmp[4200];

static void on_stop_signal(int sig) {
  if (g_armed) unlink(g_tmp);
  _exit(128 + sig);
}

void tool_tmp_arm(const char *tmp) {
  g_armed = 0;
  snprintf(g_tmp, sizeof g_tmp, "%s", tmp);
  g_armed = 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (const int *sig = (const int[]){SIGINT, SIGTERM, SIGHUP, 0}; *sig; sig++) sigaction(*sig, &sa, NULL);
}

void tool_tmp_disarm(void) { g_armed = 0; }

void tool_tmp_remove(void) {
  if (g_armed) unlink(g_tmp);
  g_armed = 0;
}
