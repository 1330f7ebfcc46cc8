/* The local level's restart (ckpt_local.h, ckpt_local_restore): what
 * every rank holds, the newest step all can restore from their own or
 * their partners' copies, and its load into the arenas, checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_local_internal.h"
#include "util.h"

static int listed(const int64_t *list, int64_t s) {
  for (int j = 0; j < LOCAL_LIST_MAX; j++)
    if (list[j] == s) return 1;
  return 0;
}

/* What every rank holds at a restart: its own steps and those it keeps for
 * its partner, each list newest first and -1 padded. */
typedef struct {
  int ranks, partner_on;
  int64_t *own, *held; /* [rank * LOCAL_LIST_MAX + j] */
  int *holder;         /* [rank]: who keeps its copy */
} local_census;

/* The first rank that can restore step s neither from its own copy nor
 * from its holder's, -1 when every rank can. */
static int first_without(const local_census *c, int64_t s) {
  for (int q = 0; q < c->ranks; q++) {
    if (listed(c->own + q * LOCAL_LIST_MAX, s)) continue;
    if (c->partner_on && c->holder[q] >= 0 && listed(c->held + c->holder[q] * LOCAL_LIST_MAX, s)) continue;
    return q;
  }
  return -1;
}

/* The newest step below `below` that every rank can restore (-1: none);
 * *newest_seen: the newest step any rank listed. */
static int64_t newest_restorable(const local_census *c, int64_t below, int64_t *newest_seen) {
  int64_t best = -1;
  *newest_seen = -1;
  for (int i = 0; i < 2 * c->ranks * LOCAL_LIST_MAX; i++) {
    const int64_t s = i < c->ranks * LOCAL_LIST_MAX ? c->own[i] : c->held[i - c->ranks * LOCAL_LIST_MAX];
    if (s > *newest_seen) *newest_seen = s;
    if (s > best && s < below && first_without(c, s) < 0) best = s;
  }
  return best;
}

/* The manifest step s of this rank must have (the run's identity, this
 * rank's layout): what a received state part is checked against. */
static ckpt_local_manifest expected(const ckpt_local *L, int64_t s) {
  ckpt_local_manifest m;
  memset(&m, 0, sizeof m);
  memcpy(m.run_id, L->run_id, sizeof m.run_id);
  m.step = s;
  m.shape = L->shape;
  return m;
}

/* This rank's parts of step s into the arenas, each checked: the manifest
 * against the run and the layout (every size before anything is read),
 * the state part against the manifest. */
static int load_parts(ckpt_local *L, int64_t s, unsigned char **blob, size_t *bloblen, boost_status *why) {
  char dir[PATH_MAX], path[PATH_MAX];
  ckpt_local_step_path(dir, sizeof dir, L->mine, s, 0);
  ckpt_local_manifest man;
  if (ckpt_local_read_manifest(dir, &man, why) != 0 || ckpt_local_manifest_fits(&man, dir, s, &L->shape, L->run_id, why) != 0)
    return -1;
  for (int k = 0; k < LOCAL_STATE; k++) {
    boost_msgf(path, sizeof path, "%s/%s.bin", dir, ckpt_local_part_names[k]);
    if (ckpt_local_read_part(path, L->store->be, part_arena(L, k), man.bytes[k], man.sum[k], L->bounce,
                             LOCAL_BOUNCE_BYTES, why) != 0)
      return -1;
  }
  boost_msgf(path, sizeof path, "%s/%s.bin", dir, ckpt_local_part_names[LOCAL_STATE]);
  *bloblen = (size_t)man.bytes[LOCAL_STATE];
  if (ckpt_local_read_small(path, man.bytes[LOCAL_STATE], man.sum[LOCAL_STATE], blob, why) != 0) return -1;
  boost_status disagree = {0};
  if (ckpt_local_state_agrees(*blob, *bloblen, &man, &disagree) == 0) return 0;
  free(*blob);
  *blob = NULL;
  return boost_err(why, "%s: %s (passed over, left in place)", dir, disagree.msg);
}

/* The state part, n bytes (checked against the bound of step s on every
 * rank), from rank 0 to every rank in pieces: no count above what an int
 * holds, whatever its size. */
