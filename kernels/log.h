/* One voice per program: the only place library code's words reach the
 * terminal.
 *
 * Library code never prints. A failure travels up as a boost_status and the
 * program prints it; what is not a failure but must be seen as it happens
 * (a checkpoint set aside, a write that failed while training goes on, a
 * rank that reports why the job ends) goes through these calls. The program
 * names itself once at the top of main, and every warning line of the
 * process then starts with that name, whichever library wrote it:
 *
 *     boost_log_program("boost-train");
 *     boost_log_warn("checkpoint of step %lld FAILED ...", step);
 *         -> stderr: "boost-train: checkpoint of step 12 FAILED ..."
 *     boost_log_info("checkpoint: %s", note);
 *         -> stdout: "checkpoint: ..." (the topic is part of the text)
 *
 * Lines are whole: each call writes one line under the stream's lock, so the
 * checkpoint writer's thread and the training thread never interleave
 * inside a line. stdout is flushed before a warning so that the order a
 * reader sees on a terminal or in a merged log is the order of the calls. */
#ifndef BOOST_LOG_H
#define BOOST_LOG_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The program's name, the prefix of its warnings ("boost-train"). Set once
 * at start; before it, warnings carry "boost". The string must outlive the
 * process's use of it (a literal). */
void boost_log_program(const char *name);
const char *boost_log_name(void);

/* One line on stderr: "<program>: <message>". */
void boost_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void boost_log_vwarn(const char *fmt, va_list ap);

/* One whole line on stderr as given (no prefix added), written at once with
 * write(2), without the stream's lock: the line a job ends with, when
 * another thread may hold stderr or be stopped inside it. */
void boost_log_line_now(const char *line);

/* One line on stdout, flushed: the message as given. */
void boost_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#ifdef __cplusplus
}
#endif

#endif
