/* The local level's files (docs/CHECKPOINT_FORMAT.md, "The local level"):
 * one directory per rank and committed step under ckpt.local_dir,
 *
 *   <local_dir>/rank_RRRRR/step_SSSSSSSS/{params,adam_m,adam_v,state}.bin
 *                                        manifest.bin
 *
 * written as step_SSSSSSSS.tmp and renamed once every rank has written its
 * own. Each part is the rank's arena as it is in memory (the same layout
 * reads it back with one copy), the state part the run's metadata block and
 * state datasets, serialized through the schema's tables (ckpt_meta.h). The
 * manifest, written last, holds each part's size and XXH3-64 checksum, the
 * layout that wrote it and its own checksum. Plain POSIX; no MPI. */
#ifndef BOOST_CKPT_LOCAL_STORE_H
#define BOOST_CKPT_LOCAL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_meta.h"
#include "status.h"
#include "tensor.h"

#define LOCAL_STATE_STR_MAX (1u << 20) /* bytes of one string of the state part (the config: a few KiB) */

enum { LOCAL_PARAMS = 0, LOCAL_ADAM_M, LOCAL_ADAM_V, LOCAL_STATE, LOCAL_NPARTS };
extern const char *const ckpt_local_part_names[LOCAL_NPARTS]; /* params adam_m adam_v state */

/* v3: the run's identity (ckpt_run_id.h); v2 added the tensors' places
 * (tensors_sum). A manifest of another version reads as another format:
 * its step is passed over and left in place. */
#define LOCAL_MAGIC "boost-local-v3"

/* What a rank's arenas look like: a local step is restorable only into
 * the same (every field equal). The arenas' sizes alone do not say where
 * each tensor lies in them (a build that rounds offsets otherwise can have
 * the same sizes): tensors_sum does. */
typedef struct {
  int32_t owner_rank, world_size, dp, tp, pp, mom_shards;
  uint64_t numel, mom_begin, mom_end;
  uint64_t tensors_sum; /* XXH3-64 over the registry's tensors: name, local shape, arena offset */
} ckpt_local_shape;

typedef struct {
  char magic[16];
  unsigned char run_id[16]; /* the identity of the run that wrote it (ckpt_run_id.h) */
  int64_t step;
  ckpt_local_shape shape;
  uint64_t bytes[LOCAL_NPARTS];
  uint64_t sum[LOCAL_NPARTS]; /* XXH3-64 of the part's bytes */
  uint64_t self_sum;          /* XXH3-64 of every field above */
} ckpt_local_manifest;

/* The run's metadata block and state datasets as one buffer (malloc'd),
 * and back (meta and state owned by the caller: ckpt_meta_free,
 * ckpt_state_free). -1 with err on a malformed buffer. */
int ckpt_local_pack(const ckpt_meta *m, const ckpt_state *st, unsigned char **buf, size_t *len);
int ckpt_local_unpack(const unsigned char *buf, size_t len, ckpt_meta *m, ckpt_state *st, boost_status *err);

/* The most bytes a state part of `step` can hold (the schema's fields, the
 * state datasets at a generous number of rows per step): a size read from
 * a manifest or a peer is checked against it before anything is allocated
 * or received. */
uint64_t ckpt_local_state_bound(int64_t step);
/* Whether the manifest m is one this rank may restore from: step `step`
 * (-1: any), written by the run run_id (zeros: none matches), the layout
 * `want` (its owner rank, world size, dp/tp/pp, arena sizes and the
 * tensors' places), the arena parts' sizes those of `want` exactly and the
 * state part's under its bound. 0, or -1 with why naming the first
 * disagreement ("path" prefixes it). */
int ckpt_local_manifest_fits(const ckpt_local_manifest *m, const char *path, int64_t step,
                             const ckpt_local_shape *want, const unsigned char *run_id, boost_status *why);
/* Whether a state part agrees with its manifest: it unpacks, and its
 * metadata block says the same step, run identity and layout (world size,
 * dp, tp, pp) as `m`. 0, or -1 with why. */