static int bcast_state(ckpt_local *L, int64_t s, unsigned char **blob, size_t *len) {
  uint64_t n = *len;
  MPI_Bcast(&n, 1, MPI_UINT64_T, 0, L->team.comm);
  if (n > ckpt_local_state_bound(s)) return -1; /* the same n everywhere: the same verdict */
  if (L->team.rank != 0) {
    free(*blob);
    *blob = malloc(n ? (size_t)n : 1);
    if (!*blob) boost_fail("out of memory for a local checkpoint's state part");
  }
  const size_t piece = ckpt_local_piece_bytes();
  for (uint64_t at = 0; at < n; at += piece) {
    const size_t k = n - at < piece ? (size_t)(n - at) : piece;
    MPI_Bcast(*blob + at, (int)k, MPI_BYTE, 0, L->team.comm);
  }
  *len = (size_t)n;
  return 0;
}

static void zero_arenas(ckpt_local *L) {
  for (int k = 0; k < LOCAL_STATE; k++)
    if (part_bytes(L, k)) L->store->be->mem->zero(L->store->be, part_arena(L, k), (size_t)part_bytes(L, k));
}

/* Step s into the arenas: each rank from its own copy where it has a whole
 * one, the others from their holders' copies (sent over MPI). Returns 1
 * when every rank has it, with *blob (rank 0's state part, on every rank)
 * and *from_partner the ranks served by partners; 0 with why. */
static int restore_step(ckpt_local *L, int64_t s, const int64_t *own, unsigned char **blob, size_t *bloblen,
                        int *from_partner, char *note, size_t notelen, boost_status *why) {
  const int ranks = L->team.size;
  boost_status mine_why = {0};
  int ok1 = 0;
  *blob = NULL;
  if (!listed(own, s)) boost_err(&mine_why, "no copy of step %lld in %s", (long long)s, L->mine);
  else ok1 = load_parts(L, s, blob, bloblen, &mine_why) == 0;
  int *oks = boost_calloc((size_t)ranks, sizeof *oks);
  MPI_Allgather(&ok1, 1, MPI_INT, oks, 1, MPI_INT, L->team.comm);
  *from_partner = 0;
  for (int q = 0; q < ranks; q++) *from_partner += !oks[q];
  if (*from_partner) { /* the lowest rank without its own copy, for the log */
    boost_status first = {0};
    ckpt_agree(&L->team, ok1, mine_why.msg, &first);
    boost_msgf(note, notelen, "%s", first.msg);
  }
  int ok = ok1;
  boost_status xwhy = {0};
  if (*from_partner && L->partner.on) {
    const int send = !oks[L->partner.held], recv = !ok1;
    char sdir[PATH_MAX];
    ckpt_local_step_path(sdir, sizeof sdir, L->partner.held_dir, s, 0);
    ckpt_partner_sink sink = {.want_step = s, .want_shape = &L->shape, .run_id = L->run_id, .store = L->store,
                              .blob = blob, .bloblen = bloblen};
    for (int k = 0; k < LOCAL_STATE; k++) sink.arena[k] = part_arena(L, k), sink.want_bytes[k] = part_bytes(L, k);
    if (recv) free(*blob), *blob = NULL;
    const int rc = ckpt_partner_exchange(L->team.comm, send ? sdir : NULL, send ? L->partner.held : MPI_PROC_NULL,
                                         recv ? &sink : NULL, recv ? L->partner.holder : MPI_PROC_NULL, &xwhy);
    if (recv) ok = rc == 0;
    if (recv && ok) { /* the state part as an own copy's: agreeing with the manifest this rank expects */
      const ckpt_local_manifest want = expected(L, s);
      ok = ckpt_local_state_agrees(*blob, *bloblen, &want, &xwhy) == 0;
    }
  } else if (!ok1) {
    boost_err(&xwhy, "%s, and no partner copies are kept", mine_why.msg);
  }
  free(oks);
  if (!ok && !xwhy.failed) boost_err(&xwhy, "%s", mine_why.msg);
  boost_status out = {0};
  if (ckpt_agree(&L->team, ok, xwhy.msg, &out)) return 1;
  free(*blob);
  *blob = NULL;
  boost_err(why, "%s", out.msg);
  return 0;
}

