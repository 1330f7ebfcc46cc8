#include "ckpt_local_partner.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "check.h"
#include "ckpt_private.h"
#include "ckpt_test_hooks.h"
#include "util.h"

#define PARTNER_TAG 0x6c63

size_t ckpt_local_piece_bytes(void) {
  const int64_t n = ckpt_env_int("BOOST_CKPT_TEST_LOCAL_PIECE", 0);
  return n > 0 && n < (8 << 20) ? (size_t)n : (size_t)(8u << 20);
}

void ckpt_partner_plan(MPI_Comm world, const ckpt_node *node, const char *root, ckpt_partner *p, char *note,
                       size_t notelen) {
  memset(p, 0, sizeof *p);
  p->holder = p->held = -1;
  if (note && notelen) note[0] = 0;
  int rank, size;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  int mine[2] = {node->node_id, node->rank};
  int *all = boost_calloc((size_t)size * 2, sizeof *all);
  MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, world);
  /* the nodes, in the order of their lowest rank (= node_id) */
  int nodes = 0, my_node = -1, equal = 1;
  int *ids = boost_calloc((size_t)size, sizeof *ids), *count = boost_calloc((size_t)size, sizeof *count);
  for (int r = 0; r < size; r++) {
    if (all[2 * r] != r) continue; /* node ids are lowest ranks: one per node, in rank order */
    ids[nodes++] = r;
  }
  for (int r = 0; r < size; r++)
    for (int j = 0; j < nodes; j++)
      if (all[2 * r] == ids[j]) count[j]++;
  for (int j = 0; j < nodes; j++) {
    if (ids[j] == node->node_id) my_node = j;
    if (count[j] != count[0]) equal = 0;
  }
  if (nodes < 2) boost_msgf(note, notelen, "no partner copies: all %d ranks are on one node", size);
  else if (!equal) boost_msgf(note, notelen, "no partner copies: the %d nodes hold different numbers of ranks", nodes);
  else {
    const int next = ids[(my_node + 1) % nodes], prev = ids[(my_node + nodes - 1) % nodes];
    for (int r = 0; r < size; r++) {
      if (all[2 * r + 1] != node->rank) continue;
      if (all[2 * r] == next) p->holder = r;
      if (all[2 * r] == prev) p->held = r;
    }
    p->on = p->holder >= 0 && p->held >= 0;
    boost_msgf(p->held_dir, sizeof p->held_dir, "%s/partner_%05d", root, p->held);
  }
  free(ids);
  free(count);
  free(all);
}

/* What the receiving side does with each chunk of part k. */
typedef struct {
  const ckpt_partner_sink *sink;
  ckpt_private_file file; /* a directory sink's part being written */
  int fd;
  XXH3_state_t *h;
  int ok;
} receiver;

static void take_chunk(receiver *rc, int k, uint64_t at, const void *buf, size_t n) {
  if (!rc->ok || !n) return;
  XXH3_64bits_update(rc->h, buf, n);
  const ckpt_partner_sink *s = rc->sink;
  if (s->dir) {
    rc->ok = ckpt_local_write_all(rc->fd, buf, n) == 0;
  } else if (k < LOCAL_STATE) {
    boost_backend *be = s->store->be;
    be->mem->upload(be, (char *)s->arena[k] + at, buf, n);
  } else {
    memcpy(*s->blob + at, buf, n);
  }
}

/* Opens where part k of rm goes; 0 or -1 with why. */
static int open_part(receiver *rc, int k, const ckpt_local_manifest *rm, int from, boost_status *why) {
  const ckpt_partner_sink *s = rc->sink;
  rc->fd = -1;
  XXH3_64bits_reset(rc->h);
  if (s->dir) {
    char path[PATH_MAX];
    boost_msgf(path, sizeof path, "%s/%s.bin", s->dir, ckpt_local_part_names[k]);
    if (ckpt_private_create(&rc->file, path, why) != 0) return -1;
    rc->fd = rc->file.fd;
  } else if (k < LOCAL_STATE) {
    if (rm->bytes[k] != s->want_bytes[k])
      return boost_err(why, "the copy rank %d holds has %llu bytes of %s, this layout %llu", from,
                       (unsigned long long)rm->bytes[k], ckpt_local_part_names[k],
                       (unsigned long long)s->want_bytes[k]);
  } else {
    *s->blob = malloc(rm->bytes[k] ? (size_t)rm->bytes[k] : 1);
    if (!*s->blob) boost_fail("out of memory for a local checkpoint's state part");
    *s->bloblen = (size_t)rm->bytes[k];
  }
  return 0;
}

static int close_part(receiver *rc, int k, const ckpt_local_manifest *rm, int from, boost_status *why) {
  const int sum_ok = XXH3_64bits_digest(rc->h) == rm->sum[k];
  int ok = rc->ok;
  if (rc->fd >= 0) { /* kept (renamed into place) only when whole and matching */
    boost_status e = {0};
    const int kept = ckpt_private_finish(&rc->file, ok && sum_ok, &e) == 0;
    if (sum_ok) ok = ok && kept;
    rc->fd = -1;
  }
  if (ok && !sum_ok)
    return boost_err(why, "the %s part rank %d sent does not match its checksum", ckpt_local_part_names[k],
                     from);
  return ok ? 0 : boost_err(why, "the %s part from rank %d could not be kept", ckpt_local_part_names[k], from);
}

