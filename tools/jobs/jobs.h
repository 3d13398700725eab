/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Jobs, a room of its own (docs/jobspec.md, "Running"): a job spec (tools/jobspec/) run in a
 * fresh sandbox through the client library's verbs (client/client.h): the sandbox created or
 * restored from the job cache, the job's files copied in, each step run through sandbox_exec,
 * the state after the cache: step kept, the artifacts copied out, the sandbox removed; and what
 * a run reports (--json events, --junit), secrets masked. `sandboxctl run` (cmd_run.c) is its
 * command line; nothing here knows sandboxctl's.
 *
 * A run prints what it shows: its progress ("==> ...") and errors on stderr, the steps' output
 * on stdout and stderr, or its events on stdout. How a lifecycle verb's failure is said, and
 * which status it gives, is the caller's (struct job_run_opts).
 *
 * Functions return 0 or -errno unless their comment says they return a status (a job's, as
 * JOB_EXIT_* and a step's own).
 */
#ifndef SANDBOX_JOBS_H
#define SANDBOX_JOBS_H

#include <signal.h>
#include <stdio.h>

#include "client.h"
#include "jobspec.h"

/* The statuses a job ends with besides its steps' own (0-255, 128+N for signal N): the
 * numbers sandboxctl exits with (docs/sandboxctl.md), which the JSON events and the JUnit
 * report give too. */
#define JOB_EXIT_OK	  0
#define JOB_EXIT_ERR	  1   /* an error: the message says what */
#define JOB_EXIT_USAGE	  2   /* the spec or an option is at fault */
#define JOB_EXIT_TIMEOUT  124 /* a step's timeout, or the job's (as timeout(1)) */
#define JOB_EXIT_SANDBOX  125 /* the sandbox is unusable: its VMM or agent lost */
#define JOB_EXIT_CMD_EXEC 126 /* the agent could not start a step's shell */

#define JOB_CACHE_MAX_GIB 16 /* the job cache's budget without run --cache-max */

/* ---- job_run.c: one job ---- */

struct job_run_opts {
	const char *spec;	/* the spec's path: the JUnit suite's name */
	bool keep;		/* leave the sandbox running (else it is removed, and stops
				 * however the run ends: its lifeline) */
	bool no_cache;		/* neither restore nor keep the state after the cache: step */
	const char *artifacts;	/* the host directory the artifacts go under */
	bool json;		/* events on stdout, not the steps' output */
	const char *junit;	/* the JUnit report's path, or NULL */
	uint64_t cache_max_gib; /* the job cache's budget */
	/* How the lifecycle's notes and logs are said: its note, show_log and ctx (its
	 * interrupted is the runner's, job_interrupted). */
	struct lc_report report;
	/* Say a verb's failure (its message, else the errno's unless r->bad_option, then its
	 * log) and return the status the job ends with: JOB_EXIT_SANDBOX for -ESRCH,
	 * JOB_EXIT_USAGE for r->bad_option, else JOB_EXIT_ERR (sandboxctl's ctl_failed). */
	int (*failed)(const struct lc_report *r, int err);
	/* The snapshot store's two queries the cache's trim needs: the bytes a snapshot's
	 * directory takes on disk, and how many sandboxes and snapshots stand on the snapshot
	 * `name` (sandboxctl's snapshot_dir_bytes and snapshot_users: not the client library's
	 * yet, docs/jobspec.md, "Not done yet"). */
	uint64_t (*snap_bytes)(const char *dir);
	unsigned (*snap_users)(const char *name);
};
/* Run the job `js` (jobspec_load's) in a new sandbox, as the top of this file says. From the
 * lifeline's making on, SIGINT, SIGTERM and SIGHUP are caught (job_interrupted): while a step
 * runs they go to its command (sandbox_exec); while the sandbox is created one stops the create
 * (which removes what it made), while it is removed one is only noted, and no step runs after
 * one. Returns the job's status: the first failing step's (one under continue-on-error does
 * not count), JOB_EXIT_TIMEOUT for the job's timeout, 128+N after signal N, a failure's
 * (o->failed, JOB_EXIT_*), else 0. */
int job_run(const struct jobspec *js, const struct job_run_opts *o);

/* ---- job_interrupt.c: a run's interruption ---- */

/* The signal that interrupted the job, 0 while none did. */
extern volatile sig_atomic_t job_interrupted;
/* From now on SIGINT, SIGTERM and SIGHUP only set job_interrupted (a handler, not a blocked
 * mask: the proxy and the VMM a run starts must not inherit them blocked). */
void job_interrupt_catch(void);
/* A reporter for one verb of the run: o->report's, its waits given up on job_interrupted. */
struct lc_report job_lc_report(const struct job_run_opts *o);

/* ---- job_files.c: the job's files in, its artifacts out ---- */

struct job_report;
/* The job's files: into the guest of `sb`, and its artifacts: out under o->artifacts (each
 * reported to `r`). Print what they copy and their errors on stderr; return a status
 * (JOB_EXIT_SANDBOX when the agent is lost, 128+N when interrupted). */
int job_files_in(const struct sandbox *sb, const struct jobspec *js, const struct job_run_opts *o);
int job_artifacts_out(const struct sandbox *sb, const struct jobspec *js,
		      const struct job_run_opts *o, struct job_report *r);

/* ---- job_cache.c: a job's state after its cache: step, kept as a snapshot ---- */

/* A cache hit: the job's sandbox `sb` restored from the state after js->cache_step of a job
 * created with `co`. Returns the steps it skips (js->cache_step), or 0 with `sb` untouched: a
 * miss (said on stderr), the cache's name in `cache` for job_cache_keep (empty when there is
 * none to be had). */
unsigned job_cache_restore(const struct jobspec *js, const struct create_opts *co,
			   struct sandbox *sb, char *cache, size_t len,
			   const struct job_run_opts *o, struct job_report *r);
/* After the cache: step passed: keep the state of `sb` as `cache`, then trim the cache to
 * o->cache_max_gib, least recently used first. A failure is said, and the job goes on
 * uncached. */
void job_cache_keep(struct sandbox *sb, const struct jobspec *js, const struct create_opts *co,
		    const char *cache, const struct job_run_opts *o, struct job_report *r);

/* ---- job_report.c: what a run reports (--json events, --junit), secrets masked ---- */

#define REPORT_SECRETS_MAX 64
struct report_step {
	const char *name;
	bool ran;
	int status;
	double secs;
	const char *outcome; /* passed, failed, continued; cached */
	char *out;	     /* the end of its output, for --junit */
	size_t outlen;
	bool cut; /* out lost its beginning */
};
struct report_carry {
	char buf[8192];
	size_t len;
};
struct job_report {
	bool json;	   /* events on stdout, not the steps' output */
	const char *junit; /* the JUnit report's path, or NULL */
	const char *spec;  /* its suite's name */
	struct report_step *steps;
	unsigned nsteps, cur;
	const char *secrets[REPORT_SECRETS_MAX]; /* values masked in all output */
	unsigned nsecrets;
	size_t hold; /* the bytes held back for a value the next chunk may end */
	struct report_carry carry[2];
	int write_err, junit_err;
};
int report_init(struct job_report *r, const struct jobspec *js, const char *spec, bool json,
		const char *junit) __must_check;
void report_job_started(struct job_report *r, const char *id, const char *image);
void report_step_started(struct job_report *r, unsigned i);
/* The exec_opts.on_output of a step: masks, then writes or reports it. */
void report_output(void *arg, int stream, const void *data, size_t len);
void report_step_ended(struct job_report *r, unsigned i, int status, const char *outcome,
		       double secs);
/* The first `n` steps came from the job cache. */
void report_step_cached(struct job_report *r, unsigned n);
/* A JSON event (--json only; r may be NULL): fmt gives its fields after "event" and "time",
 * each beginning with a comma. */
void report_event(struct job_report *r, const char *event, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* An artifact copied out: guest path, host file, bytes. */
void report_artifact(struct job_report *r, const char *path, const char *file, uint64_t bytes);
/* The job's end: the JUnit report written, the last event. */
int report_job_ended(struct job_report *r, int status, double secs);
void report_free(struct job_report *r);
/* `len` bytes as a JSON string on f (not UTF-8: U+FFFD). */
void json_str(FILE *f, const void *data, size_t len);

#endif
