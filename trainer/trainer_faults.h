/* The test hook BOOST_TRAIN_TEST_FAULT (trainer_faults.c, docs/CHAOS.md):
 * the faulty step source. */
#ifndef BOOST_TRAINER_FAULTS_H
#define BOOST_TRAINER_FAULTS_H

#include "step_source.h"

/* inner itself when BOOST_TRAIN_TEST_FAULT is not set; else a source that
 * injects the hook's faults and passes everything on to inner (which it
 * then owns). grads: the gradient arena of numel floats; vocab: the
 * data's, the noise's range; rank: this process's in the job. */
step_source *step_source_faulty(step_source *inner, const step_batches *batches, int64_t global_batch, int vocab,
                                boost_backend *be, float *grads, size_t numel, int rank);

#endif
