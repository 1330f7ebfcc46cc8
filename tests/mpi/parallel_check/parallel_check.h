/* parallel_check (tests/mpi/parallel_check/): the driver of the multi-rank
 * correctness tests. main.c parses the command line (usage there), common.c
 * has the layouts, the runs and the verdicts every check shares, equiv.c the
 * layout-equivalence and repeatability checks, comm.c the communication
 * volume checks. */
#ifndef BOOST_TEST_PARALLEL_CHECK_H
#define BOOST_TEST_PARALLEL_CHECK_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "config.h"
#include "status.h"
#include "trainer.h"

#define MAX_SETS 64
#define MAX_SPECS 32

extern double TOL;         /* --tol */
extern int g_rank, g_size; /* in MPI_COMM_WORLD */
extern int n_failed;       /* verdicts that failed so far */

/* ---- options ------------------------------------------------------------- */

typedef struct {
  int dp, tp, pp, accum, zero;
  char mode[16], recompute[16];
} layout;

typedef struct {
  const char *data, *preset;
  int steps, batch;
  char *sets[MAX_SETS];
  int nsets;
  layout layouts[MAX_SPECS];
  int nlayouts;
  layout repeat;
  int has_repeat;
  /* comm */
  char cases[MAX_SPECS][3][64]; /* preset, mode, recompute */
  int ncases;
  int b, s;
  double max_ratio;
} options;

typedef struct {
  train_config cfg; /* the trainer keeps a pointer to it */
  trainer *t;
  float *losses;
  double *gnorms;
  comm_ctx last; /* the counters of the last step */
} run;

/* Rank 0 prints; every rank calls. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Rank 0 prints "parallel_check: <message>"; every rank exits 2. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Collective over world: PASS/FAIL line on rank 0, the worst of every rank's ok. */
void verdict(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void parse_layout(const char *spec, layout *l);
void parse_case(const char *spec, char *preset, char *mode, char *recompute);
void format_layout(const layout *l, char *out, size_t n);
/* Sub-communicator of the first n world ranks (MPI_COMM_NULL elsewhere). */
MPI_Comm first_ranks(int n);

int make_config(const options *o, const char *preset, const layout *l, int batch, int steps, train_config *cfg,
                boost_status *err);
run *train(const options *o, MPI_Comm comm, const layout *l, int batch);
void run_free(run *r);

/* equiv.c */
void check_layout(const options *o, const layout *l);
void check_repeat(const options *o, const layout *l);
void free_references(void);

/* comm.c */
void check_comm(const options *o);

#endif
