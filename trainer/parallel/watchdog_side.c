/* The watchdog's side channel: a communicator of its own on which each
 * rank's watchdog answers the others' question "where are you?" and asks it
 * when its own rank has waited too long, to name the ranks that have not
 * arrived. See watchdog.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "watchdog_internal.h"

static void answer(int to) {
  wd_snap s;
  wd_answer a;
  memset(&a, 0, sizeof a);
  if (wd_snapshot(&s) == 0) {
    const double now = boost_now_s();
    a.step = s.step;
    memcpy(a.coll, s.coll, sizeof a.coll);
    a.active = s.active;
    a.group = s.group;
    a.waited = now - (s.active ? s.since : s.phase_since);
    char d[96];
    wd_describe(&s, !s.active, d, sizeof d);
    boost_msgf(a.what, sizeof a.what, "%s %.0f s %s", s.active ? "waiting" : "busy", a.waited, d);
  } else {
    a.step = -1;
    boost_msgf(a.what, sizeof a.what, "busy");
  }
  MPI_Send(&a, (int)sizeof a, MPI_BYTE, to, TAG_ANSWER, wdog.chan.comm); /* small: sent eagerly */
}

/* Answers the queries that came in (watchdog thread, channel up). */
void wd_serve(void) {
  for (;;) {
    if (!wdog.chan.query_posted) {
      MPI_Irecv(&wdog.chan.query_buf, 1, MPI_INT32_T, MPI_ANY_SOURCE, TAG_QUERY, wdog.chan.comm, &wdog.chan.query);
      wdog.chan.query_posted = 1;
    }
    int flag = 0;
    MPI_Status st;
    MPI_Test(&wdog.chan.query, &flag, &st);
    if (!flag) return;
    wdog.chan.query_posted = 0;
    answer(st.MPI_SOURCE);
  }
}

void wd_close_channel(void) {
  if (wdog.chan.query_posted) {
    MPI_Cancel(&wdog.chan.query);
    MPI_Wait(&wdog.chan.query, MPI_STATUS_IGNORE);
    wdog.chan.query_posted = 0;
  }
  atomic_store(&wdog.chan.up, 0);
  wdog.closed = 1;
  pthread_cond_broadcast(&wdog.cv);
}

/* World ranks of the ranks a wait waits for: the other members of its
 * communicator, the peer of a point-to-point wait, everyone for a phase.
 * Returns how many (malloc'd in *out). */
static int targets(const wd_snap *s, int in_phase, int **out) {
  int n = 0;
  int *t = boost_calloc((size_t)wdog.chan.size, sizeof *t);
  if (in_phase || !s->kind) {
    for (int r = 0; r < wdog.chan.size; r++)
      if (r != wdog.rank) t[n++] = r;
    *out = t;
    return n;
  }
  MPI_Group g, w;
  MPI_Comm_group(s->comm, &g);
  MPI_Comm_group(wdog.chan.comm, &w);
  int gsize, grank;
  MPI_Group_size(g, &gsize);
  MPI_Group_rank(g, &grank);
  int *in = boost_calloc((size_t)gsize, sizeof *in), m = 0;
  for (int r = 0; r < gsize; r++)
    if (s->peer >= 0 ? r == s->peer : r != grank) in[m++] = r;
  MPI_Group_translate_ranks(g, m, in, w, t);
  for (int i = 0; i < m; i++)
    if (t[i] != MPI_UNDEFINED) t[n++] = t[i];
  boost_free(in);
  MPI_Group_free(&g);
  MPI_Group_free(&w);
  *out = t;
  return n;
}

/* Asks every target where it is; got[i] = 1 for those that answered within
 * ANSWER_S (answering the others' questions meanwhile). */
static void ask(const int *t, int n, wd_answer *ans, int *got) {
  MPI_Request *rq = boost_calloc((size_t)n * 2, sizeof *rq);
  static int32_t q; /* the query's content does not matter */
  for (int i = 0; i < n; i++) {
    MPI_Irecv(&ans[i], (int)sizeof ans[i], MPI_BYTE, t[i], TAG_ANSWER, wdog.chan.comm, &rq[i]);
    MPI_Isend(&q, 1, MPI_INT32_T, t[i], TAG_QUERY, wdog.chan.comm, &rq[n + i]);
  }
  const double until = boost_now_s() + ANSWER_S;
  int left = n;
  while (left > 0 && boost_now_s() < until) {
    wd_serve();
    left = 0;
    for (int i = 0; i < n; i++) {
      if (!got[i]) MPI_Test(&rq[i], &got[i], MPI_STATUS_IGNORE);
      left += !got[i];
    }
    if (left) nanosleep(&(struct timespec){0, 10000000L}, NULL);
  }
  boost_free(rq); /* the job ends: requests left in flight are abandoned */
}

static void add_rank(char *out, size_t len, int *named, int *more, int rank, const char *what) {
  if (*named >= NAMED_MAX) {
    (*more)++;
    return;
  }
  const size_t used = strlen(out);
  boost_msgf(out + used, len - used, "%srank %d (%s)", *named ? ", " : "", rank, what);
  (*named)++;
}

/* "rank 1 (no answer in 2 s: ...)", "rank 3 (step 4, busy in training)",
 * "none (every rank answers ...)" or "unknown (...)". */
void wd_not_arrived(const wd_snap *s, int in_phase, char *out, size_t len) {
  if (!atomic_load(&wdog.chan.up)) {
    if (wdog.chan.size == 1)
      boost_msgf(out, len, "none (a world of one rank)");
    else if (!wdog.watching)
      boost_msgf(out, len, "unknown (the watchdog is not running, parallel.timeout=0: the ranks cannot be asked)");
    else
      boost_msgf(out, len, "unknown (the ranks cannot be asked before MPI is up or while it finalizes)");
    return;
  }
  int *t, named = 0, more = 0;
  const int n = targets(s, in_phase, &t);
  wd_answer *ans = boost_calloc((size_t)n, sizeof *ans);
  int *got = boost_calloc((size_t)n, sizeof *got);
  ask(t, n, ans, got);
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    char what[160];
    if (!got[i]) {
      boost_msgf(what, sizeof what, "no answer in %.0f s: stopped, dead, or stuck in MPI", ANSWER_S);
      add_rank(out, len, &named, &more, t[i], what);
      continue;
    }
    const int behind = !in_phase && s->kind && (s->peer >= 0 || ans[i].coll[s->group] < s->coll[s->group]);
    if (behind) {
      ans[i].what[sizeof ans[i].what - 1] = '\0';
      boost_msgf(what, sizeof what, "answers: %s", ans[i].what);
      add_rank(out, len, &named, &more, t[i], what);
    }
  }
  const size_t used = strlen(out);
  if (more) boost_msgf(out + used, len - used, " and %d more", more);
  if (!named) boost_msgf(out, len, "none known (all %d ranks asked answer%s)", n, in_phase ? "" : " and have arrived");
  boost_free(t);
  boost_free(ans);
  boost_free(got);
}

