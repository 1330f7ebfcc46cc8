#include "ckpt_local.h"

#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include "check.h"
#include "ckpt_agree.h"
#include "ckpt_fs.h"
#include "ckpt_local_internal.h"
#include "ckpt_local_partner.h"
#include "ckpt_local_store.h"
#include "ckpt_private.h"
#include "ckpt_test_hooks.h"
#include "log.h"
#include "util.h"

int ckpt_node_split(MPI_Comm world, ckpt_node *out) {
  int rank;
  MPI_Comm_rank(world, &rank);
  const int64_t per = ckpt_env_int("BOOST_RANKS_PER_NODE", 0);
  if (per > 0) MPI_Comm_split(world, (int)(rank / per), rank, &out->comm);
  else MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &out->comm);
  MPI_Comm_rank(out->comm, &out->rank);
  MPI_Comm_size(out->comm, &out->size);
  MPI_Allreduce(&rank, &out->node_id, 1, MPI_INT, MPI_MIN, out->comm);
  return 0;
}

/* BOOST_CKPT_SYNC=1 (the benchmarks' baseline): the local save inline too. */
static int cfg_sync_mode(void) { return ckpt_env_int("BOOST_CKPT_SYNC", 0) != 0; }

/* The default directory: /dev/shm/boost-<euid>/<hash of the absolute
 * ckpt.dir>, the same for every relaunch of the run (rank 0 decides), in a
 * folder of the user's own (ckpt_private.h). */
static void default_dir(const char *ckpt_dir, char *out, size_t outlen) {
  char abs[2 * PATH_MAX] = "";
  if (ckpt_dir[0] == '/') boost_msgf(abs, sizeof abs, "%s", ckpt_dir);
  else {
    char cwd[PATH_MAX] = ".";
    if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
    boost_msgf(abs, sizeof abs, "%s/%s", cwd, ckpt_dir);
  }
  size_t n = strlen(abs);
  while (n > 1 && abs[n - 1] == '/') abs[--n] = 0;
  ckpt_private_default_root((unsigned long long)XXH3_64bits(abs, n), out, outlen);
}

/* Room on this node for two copies (the newest committed and the one being
 * written) of every one of its ranks' state; what the rank already holds
 * there is counted as free (it is replaced). */
static int check_room(ckpt_local *L, double state_bytes, boost_status *err) {
  const int copies = L->partner.on ? 4 : 2; /* its own and its partner's, each newest + being written */
  const double mine = copies * state_bytes,
               held = ckpt_local_held_bytes(L->mine) + (L->partner.on ? ckpt_local_held_bytes(L->partner.held_dir) : 0);
  double need = 0, held_node = 0;
  MPI_Allreduce(&mine, &need, 1, MPI_DOUBLE, MPI_SUM, L->node.comm);
  MPI_Allreduce(&held, &held_node, 1, MPI_DOUBLE, MPI_SUM, L->node.comm);
  struct statvfs v;
  boost_status why = {0};
  int ok = 1;
  if (statvfs(L->root, &v) != 0) {
    ok = 0;
    boost_err(&why, "ckpt.local_dir %s: %s", L->root, strerror(errno));
  } else {
    const double have = (double)v.f_bavail * (double)v.f_frsize + held_node;
    if (have < need) {
      ok = 0;
      char n[32], h[32], e[32];
      ckpt_format_bytes(need, n, sizeof n);
      ckpt_format_bytes(have, h, sizeof h);
      ckpt_format_bytes(state_bytes, e, sizeof e);
      boost_err(&why,
                 "ckpt.local_dir %s has %s free on the node of rank %d but the local level needs %s there (%d copies "
                 "of %s for each of its %d ranks%s): make room (a larger /dev/shm, another ckpt.local_dir) or set "
                 "ckpt.local_every=0",
                 L->root, h, L->node.node_id, n, copies, e, L->node.size,
                 L->partner.on ? ": its own and a partner's, the newest and one being written" : "");
    }
  }
  boost_status out = {0};
  if (ckpt_agree(&L->team, ok, why.msg, &out)) return 0;
  return boost_err(err, "%s", out.msg);
}