int ckpt_local_state_agrees(const unsigned char *blob, size_t len, const ckpt_local_manifest *m, boost_status *why);

/* dir/step_SSSSSSSS (committed) or with .tmp. */
void ckpt_local_step_path(char *out, size_t outlen, const char *dir, int64_t step, int tmp);

/* The committed steps of dir whose manifest fits (ckpt_local_manifest_fits:
 * `want`'s layout, the run run_id; want NULL: only its owner_rank is
 * checked, against `owner`), newest first, at most max; *why gets the
 * first one passed over and why. Every committed step of dir is
 * considered. Returns how many. */
int ckpt_local_list(const char *dir, int owner, const ckpt_local_shape *want, const unsigned char *run_id,
                    int64_t *steps, int max, boost_status *why);

/* Whether a manifest is one (magic, own checksum). */
int ckpt_local_manifest_ok(const ckpt_local_manifest *m);
/* A manifest from len bytes (exactly one, its magic and own checksum): 0,
 * or -1 with err. What every reader of a manifest goes through (a file, a
 * partner's message, the fuzz harness tools/local_fuzz.c). */
int ckpt_local_parse_manifest(const void *buf, size_t len, ckpt_local_manifest *m, boost_status *err);
/* Reads and checks the manifest of a step directory (magic, own checksum). */
int ckpt_local_read_manifest(const char *stepdir, ckpt_local_manifest *m, boost_status *err);
int ckpt_local_write_manifest(const char *stepdir, ckpt_local_manifest *m, boost_status *err);
/* The magic and own checksum set (what ckpt_local_write_manifest writes). */
void ckpt_local_seal_manifest(ckpt_local_manifest *m);

/* Who a step directory belongs to: LOCAL_OURS (its manifest reads and
 * names run_id), LOCAL_NOBODY (no directory, or one without a manifest: a
 * save cut short), LOCAL_OTHER (another run's, another format's, or a
 * damaged manifest: never removed by this run). */
enum { LOCAL_OURS = 0, LOCAL_NOBODY, LOCAL_OTHER };
int ckpt_local_owner(const char *stepdir, const unsigned char *run_id);
/* Removes the step directories of dir (committed and temporaries) that are
 * this run's (LOCAL_OURS) other than `keep` (-1: all); with only_newer,
 * only those newer than keep. Other runs' steps are left alone. Returns
 * how many. */
int ckpt_local_remove_steps(const char *dir, int64_t keep, int only_newer, const unsigned char *run_id);
/* rm -r of one step directory. */
int ckpt_local_remove_tree(const char *path);

/* Bytes held by the step directories of dir. */
double ckpt_local_held_bytes(const char *dir);

/* A part: `bytes` of arena memory `src` (backend memory, through a host
 * bounce buffer of bounce_bytes unless the backend's memory is host
 * memory) written to path, fsynced; *sum its checksum. */
int ckpt_local_write_part(const char *path, boost_backend *be, const void *src, size_t bytes, void *bounce,
                          size_t bounce_bytes, uint64_t *sum, boost_status *err);
/* A part read into arena memory dst (NULL: only checked), its size and
 * checksum checked against want_bytes / want_sum. */
int ckpt_local_read_part(const char *path, boost_backend *be, void *dst, uint64_t want_bytes, uint64_t want_sum,
                         void *bounce, size_t bounce_bytes, boost_status *err);
/* A whole small file (the state part) into *buf (malloc'd), checked. */
int ckpt_local_read_small(const char *path, uint64_t want_bytes, uint64_t want_sum, unsigned char **buf, boost_status *err);
/* write(2) until all n bytes are out (EINTR retried); -1 on an error. */
int ckpt_local_write_all(int fd, const void *p, size_t n);
/* A buffer written to path, fsynced; *sum its checksum. */
int ckpt_local_write_small(const char *path, const void *buf, size_t len, uint64_t *sum, boost_status *err);

#endif
