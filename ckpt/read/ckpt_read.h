/* The reader: a resume on the writer thread -- the candidates newest
 * first, each read through this layout's plan (every replica its bands,
 * decoded where the stager says: into the arenas or host staging) and
 * verified against the stored checksums; only a verified file is trained
 * from. */
#ifndef BOOST_CKPT_READ_H
#define BOOST_CKPT_READ_H

#include "ckpt.h"
#include "ckpt_agree.h"
#include "ckpt_jobs.h"
#include "ckpt_plan.h"
#include "ckpt_stage.h"
#include "ckpt_worker.h"

typedef struct {
  ckpt_job_parts parts;
  load_result res; /* filled by the writer thread; the session takes it once the job is done */
} ckpt_reader;

/* The resume of cfg->resume into rd->res (writer thread; collective). */
void ckpt_do_load(ckpt_reader *rd);
/* The one-line account of a load the arenas now hold (res.reason.msg). */
void ckpt_load_report(ckpt_reader *rd);
void ckpt_reader_free(ckpt_reader *rd);

#endif