/* Whether the settings turn the local level on (a step count or auto, and
 * the file level it sits in front of). */
static int level_on(const ckpt_settings *cfg) { return (cfg->local_every > 0 || cfg->local_auto) && cfg->dir[0]; }

/* ckpt.local_dir, or the default for ckpt.dir. */
static void root_dir(const ckpt_settings *cfg, char *out, size_t outlen) {
  if (cfg->local_dir[0]) boost_msgf(out, outlen, "%s", cfg->local_dir);
  else default_dir(cfg->dir, out, outlen);
}

int ckpt_local_peek(const ckpt_settings *cfg, const char *run_id, ckpt_meta *meta, char *where, size_t wherelen) {
  ckpt_meta_init(meta);
  if (where && wherelen) where[0] = 0;
  if (!level_on(cfg)) return 0;
  char root[CKPT_PATH_MAX], mine[CKPT_PATH_MAX + 16];
  root_dir(cfg, root, sizeof root);
  boost_status refused = {0};
  if (ckpt_private_root(root, !cfg->local_dir[0], 0, &refused) != 0) return 0; /* ckpt_local_open says why */
  boost_msgf(mine, sizeof mine, "%s/rank_%05d", root, 0);
  int64_t steps[LOCAL_LIST_MAX];
  unsigned char id[CKPT_RUN_ID_BYTES];
  ckpt_run_id_to_bytes(run_id, id);
  const int n = ckpt_local_list(mine, 0, NULL, id, steps, LOCAL_LIST_MAX, NULL);
  for (int i = 0; i < n; i++) {
    char dir[PATH_MAX];
    char path[PATH_MAX + 16];
    boost_status err = {0};
    ckpt_local_step_path(dir, sizeof dir, mine, steps[i], 0);
    ckpt_local_manifest man;
    unsigned char *blob = NULL;
    ckpt_state st;
    boost_msgf(path, sizeof path, "%s/%s.bin", dir, ckpt_local_part_names[LOCAL_STATE]);
    if (ckpt_local_read_manifest(dir, &man, &err) != 0 ||
        ckpt_local_manifest_fits(&man, dir, steps[i], NULL, id, &err) != 0 ||
        ckpt_local_read_small(path, man.bytes[LOCAL_STATE], man.sum[LOCAL_STATE], &blob, &err) != 0)
      continue;
    const int ok = ckpt_local_state_agrees(blob, (size_t)man.bytes[LOCAL_STATE], &man, &err) == 0 &&
                   ckpt_local_unpack(blob, (size_t)man.bytes[LOCAL_STATE], meta, &st, &err) == 0;
    free(blob);
    if (!ok) continue;
    ckpt_state_free(&st);
    boost_msgf(where, wherelen, "%s", dir);
    return 1;
  }
  return 0;
}

static void local_free(ckpt_local *L) {
  if (!L) return;
  if (L->saver.thread_started) {
    pthread_mutex_lock(&L->saver.mu);
    while (L->saver.busy) pthread_cond_wait(&L->saver.cv, &L->saver.mu);
    L->saver.quit = 1;
    pthread_cond_broadcast(&L->saver.cv);
    pthread_mutex_unlock(&L->saver.mu);
    pthread_join(L->saver.thread, NULL);
  }
  pthread_mutex_destroy(&L->saver.mu);
  pthread_cond_destroy(&L->saver.cv);
  free(L->saver.job_blob);
  if (L->node.comm != MPI_COMM_NULL) MPI_Comm_free(&L->node.comm);
  if (L->team.comm != MPI_COMM_NULL) MPI_Comm_free(&L->team.comm);
  if (L->bounce) L->store->be->mem->host_free(L->store->be, L->bounce);
  free(L);
}

/* Where every tensor lies in the arenas: its name, local shape and offset,
 * hashed in registry order (ckpt_local_shape's tensors_sum). */