int ckpt_partner_exchange(MPI_Comm comm, const char *send_dir, int to, const ckpt_partner_sink *sink, int from,
                          boost_status *why) {
  ckpt_local_manifest sm, rm;
  memset(&sm, 0, sizeof sm);
  memset(&rm, 0, sizeof rm);
  int ok = 1;
  boost_status swhy = {0};
  if (send_dir && ckpt_local_read_manifest(send_dir, &sm, &swhy) != 0) {
    ok = 0;
    memset(&sm, 0, sizeof sm); /* nothing follows: the receiver sees no manifest */
  }
  MPI_Sendrecv(&sm, (int)sizeof sm, MPI_BYTE, to, PARTNER_TAG, &rm, (int)sizeof rm, MPI_BYTE, from, PARTNER_TAG, comm,
               MPI_STATUS_IGNORE);
  receiver rc = {.sink = sink, .fd = -1, .h = XXH3_createState(), .ok = 1};
  if (!rc.h) boost_fail("out of memory for a checksum state");
  boost_status rwhy = {0};
  int rok = from == MPI_PROC_NULL || ckpt_local_manifest_ok(&rm);
  if (!rok) boost_err(&rwhy, "rank %d has no whole copy to send", from);
  if (rok && sink && from != MPI_PROC_NULL) { /* checked as an own copy is, before a byte is kept */
    char what[64];
    boost_msgf(what, sizeof what, "the copy rank %d sent", from);
    rok = ckpt_local_manifest_fits(&rm, what, sink->want_step, sink->want_shape, sink->run_id, &rwhy) == 0;
  }
  if (!sink) rok = 0; /* received and dropped */
  const size_t piece = ckpt_local_piece_bytes();
  char *sbuf = malloc(piece), *rbuf = malloc(piece);
  if (!sbuf || !rbuf) boost_fail("out of memory for the partner copy's buffers");
  for (int k = 0; k < LOCAL_NPARTS; k++) {
    /* a sender without a manifest sends a zeroed one and no bytes */
    const uint64_t S = to != MPI_PROC_NULL ? sm.bytes[k] : 0, R = from != MPI_PROC_NULL ? rm.bytes[k] : 0;
    int fd = -1;
    if (S) {
      char path[PATH_MAX];
      boost_msgf(path, sizeof path, "%s/%s.bin", send_dir, ckpt_local_part_names[k]);
      boost_status e = {0};
      fd = ckpt_private_read_open(path, &e);
      if (fd < 0 && ok) ok = 0, boost_err(&swhy, "%s", e.msg);
    }
    rc.ok = rok;
    if (rok && open_part(&rc, k, &rm, from, &rwhy) != 0) rok = rc.ok = 0;
    for (uint64_t s_at = 0, r_at = 0; s_at < S || r_at < R;) {
      const size_t ns = S - s_at < piece ? (size_t)(S - s_at) : piece;
      const size_t nr = R - r_at < piece ? (size_t)(R - r_at) : piece;
      if (ns) { /* a short read sends what was read and zeros: the receiver's checksum fails */
        ssize_t got = fd >= 0 ? pread(fd, sbuf, ns, (off_t)s_at) : -1;
        if (got != (ssize_t)ns) {
          if (ok) ok = 0, boost_err(&swhy, "%s part: short read", ckpt_local_part_names[k]);
          memset(sbuf, 0, ns);
        }
      }
      MPI_Sendrecv(sbuf, (int)ns, MPI_BYTE, ns ? to : MPI_PROC_NULL, PARTNER_TAG, rbuf, (int)nr, MPI_BYTE,
                   nr ? from : MPI_PROC_NULL, PARTNER_TAG, comm, MPI_STATUS_IGNORE);
      take_chunk(&rc, k, r_at, rbuf, nr);
      s_at += ns, r_at += nr;
    }
    if (fd >= 0) close(fd);
    if (rok && close_part(&rc, k, &rm, from, &rwhy) != 0) rok = 0;
    else if (rc.fd >= 0) ckpt_private_finish(&rc.file, 0, &(boost_status){0}), rc.fd = -1; /* the temporary removed */
  }
  free(sbuf);
  free(rbuf);
  XXH3_freeState(rc.h);
  if (rok && sink && sink->dir) {
    boost_status e = {0};
    if (ckpt_local_write_manifest(sink->dir, &rm, &e) != 0) rok = 0, boost_err(&rwhy, "%s", e.msg);
  }
  if (!rok && sink && !sink->dir && *sink->blob) {
    free(*sink->blob);
    *sink->blob = NULL;
  }
  if (!ok) return boost_err(why, "sending to rank %d: %s", to, swhy.msg);
  if (!rok && sink) return boost_err(why, "%s", rwhy.msg);
  return 0;
}
