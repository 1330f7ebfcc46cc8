/* kernels/log.h: every warning carries the program's name, info lines are
 * printed as given, one whole line per call. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "log.h"

static void redirect(void) {
  cr_redirect_stdout();
  cr_redirect_stderr();
}

Test(log, warns_with_the_default_name_before_the_program_names_itself, .init = redirect) {
  boost_log_warn("cannot open %s", "x.h5");
  fflush(stderr);
  cr_assert_stderr_eq_str("boost: cannot open x.h5\n");
}

Test(log, warns_with_the_program_name, .init = redirect) {
  boost_log_program("boost-train");
  cr_assert_str_eq(boost_log_name(), "boost-train");
  boost_log_warn("checkpoint of step %d FAILED", 12);
  boost_log_warn("second");
  fflush(stderr);
  cr_assert_stderr_eq_str("boost-train: checkpoint of step 12 FAILED\nboost-train: second\n");
}

Test(log, an_empty_name_keeps_the_previous_one, .init = redirect) {
  boost_log_program("boost-inspect");
  boost_log_program("");
  boost_log_program(NULL);
  boost_log_warn("w");
  fflush(stderr);
  cr_assert_stderr_eq_str("boost-inspect: w\n");
}

Test(log, info_lines_are_printed_as_given, .init = redirect) {
  boost_log_program("boost-train");
  boost_log_info("checkpoint: %s", "committed step 4");
  cr_assert_stdout_eq_str("checkpoint: committed step 4\n");
}