static uint64_t tensors_sum(const tensor_registry *reg) {
  XXH3_state_t *h = XXH3_createState();
  if (!h) boost_fail("out of memory hashing the tensor layout");
  XXH3_64bits_reset(h);
  for (int i = 0; i < reg->count; i++) {
    const tensor_desc *t = &reg->tensors[i];
    const uint64_t place[2] = {(uint64_t)t->arena_offset, (uint64_t)t->numel};
    XXH3_64bits_update(h, t->name, strlen(t->name) + 1);
    XXH3_64bits_update(h, t->local_shape, (size_t)t->ndim * sizeof t->local_shape[0]);
    XXH3_64bits_update(h, place, sizeof place);
  }
  const uint64_t sum = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  return sum;
}

int ckpt_local_open(const ckpt_settings *cfg, const process_grid *grid, tensor_store *store, char *note,
                    size_t notelen, ckpt_local **out, boost_status *err) {
  *out = NULL;
  if (note && notelen) note[0] = 0;
  if (!level_on(cfg)) return 0;
  ckpt_local *L = boost_calloc(1, sizeof *L);
  L->every = cfg->local_auto ? 0 : cfg->local_every;
  L->cost.step = -1;
  L->grid = grid;
  L->store = store;
  L->last_step = L->handed = -1;
  L->team.comm = L->node.comm = MPI_COMM_NULL;
  pthread_mutex_init(&L->saver.mu, NULL);
  pthread_cond_init(&L->saver.cv, NULL);
  MPI_Comm_dup(grid->world, &L->team.comm);
  L->team.rank = grid->rank;
  L->team.size = grid->world_size;
  ckpt_node_split(grid->world, &L->node);
  if (grid->rank == 0) root_dir(cfg, L->root, sizeof L->root);
  MPI_Bcast(L->root, (int)sizeof L->root, MPI_CHAR, 0, L->team.comm);
  boost_msgf(L->mine, sizeof L->mine, "%s/rank_%05d", L->root, grid->rank);
  char partner_note[160];
  ckpt_partner_plan(L->team.comm, &L->node, L->root, &L->partner, partner_note, sizeof partner_note);
  L->shape = (ckpt_local_shape){grid->rank, grid->world_size, grid->dp, grid->tp, grid->pp, store->mom_shards,
                                store->reg->numel, store->mom_begin, store->mom_end, tensors_sum(store->reg)};
  /* The shape of the rank whose copy this rank keeps: a received or held
   * copy is checked against it as an own copy is against this rank's. */
  ckpt_local_shape *shapes = boost_calloc((size_t)grid->world_size, sizeof *shapes);
  MPI_Allgather(&L->shape, (int)sizeof L->shape, MPI_BYTE, shapes, (int)sizeof L->shape, MPI_BYTE, L->team.comm);
  if (L->partner.on) L->held_shape = shapes[L->partner.held];
  free(shapes);
  boost_status why = {0}, verdict = {0};
  int ok = ckpt_private_root(L->root, !cfg->local_dir[0], 1, &why) == 0 && ckpt_private_steps_dir(L->mine, &why) == 0 &&
           (!L->partner.on || ckpt_private_steps_dir(L->partner.held_dir, &why) == 0);
  if (ok && !store->be->mem->host_view(store->be, store->arena[TENSOR_PARAMS])) {
    L->bounce = store->be->mem->host_alloc(store->be, LOCAL_BOUNCE_BYTES);
    if (!L->bounce) ok = 0, boost_err(&why, "no host memory for the local level's copies");
  }
  if (!ckpt_agree(&L->team, ok, why.msg, &verdict)) {
    boost_err(err, "%s", verdict.msg);
    local_free(L);
    return -1;
  }
  double state = 1 << 20; /* the state part: the histories, well under this for most runs */
  for (int k = 0; k < LOCAL_STATE; k++) state += (double)part_bytes(L, k);
  if (check_room(L, state, err) != 0) {
    local_free(L);
    return -1;
  }
  /* A thread of its own where the arenas are host memory (and saves are not
   * synchronous by request): every rank the same, or the agreements of a
   * job would meet inline ones. */
  int async = !L->bounce && !cfg_sync_mode();
  async = async && pthread_create(&L->saver.thread, NULL, ckpt_local_writer_main, L) == 0;
  L->saver.thread_started = async;
  L->saver.async = ckpt_agree(&L->team, async, "no local writer thread", NULL);
  if (async && !L->saver.async) { /* another rank has none: all go inline */
    pthread_mutex_lock(&L->saver.mu);
    L->saver.quit = 1;
    pthread_cond_broadcast(&L->saver.cv);
    pthread_mutex_unlock(&L->saver.mu);
    pthread_join(L->saver.thread, NULL);
    L->saver.thread_started = 0;
    L->saver.quit = 0;
  }
  if (note && notelen) {
    char each[32], node[32], partner[200];
    const int copies = L->partner.on ? 4 : 2;
    ckpt_format_bytes(state, each, sizeof each);
    ckpt_format_bytes((double)copies * state * L->node.size, node, sizeof node);
    if (L->partner.on)
      boost_msgf(partner, sizeof partner, "each rank's parts also kept by the same rank of the next node (rank 0's by "
                 "rank %d)", L->team.rank == 0 ? L->partner.holder : -1);
    else boost_msgf(partner, sizeof partner, "%s", partner_note);
    char cadence[64];
    if (L->every > 0) boost_msgf(cadence, sizeof cadence, "every %d step%s", L->every, L->every == 1 ? "" : "s");
    else boost_msgf(cadence, sizeof cadence, "at the interval of ckpt.local_every=auto");
    boost_msgf(note, notelen, "local level %s in %s: %s per rank and copy, up to %s on a node of %d rank%s (%s); %s",
               cadence, L->root, each, node, L->node.size, L->node.size == 1 ? "" : "s",
               L->partner.on ? "its own copies and its partners'" : "its own copies", partner);
  }
  *out = L;
  return 0;
}

