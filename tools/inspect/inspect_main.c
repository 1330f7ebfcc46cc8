/* boost-inspect: examine, verify and compare checkpoints offline (no MPI job).
 *
 *   boost-inspect SUBCOMMAND [--json] ARGS...   (boost-inspect --help)
 *
 * Exit status: 0 ok, 1 a checkpoint problem (missing, unreadable, not a
 * checkpoint, unknown version, damaged), 2 usage. docs/INSPECT.md. The old
 * flag forms (--verify, --list, --dump..., plain PATH) are still accepted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inspect.h"
#include "log.h"
#include "tool.h" /* tool_remote_args */

static const char *const HELP =
    "usage: boost-inspect SUBCOMMAND [--json] ARGS...\n"
    "\n"
    "  summary PATH              training state: step, tokens, layout, config, loss history,\n"
    "                            software and format version; of a folder, also its\n"
    "                            set-aside branches (*.h5.superseded.N)\n"
    "  tensors PATH              every tensor: shape, dtype, stored size, ratio, checksum\n"
    "  stats PATH [--tensor N]   min/max/mean/std/norm, NaN/Inf counts per tensor\n"
    "  spectrum PATH             singular values and effective rank of each low-rank B·A\n"
    "  diff A B                  per-tensor max abs / max relative difference\n"
    "  verify PATH               checksums, every chunk decoded, tensors vs the stored config,\n"
    "                            attributes, activations; exit 1 naming each problem\n"
    "  plot PATH -o FILE.png     loss (and validation loss) curve with gnuplot\n"
    "  list DIR                  the checkpoints of a directory, newest first\n"
    "  dump DATASET OUT PATH | dump --category CAT OUT PATH | dump --all DIR PATH\n"
    "                            raw little-endian values\n"
    "\n"
    "PATH: a checkpoint file or a checkpoint directory (its `latest`, else the newest).\n"
    "--json on every subcommand; SUBCOMMAND --help for details.\n"
    "Exit status: 0 ok, 1 checkpoint problem, 2 usage.\n";

typedef struct {
  const char *name;
  int (*fn)(int, char **);
} subcommand;

static const subcommand CMDS[] = {
    {"summary", cmd_summary}, {"tensors", cmd_tensors}, {"stats", cmd_stats}, {"spectrum", cmd_spectrum},
    {"diff", cmd_diff},       {"verify", cmd_verify},   {"plot", cmd_plot},   {"list", cmd_list},
    {"dump", cmd_dump},
};

/* The pre-subcommand forms: [--json] [--verify] [--no-tensors] PATH,
 * --list DIR, --dump DATASET OUT PATH, --dump-category CAT OUT PATH,
 * --dump-all DIR PATH. */
static int legacy(int argc, char **argv) {
  int json = 0, verify = 0, tensors = 1;
  char *args[8];
  int na = 0;
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "--list") && i + 1 < argc) {
      char *a[] = {argv[i + 1], json ? "--json" : NULL};
      return cmd_list(json ? 2 : 1, a);
    }
    if ((!strcmp(s, "--dump") && i + 3 < argc) || (!strcmp(s, "--dump-category") && i + 3 < argc)) {
      char *a[] = {!strcmp(s, "--dump") ? argv[i + 1] : "--category", !strcmp(s, "--dump") ? argv[i + 2] : argv[i + 1],
                   !strcmp(s, "--dump") ? argv[i + 3] : argv[i + 2], !strcmp(s, "--dump") ? NULL : argv[i + 3]};
      return cmd_dump(!strcmp(s, "--dump") ? 3 : 4, a);
    }
    if (!strcmp(s, "--dump-all") && i + 2 < argc) {
      char *a[] = {"--all", argv[i + 1], argv[i + 2]};
      return cmd_dump(3, a);
    }
    if (!strcmp(s, "--json")) json = 1;
    else if (!strcmp(s, "--verify")) verify = 1;
    else if (!strcmp(s, "--no-tensors")) tensors = 0;
    else if (s[0] == '-' || na == 1) {
      fprintf(stderr, "boost-inspect: unexpected argument '%s' (see --help)\n", s);
      return 2;
    } else args[na++] = argv[i];
  }
  if (na != 1) {
    fputs(HELP, stderr);
    return 2;
  }
  if (verify) {
    char *a[] = {args[0], "--json"};
    return cmd_verify(json ? 2 : 1, a);
  }
  char *a[] = {args[0], "--json", "--tensors"};
  if (json) return cmd_summary(tensors ? 3 : 2, a);
  int rc = cmd_summary(1, a);
  return rc == 0 && tensors ? cmd_tensors(1, a) : rc;
}

/* Runs fn in a child process: the HDF5 library itself can crash on some
 * malformed files (e.g. 1.10.8 frees an uninitialised pointer in
 * H5G__link_release_table while iterating a damaged dense link table; see
 * docs/INSPECT.md), and a damaged file must end as "exit 1, one line", never
 * as a crash. BOOST_INSPECT_NO_FORK=1 runs in process (debugging). */
static int run_isolated(int (*fn)(int, char **), int argc, char **argv, const char *what) {
  const char *nf = getenv("BOOST_INSPECT_NO_FORK");
  if (nf && nf[0] == '1') return fn(argc, argv);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return fn(argc, argv);
  if (pid == 0) {
    int rc = fn(argc, argv);
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
      /* SIGPIPE ignored: the reader went away (EPIPE), quietly as below. */
      if (errno == EPIPE) _exit(128 + SIGPIPE);
      fprintf(stderr, "boost-inspect: cannot write standard output: %s\n", errno ? strerror(errno) : "write error");
      rc = 1;
    }
    fflush(stderr);
    _exit(rc);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return 1;
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WTERMSIG(st) == SIGPIPE) {
    /* The reader of stdout went away (`| head -1`): not damage. End as any
     * filter does, by SIGPIPE, silently (the shell's status 141). */
    signal(SIGPIPE, SIG_DFL);
    raise(SIGPIPE);
    return 128 + SIGPIPE;
  }
  fprintf(stderr, "boost-inspect: %s: the HDF5 library crashed reading the file (signal %d): it is damaged\n",
          argc > 0 ? argv[argc - 1] : what, WTERMSIG(st));
  return 1;
}

int main(int argc, char **argv) {
  boost_log_program("boost-inspect"); /* first: every warning of the process carries this name */
  if (tool_remote_args("boost-inspect", argc, argv)) return 1; /* s3:// checkpoints */
  if (argc < 2) {
    fputs(HELP, stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    fputs(HELP, stdout);
    return 0;
  }
  for (size_t i = 0; i < sizeof CMDS / sizeof CMDS[0]; i++)
    if (!strcmp(argv[1], CMDS[i].name)) {
      int rc = run_isolated(CMDS[i].fn, argc - 2, argv + 2, argv[1]);
      fflush(stdout);
      return rc;
    }
  if (argv[1][0] == '-' || access(argv[1], F_OK) == 0) return run_isolated(legacy, argc, argv, "checkpoint");
  fprintf(stderr, "boost-inspect: unknown subcommand '%s' (see --help)\n", argv[1]);
  return 2;
}
