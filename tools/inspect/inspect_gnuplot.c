/* boost-inspect plot's drawing: gnuplot run on a script in a directory of
 * its own (fork and exec, no shell), its PNG copied out through ins_out,
 * and the temporary directory it ran in. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job_abort.h"
#include "inspect.h"
#include "util.h"

int ins_tmp_dir(char *dir, size_t dirlen, boost_status *err) {
  const char *td = getenv("TMPDIR");
  if (!td || !*td || strlen(td) + 40 > dirlen) td = "/tmp";
  snprintf(dir, dirlen, "%s/boost_inspect_plot.XXXXXX", td);
  if (!mkdtemp(dir)) return boost_err(err, "cannot create a temporary directory in %s: %s", td, strerror(errno));
  return 0;
}

void ins_remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        char f[PATH_MAX + 256];
        snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
        unlink(f);
      }
    closedir(d);
  }
  rmdir(dir);
}

/* The line of gnuplot's output that says what went wrong: its
 * `"plot.gp" line N: ...` message, else the first non-blank line. */
static void first_error_line(const char *log, char *out, size_t outlen) {
  char buf[8192] = "";
  FILE *f = fopen(log, "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  const char *pick = NULL;
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    line += strspn(line, " \t");
    if (!*line || strspn(line, " ^\t\r") == strlen(line)) continue;
    if (!pick) pick = line;
    if (strstr(line, "plot.gp\" line")) {
      pick = line;
      break;
    }
  }
  boost_msgf(out, outlen, "%.300s", pick ? pick : "(no message)");
}

int ins_run_gnuplot(const char *dir, boost_status *err) {
  int pfd[2];
  if (pipe(pfd) != 0) return boost_err(err, "cannot run gnuplot: pipe: %s", strerror(errno));
  fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(pfd[0]), close(pfd[1]);
    return boost_err(err, "cannot run gnuplot: fork: %s", strerror(e));
  }
  if (pid == 0) {
    /* Child: tell the parent through the close-on-exec pipe why exec did not happen. */
    int why[2] = {0, 0}, fd, in;
    close(pfd[0]);
    if (chdir(dir) != 0) why[0] = 1, why[1] = errno;
    else if ((fd = open("gnuplot.log", O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0) why[0] = 2, why[1] = errno;
    else {
      if ((in = open("/dev/null", O_RDONLY)) >= 0) dup2(in, 0), close(in);
      dup2(fd, 1), dup2(fd, 2), close(fd);
      char a0[] = "gnuplot", a1[] = "plot.gp", *args[] = {a0, a1, NULL};
      execvp(a0, args);
      why[0] = 3, why[1] = errno;
    }
    if (write(pfd[1], why, sizeof why) < 0) why[0] = 0;
    job_exit_now(127);
  }
  close(pfd[1]);
  int why[2] = {0, 0}, st = 0;
  ssize_t r;
  while ((r = read(pfd[0], why, sizeof why)) < 0 && errno == EINTR) {}
  close(pfd[0]);
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return boost_err(err, "cannot run gnuplot: waitpid: %s", strerror(errno));
  if (r == (ssize_t)sizeof why && why[0] == 3 && why[1] == ENOENT)
    return boost_err(err, "gnuplot is not installed (not found in PATH; scripts/install-deps.sh installs gnuplot-nox)");
  if (r == (ssize_t)sizeof why)
    return boost_err(err, "cannot run gnuplot: %s: %s", why[0] == 1 ? "chdir" : why[0] == 2 ? "gnuplot.log" : "exec",
                     strerror(why[1]));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char log[PATH_MAX + 16], line[400];
    snprintf(log, sizeof log, "%s/gnuplot.log", dir);
    first_error_line(log, line, sizeof line);
    if (WIFEXITED(st)) return boost_err(err, "gnuplot failed (exit %d): %s", WEXITSTATUS(st), line);
    return boost_err(err, "gnuplot failed (signal %d): %s", WTERMSIG(st), line);
  }
  return 0;
}

int ins_copy_png(const char *dir, const char *outp, const char *const *inputs, int ninputs, boost_status *err) {
  char png[PATH_MAX + 16], log[PATH_MAX + 16], line[400];
  snprintf(png, sizeof png, "%s/plot.png", dir);
  snprintf(log, sizeof log, "%s/gnuplot.log", dir);
  FILE *f = fopen(png, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) != 0 || st.st_size == 0) {
    if (f) fclose(f);
    first_error_line(log, line, sizeof line);
    return boost_err(err, "gnuplot wrote no PNG: %s", line);
  }
  ins_out o;
  if (ins_out_open(&o, outp, inputs, ninputs, err) != 0) return fclose(f), -1;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    if (ins_out_write(&o, buf, n, err) != 0) return fclose(f), -1;
  int rerr = ferror(f);
  fclose(f);
  if (rerr) {
    ins_out_abort(&o);
    return boost_err(err, "cannot read gnuplot's %s", png);
  }
  return ins_out_commit(&o, err);
}