void ckpt_local_close(ckpt_local *L) { local_free(L); }

int ckpt_local_due(const ckpt_local *L, int64_t step, int asked) {
  return L && step > 0 && step != L->handed && (asked || (L->every > 0 && step % L->every == 0));
}

int64_t ckpt_local_last_stall(const ckpt_local *L, double *stall_s) {
  if (stall_s) *stall_s = L ? L->cost.last_stall_s : 0;
  return L ? L->cost.step : -1;
}

int ckpt_local_restored_from_partner(const ckpt_local *L) { return L ? L->restored_partner : 0; }

int64_t ckpt_local_last(const ckpt_local *L) { return L ? L->last_step : -1; }
double ckpt_local_last_seconds(const ckpt_local *L) { return L ? L->last_s : 0; }

void ckpt_local_set_run(ckpt_local *L, const char *run_id) {
  if (L) ckpt_run_id_to_bytes(run_id, L->run_id);
}

void ckpt_local_keep_only(ckpt_local *L, int64_t keep) {
  if (!L) return;
  ckpt_local_collect(L, NULL);
  L->handed = keep;
  ckpt_local_remove_steps(L->mine, keep, 0, L->run_id);
  if (L->partner.on) ckpt_local_remove_steps(L->partner.held_dir, keep, 0, L->run_id);
  L->last_step = keep;
}

void ckpt_local_retire(ckpt_local *L, int64_t file_step) {
  if (!L) return;
  ckpt_local_collect(L, NULL);
  if (file_step < 0 || file_step < L->last_step) return;
  ckpt_local_remove_steps(L->mine, -1, 0, L->run_id); /* this run's: another run's stay, and so does the folder */
  rmdir(L->mine);
  if (L->partner.on) {
    ckpt_local_remove_steps(L->partner.held_dir, -1, 0, L->run_id);
    rmdir(L->partner.held_dir);
  }
  MPI_Barrier(L->team.comm); /* every rank's directory gone before the root is tried */
  if (L->node.rank == 0) rmdir(L->root);
  L->last_step = -1;
}

void ckpt_local_drop_newer(ckpt_local *L, int64_t max_step) {
  if (!L) return;
  ckpt_local_collect(L, NULL);
  if (L->handed > max_step) L->handed = -1;
  ckpt_local_remove_steps(L->mine, max_step, 1, L->run_id);
  if (L->partner.on) ckpt_local_remove_steps(L->partner.held_dir, max_step, 1, L->run_id);
  if (L->last_step > max_step) L->last_step = -1;
}