int ckpt_local_restore(ckpt_local *L, int64_t file_step, ckpt_meta *meta, ckpt_state *state, char *msg,
                       size_t msglen) {
  if (msg && msglen) msg[0] = 0;
  if (!L) return 0;
  const double t0 = boost_now_s();
  const int ranks = L->team.size;
  int64_t own[LOCAL_LIST_MAX], held[LOCAL_LIST_MAX];
  for (int i = 0; i < LOCAL_LIST_MAX; i++) own[i] = held[i] = -1;
  boost_status passed = {0};
  ckpt_local_list(L->mine, L->team.rank, &L->shape, L->run_id, own, LOCAL_LIST_MAX, &passed);
  boost_status held_passed = {0};
  if (L->partner.on)
    ckpt_local_list(L->partner.held_dir, L->partner.held, &L->held_shape, L->run_id, held, LOCAL_LIST_MAX, &held_passed);
  if (!passed.failed && held_passed.failed) boost_status_take(&passed, &held_passed);
  local_census c = {ranks, L->partner.on, boost_calloc((size_t)ranks * LOCAL_LIST_MAX, sizeof(int64_t)),
                    boost_calloc((size_t)ranks * LOCAL_LIST_MAX, sizeof(int64_t)),
                    boost_calloc((size_t)ranks, sizeof(int))};
  MPI_Allgather(own, LOCAL_LIST_MAX, MPI_INT64_T, c.own, LOCAL_LIST_MAX, MPI_INT64_T, L->team.comm);
  MPI_Allgather(held, LOCAL_LIST_MAX, MPI_INT64_T, c.held, LOCAL_LIST_MAX, MPI_INT64_T, L->team.comm);
  MPI_Allgather(&L->partner.holder, 1, MPI_INT, c.holder, 1, MPI_INT, L->team.comm);
  boost_status first_passed = {0}; /* the lowest rank's first step passed over, for the one line */
  const int have_passed = !ckpt_agree(&L->team, !passed.failed, passed.msg, &first_passed);
  char damaged[1024] = "", note[1024] = "";
  int64_t below = INT64_MAX, newest_seen = -1;
  int rc = 0, from_partner = 0;
  for (;;) {
    int64_t seen;
    const int64_t s = newest_restorable(&c, below, &seen);
    if (below == INT64_MAX) newest_seen = seen;
    if (s < 0 || s < file_step) break;
    below = s;
    unsigned char *blob = NULL;
    size_t len = 0;
    boost_status why = {0};
    note[0] = 0;
    if (!restore_step(L, s, own, &blob, &len, &from_partner, note, sizeof note, &why)) {
      if (!damaged[0]) boost_msgf(damaged, sizeof damaged, "local step %lld is damaged: %s", (long long)s, why.msg);
      zero_arenas(L);
      continue;
    }
    /* Every rank resumes with rank 0's metadata block, as from the file. */
    boost_status uerr = {0};
    int uok = bcast_state(L, s, &blob, &len) == 0;
    if (!uok) boost_err(&uerr, "state part is larger than a step-%lld state can hold", (long long)s);
    else uok = ckpt_local_unpack(blob, len, meta, state, &uerr) == 0;
    free(blob);
    if (!uok) { /* the same bytes everywhere: the same verdict */
      if (!damaged[0]) boost_msgf(damaged, sizeof damaged, "local step %lld: rank 0's %s", (long long)s, uerr.msg);
      zero_arenas(L);
      continue;
    }
    store_refresh_work(L->store);
    L->last_step = L->handed = s;
    L->restored_partner = from_partner;
    char partners[1200] = "";
    if (from_partner)
      boost_msgf(partners, sizeof partners, ", %d rank%s from partner copies (%s)", from_partner,
                 from_partner == 1 ? "" : "s", note);
    char passed_note[1200] = ""; /* what was passed over on the way: in the same line */
    if (damaged[0] || have_passed)
      boost_msgf(passed_note, sizeof passed_note, "; passed over: %s", damaged[0] ? damaged : first_passed.msg);
    boost_msgf(msg, msglen, "resumed from the local level: step %lld in %s, %d rank%s' parts verified%s, %.2f s%s",
               (long long)s, L->root, ranks, ranks == 1 ? "" : "s", partners, boost_now_s() - t0, passed_note);
    rc = 1;
    break;
  }
  if (rc == 0 && (newest_seen >= 0 || have_passed)) {
    const int q = newest_seen >= 0 ? first_without(&c, newest_seen) : -1;
    if (damaged[0]) boost_msgf(msg, msglen, "%s; from the file instead", damaged);
    else if (have_passed && newest_seen < 0)
      boost_msgf(msg, msglen, "the local level in %s is %s: from the file (%s)", L->root,
                 strstr(first_passed.msg, "another run's") ? "another run's" : "another layout's", first_passed.msg);
    else if (newest_seen >= file_step && q >= 0)
      boost_msgf(msg, msglen, "local step %lld: rank %d has neither its own copy nor %s: from the file",
                 (long long)newest_seen, q, L->partner.on ? "its partner's" : "a partner's (none are kept)");
    else boost_msgf(msg, msglen, "the local level in %s holds nothing newer than the file: from the file", L->root);
  }
  free(c.own);
  free(c.held);
  free(c.holder);
  return rc;
}

