/* boost-reshard's command line: the usage text, --layout and the option
 * checks (every refusal here is a usage error, exit 2). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reshard.h"
#include "util.h"

int reshard_usage(FILE *f, int status) {
  fprintf(f,
          "usage: boost-reshard IN OUT --layout dp=D,tp=T,pp=P[,mode=M] [--no-optimizer] [--bf16] [--quiet]\n"
          "       boost-reshard IN OUT --rank R|attn=R,mlp=R [--layout ...] [--quiet]\n"
          "       boost-reshard IN --plan --layout dp=D,tp=T,pp=P[,mode=M] [--json]\n"
          "\n"
          "Rewrites checkpoint IN (a file, or a checkpoint directory: its `latest`) as OUT with\n"
          "chunks aligned to the target layout's tensor-parallel shards; values and checksums are\n"
          "unchanged and verified before OUT is renamed into place.\n"
          "  --layout SPEC     target layout: dp, tp, pp and optionally the tp mode\n"
          "                    (btp, vanilla, megatron; default: what auto picks for the model)\n"
          "  --no-optimizer    leave out the AdamW moments (export; training cannot resume from OUT)\n"
          "  --bf16            weights as bfloat16, half the size (export; implies --no-optimizer);\n"
          "                    HDF5 and h5py read them back as float32\n"
          "  --rank R          change the bottleneck rank of every low-rank projection to R, or per kind:\n"
          "                    attn=R (q, k, v, o), mlp=R (gate, up, down), e.g. attn=96,mlp=160.\n"
          "                    Growing is exact (new channels: B columns zero, A rows drawn as a run of\n"
          "                    that rank initialises them; their moments zero); shrinking keeps the\n"
          "                    channels with the largest |B[:,i]|*|A[i,:]| and prints the loss change on\n"
          "                    the stored batch. Without --layout: IN's layout. Runs on one process\n"
          "  --plan            print what each target rank reads of IN and the read amplification\n"
          "  --json            with --plan: one JSON document\n"
          "  --quiet           no progress bar\n"
          "Under mpirun -n N the rewrite runs on N ranks (each reads, compresses and writes a\n"
          "band of every tensor through MPI-IO); OUT must be on a file system every rank sees.\n"
          "Exit status: 0 ok, 1 bad input or checkpoint, 2 usage.\n");
  return status;
}

/* The most ranks one dimension of a layout may have: far above any
 * machine, far below where dp*tp*pp could overflow an int. */
#define MAX_LAYOUT_DIM 65536

static int parse_layout(const char *spec, options *o, boost_status *err) {
  char buf[256];
  if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf) return boost_err(err, "--layout '%.40s...' is too long", spec);
  o->dp = o->tp = o->pp = 1;
  o->mode = TP_AUTO;
  if (!buf[0]) return boost_err(err, "--layout is empty: expected dp=N,tp=N,pp=N[,mode=M]");
  int seen[4] = {0, 0, 0, 0}; /* dp tp pp mode */
  char *p = buf;
  for (;;) {
    char *comma = strchr(p, ',');
    if (comma) *comma = '\0';
    char *eq = strchr(p, '=');
    if (!*p || !eq) return boost_err(err, "bad --layout item '%s' in '%s': expected dp=N, tp=N, pp=N or mode=M", p, spec);
    *eq = '\0';
    const char *key = p, *val = eq + 1;
    static const char *const keys[] = {"dp", "tp", "pp", "mode"};
    int k = 0;
    while (k < 4 && strcmp(key, keys[k])) k++;
    if (k == 4) return boost_err(err, "unknown --layout key '%s' in '%s' (dp, tp, pp, mode)", key, spec);
    if (seen[k]++) return boost_err(err, "--layout '%s' gives %s twice", spec, key);
    if (k < 3) {
      char *end;
      errno = 0;
      const long v = strtol(val, &end, 10);
      if (!*val || *end || errno || v < 1 || v > MAX_LAYOUT_DIM)
        return boost_err(err, "--layout %s=%s: expected a whole number from 1 to %d", key, val, MAX_LAYOUT_DIM);
      *(k == 0 ? &o->dp : k == 1 ? &o->tp : &o->pp) = (int)v;
    } else if (!strcmp(val, "btp")) o->mode = TP_BTP;
    else if (!strcmp(val, "vanilla")) o->mode = TP_VANILLA;
    else if (!strcmp(val, "megatron")) o->mode = TP_MEGATRON;
    else return boost_err(err, "--layout mode=%s: expected btp, vanilla or megatron", val);
    if (!comma) break;
    p = comma + 1;
  }
  if ((long)o->dp * o->tp * o->pp > MAX_LAYOUT_DIM)
    return boost_err(err, "--layout '%s': dp*tp*pp = %ld ranks, more than %d", spec, (long)o->dp * o->tp * o->pp,
                     MAX_LAYOUT_DIM);
  return 0;
}

