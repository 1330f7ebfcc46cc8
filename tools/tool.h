/* What the boost programs share beyond kernels/util.h: the temporary
 * output that a stop signal removes (boost-data's shard, boost-reshard's
 * OUT.tmp), so an interrupted program never leaves a half-written file. */
#ifndef BOOST_TOOL_H
#define BOOST_TOOL_H

/* From now on SIGINT, SIGTERM and SIGHUP unlink `tmp` (copied) and end the
 * process with status 128 + the signal. */
void tool_tmp_arm(const char *tmp);
/* The temporary is the program's own business again (renamed into place,
 * or removed): a signal ends the process without touching it. */
void tool_tmp_disarm(void);
/* Unlinks the armed temporary, if any, and disarms (a program's error exit). */
void tool_tmp_remove(void);

#endif
