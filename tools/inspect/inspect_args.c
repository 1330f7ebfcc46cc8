/* boost-inspect's option parsing, common to its subcommands: --json and
 * --help, the positional arguments, a subcommand's own options. */
#include <stdio.h>
#include <string.h>

#include "inspect.h"

int ins_parse(int argc, char **argv, const char *const *extra, int minpos, int maxpos, const char *help,
              ins_args *a) {
  memset(a, 0, sizeof *a);
  for (int i = 0; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "--json")) { a->json = 1; continue; }
    if (!strcmp(s, "--help") || !strcmp(s, "-h")) { fputs(help, stdout); return 1; }
    int matched = 0;
    for (int k = 0; extra && extra[k] && k < INS_MAX_ARGS; k++) {
      size_t L = strlen(extra[k]);
      int takes = extra[k][L - 1] == '=';
      if (strncmp(s, extra[k], takes ? L - 1 : L) != 0 || (s[takes ? L - 1 : L] != 0 && !(takes && s[L - 1] == '='))) continue;
      matched = 1;
      a->opt_set[k] = 1;
      if (takes) {
        if (s[L - 1] == '=') a->opt_val[k] = s + L;
        else if (i + 1 < argc) a->opt_val[k] = argv[++i];
        else { fprintf(stderr, "boost-inspect: %.*s needs a value (see --help)\n", (int)(L - 1), extra[k]); return -1; }
      }
      break;
    }
    if (matched) continue;
    if (s[0] == '-' && s[1]) { fprintf(stderr, "boost-inspect: unknown option '%s' (see --help)\n", s); return -1; }
    if (a->npos == maxpos) { fprintf(stderr, "boost-inspect: unexpected argument '%s' (see --help)\n", s); return -1; }
    a->pos[a->npos++] = s;
  }
  if (a->npos < minpos) { fprintf(stderr, "boost-inspect: missing argument (see --help)\n%s", help); return -1; }
  return 0;
}
