/* The one module that ends a job (kernels/job_abort.h), outside MPI as a
 * tool or a unit test meets it: the status is the one given, the abort
 * hooks run before the end (a hook that ends the job itself wins, and the
 * hooks are not run twice), a removed hook does not run, boost_fail ends
 * through it with 1, and the rank comes from the launcher before MPI. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "check.h"
#include "job_abort.h"

static int hook_status = 7;

/* A hook that ends the job itself: the status tells that it ran. */
static void end_from_hook(void *ctx) { job_fail(*(int *)ctx, "ended from an abort hook"); }

Test(job_abort, ends_with_the_status_given, .exit_code = 3) { job_fail(3, "a failure of test %d", 1); }

Test(job_abort, hooks_run_before_the_end, .exit_code = 7) {
  job_abort_on(end_from_hook, &hook_status);
  job_end(5, "the job ends");
}

Test(job_abort, a_removed_hook_does_not_run, .exit_code = 5) {
  job_abort_on(end_from_hook, &hook_status);
  job_abort_on(NULL, &hook_status);
  job_end(5, NULL);
}

Test(job_abort, boost_fail_ends_the_job_with_1, .exit_code = 1) { boost_fail("an invariant of test %d", 4); }

Test(job_abort, exit_now_for_signal_handlers, .exit_code = 9) { job_exit_now(9); }

Test(job_abort, the_launchers_rank_before_mpi) {
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  cr_assert_eq(job_rank(), 3);
  setenv("OMPI_COMM_WORLD_RANK", "12", 1);
  cr_assert_eq(job_rank(), 12);
}
