/* The run's history of starts, kept in its checkpoint directory as
 * `starts.jsonl` (one JSON object a line: the wall-clock time, the step it
 * started from, the number of ranks). Written by rank 0; a fresh start
 * (step 0) begins a new history, a resume appends. It is what
 * ckpt.every = auto estimates the mean time between interruptions from
 * (docs/CHECKPOINT_FORMAT.md, "Choosing the interval"). */
#ifndef BOOST_RUN_STARTS_H
#define BOOST_RUN_STARTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int starts;           /* records, this one included */
  double first_start_s; /* wall-clock time of the first */
} run_starts;

/* Records this start (time now_s, from step) in dir/starts.jsonl and reads
 * the history back. Returns 0, or -1 with one line in err (the run goes on
 * without a history). */
int run_starts_record(const char *dir, double now_s, int64_t step, int world, run_starts *out, char *err, size_t errlen);

#endif
