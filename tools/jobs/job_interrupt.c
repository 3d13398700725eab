/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A run's interruption (jobs.h): SIGINT, SIGTERM and SIGHUP noted in job_interrupted once a
 * run has made its sandbox's lifeline, and the reporter whose waits give up on it. While a
 * step runs, sandbox_exec takes those signals through its own signalfd instead (client/exec.c);
 * everything else of a run looks at the flag between its steps, files and listings.
 */
#include <signal.h>

#include "jobs.h"

volatile sig_atomic_t job_interrupted;

/* A create waiting for its agent sees the note and gives up; nothing else is done here. */
static void job_on_signal(int sig)
{
	job_interrupted = sig;
}

void job_interrupt_catch(void)
{
	struct sigaction sa = {.sa_handler = job_on_signal, .sa_flags = SA_RESTART};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

struct lc_report job_lc_report(const struct job_run_opts *o)
{
	struct lc_report r = {
		.note = o->report.note,
		.show_log = o->report.show_log,
		.ctx = o->report.ctx,
		.interrupted = &job_interrupted,
	};

	return r;
}