/* --rank R (every kind) or attn=R,mlp=R (either or both). */
static int parse_rank(const char *spec, options *o, boost_status *err) {
  char buf[128];
  if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf) return boost_err(err, "--rank '%.40s...' is too long", spec);
  const int whole = strchr(buf, '=') == NULL;
  for (char *p = buf, *comma; p; p = comma ? comma + 1 : NULL) {
    if ((comma = strchr(p, ','))) *comma = '\0';
    char *eq = strchr(p, '=');
    const char *val = eq ? eq + 1 : p;
    if (eq) *eq = '\0';
    int *dst = whole ? NULL : !strcmp(p, "attn") ? &o->rank_attn : !strcmp(p, "mlp") ? &o->rank_mlp : NULL;
    if (!whole && (!eq || !dst)) return boost_err(err, "bad --rank item '%s' in '%s': expected R, or attn=R and/or mlp=R", p, spec);
    if (whole && comma) return boost_err(err, "bad --rank '%s': expected R, or attn=R and/or mlp=R", spec);
    if (dst && *dst) return boost_err(err, "--rank '%s' gives %s twice", spec, p);
    char *end;
    errno = 0;
    const long v = strtol(val, &end, 10);
    if (!*val || *end || errno || v < 1 || v > (1 << 20))
      return boost_err(err, "--rank %s: a rank is a whole number from 1 to %d", val, 1 << 20);
    if (whole) o->rank_attn = o->rank_mlp = (int)v, o->rank_all = 1;
    else *dst = (int)v;
  }
  return 0;
}

int reshard_parse_args(int argc, char **argv, options *o, boost_status *err) {
  memset(o, 0, sizeof *o);
  int have_layout = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--layout")) {
      if (i + 1 >= argc) return boost_err(err, "--layout wants a value: dp=D,tp=T,pp=P[,mode=M]");
      if (have_layout) return boost_err(err, "--layout given twice");
      if (parse_layout(argv[++i], o, err) != 0) return -1;
      have_layout = 1;
    } else if (!strcmp(argv[i], "--rank")) {
      if (i + 1 >= argc) return boost_err(err, "--rank wants a value: R, or attn=R,mlp=R");
      if (o->rank_attn || o->rank_mlp) return boost_err(err, "--rank given twice");
      if (parse_rank(argv[++i], o, err) != 0) return -1;
    } else if (!strcmp(argv[i], "--plan")) o->plan = 1;
    else if (!strcmp(argv[i], "--json")) o->json = 1;
    else if (!strcmp(argv[i], "--quiet")) o->quiet = 1;
    else if (!strcmp(argv[i], "--no-optimizer")) o->no_optim = 1;
    else if (!strcmp(argv[i], "--bf16")) o->bf16 = o->no_optim = 1;
    else if (argv[i][0] == '-') return boost_err(err, "unknown option '%s' (see --help)", argv[i]);
    else if (!o->in) o->in = argv[i];
    else if (!o->out) o->out = argv[i];
    else return boost_err(err, "unexpected argument '%s' (see --help)", argv[i]);
  }
  if (!o->in) return boost_err(err, "no input checkpoint given (see --help)");
  o->have_layout = have_layout;
  if (!have_layout && !o->rank_attn && !o->rank_mlp) return boost_err(err, "--layout dp=D,tp=T,pp=P is required");
  if (!have_layout) o->dp = o->tp = o->pp = 1, o->mode = TP_AUTO; /* replaced by IN's layout */
  if ((o->rank_attn || o->rank_mlp) && (o->plan || o->bf16))
    return boost_err(err, "--rank does not go with %s", o->plan ? "--plan" : "--bf16 (change the rank, then export)");
  if (!o->plan && !o->out) return boost_err(err, "no OUT given (or --plan to only print the read plan)");
  if (o->plan && o->out) return boost_err(err, "--plan writes nothing: drop OUT '%s' or --plan", o->out);
  if (o->json && !o->plan) return boost_err(err, "--json goes with --plan (the rewrite prints one line)");
  return 0;
}
