/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl: the command line that creates, drives and destroys sandboxes. No daemon: every
 * command reads the state under $SANDBOX_HOME, talks to the sandbox's VMM (api.sock,
 * wire/api_proto.h) and agent (vsock.sock, wire/proto.h) and exits. One file per command
 * (cmd_*.c), one table of them with every usage text (commands.c); the state directory and the
 * clients are the host-side client library (client/client.h); this header is what the commands
 * share besides.
 *
 * Internal functions return 0 or -errno and print nothing unless their comment says so;
 * commands (cmd_*) print one-line errors and return an exit status (docs/sandboxctl.md).
 */
#ifndef SANDBOXCTL_H
#define SANDBOXCTL_H

#include <signal.h>
#include <stdio.h>

#include "client.h"
#include "jobspec.h"

/* Exit statuses (docs/sandboxctl.md). exec returns the command's own status. */
#define EXIT_OK	      0
#define EXIT_ERR      1	  /* an error: the message says what */
#define EXIT_USAGE    2	  /* bad command line */
#define EXIT_TIMEOUT  124 /* exec --timeout expired (as timeout(1)) */
#define EXIT_SANDBOX  125 /* the sandbox is unusable: unknown, not running, VMM or agent dead */
#define EXIT_CMD_EXEC 126 /* found but could not be executed (from the agent) */

/* ---- commands.c: the command table ---- */

/* A row of the table, as kvmtool's builtins: a command (fn and what set), or the usage of a
 * subcommand of one ("snapshot rm": fn and what NULL, neither run nor listed). */
struct ctl_command {
	const char *name;
	int (*fn)(int argc, char **argv); /* argv[0] is the name; returns the exit status */
	const char *what;		  /* the line sandboxctl --help lists */
	const char *help;		  /* NAME --help prints it on stdout */
	const char *usage;		  /* a usage error prints it on stderr: the help, or its
					   * synopsis (snapshot, restore, fork, pause, resume) */
};
/* The commands in the order sandboxctl --help lists them, then the subcommands' rows; the last
 * row's name is NULL. */
extern const struct ctl_command ctl_commands[];
/* The row named `name`, or NULL. */
const struct ctl_command *ctl_command_find(const char *name);
/* The help of the row `name` (a literal: one not in the table is said on stderr, EXIT_ERR) on
 * stdout; returns EXIT_OK. */
int ctl_help(const char *name);
/* The usage of the row `name` on stderr; returns EXIT_USAGE. */
int ctl_usage(const char *name);

/* ---- main.c ---- */

/* The lifecycle's reporter of a command: each line it hears is a message on stderr
 * (ctl_note). A verb that can fail gets one of its own, `struct lc_report r = CTL_REPORT;`,
 * and its failure is said by ctl_failed. */
void ctl_note(void *ctx, const char *line);
void ctl_show_log(void *ctx, const char *text); /* a log's end, on stderr */
#define CTL_REPORT                                                                                 \
	{                                                                                          \
		.note = ctl_note, .show_log = ctl_show_log, .interrupted = &sandbox_interrupted    \
	}
extern const struct lc_report ctl_report;
/* A verb's failure said for the command line: its message (else the errno's, unless the
 * caller's options were at fault and said so already) on stderr, then the end of the log it
 * kept; returns EXIT_SANDBOX for -ESRCH (the sandbox cannot be acted on), EXIT_USAGE for a bad
 * option (r->bad_option), else EXIT_ERR. */
int ctl_failed(const struct lc_report *r, int err);
/* sandbox_find, its error said for the command line: 0, or EXIT_SANDBOX (unknown, ambiguous,
 * not an id or name) with the message printed. */
int sandbox_resolve(const char *ref, struct sandbox *sb);

/* An ERROR frame's message (agent_error_text) as "sandboxctl: what: message". */
void agent_print_error(const char *what, const struct proto_frame *f);
/* sandbox_host_check, its refusal said: 0, or EXIT_SANDBOX. */
int host_check_linux(void);

/* ---- main.c: the signal that interrupted this command ---- */

/* The signal that interrupted this command, 0 while none did: set by the handler of a command
 * that lets SIGINT, SIGTERM and SIGHUP interrupt its waits (run). The lifecycle's waits for an
 * agent give up when it is set (CTL_REPORT), so a create fails (and cleans up) within a poll's
 * 500 ms. */
extern volatile sig_atomic_t sandbox_interrupted;

/* ---- exec.c: one command through the agent ---- */

struct exec_opts {
	char **argv;
	int argc;
	char **env; /* K=V, after (and overriding) PATH, HOME, LANG, the image's Env, TERM */
	unsigned nenv;
	const char *cwd; /* NULL: the image's workdir, else / */
	/* The image's defaults (exec.conf: Env under env, the workdir, the user), or NULL. */
	const struct image_conf *image;
	bool user_set; /* exec --user: uid and gid over the image's */
	uint32_t uid, gid;
	unsigned timeout_s; /* 0: none */
	bool interactive;   /* forward our stdin */
	bool tty;	    /* a pty in the guest; our terminal raw when interactive */
	/* Not NULL: the command's output (stream 1 stdout, 2 stderr) goes here, not to ours. */
	void (*on_output)(void *arg, int stream, const void *data, size_t len);
	void *output_arg;
};
/* Run the command, streaming its output to ours. Returns its exit status (128+N for signal
 * N), EXIT_TIMEOUT, EXIT_CMD_EXEC when the agent could not start it (the message says why),
 * EXIT_SANDBOX when the agent cannot be reached or the connection is lost. */
int exec_run(const struct sandbox *sb, const struct exec_opts *o);
/* Resolve `ref` and check that it runs: prints why not and returns EXIT_SANDBOX, else 0. */
int sandbox_resolve_running(const char *ref, struct sandbox *sb);

/* ---- images (cmd_images.c) ---- */

/* ---- the commands: argv[0] is the command's name ---- */

int cmd_images(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_ls(int argc, char **argv);
/* cmd_stats.c: stats; and "12.3 MiB" (or "max" for UINT64_MAX) for ls too */
int cmd_stats(int argc, char **argv);
void stats_fmt_bytes(uint64_t v, char *out, size_t len);
int cmd_logs(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_start(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_pause(int argc, char **argv); /* pause and resume */
int cmd_exec(int argc, char **argv);
/* cmd_net.c: net policy, net log, port */
int cmd_net(int argc, char **argv);
int cmd_port(int argc, char **argv);
int cmd_cp(int argc, char **argv);
/* cmd_cp.c: one file to the guest's `dst` (into it, when it is a directory) or from its `src`
 * (into `dst`, or a directory of that name; "-" is stdin or stdout), as sandboxctl cp does,
 * with its bounds (timeout_s 0: the default budget). copy_out takes at most *budget bytes
 * (NULL: no such bound) and takes what it copied off it. Print their errors; return an exit
 * status (EXIT_SANDBOX when the connection is lost). */
int copy_in(struct agent_conn *c, const char *src, const char *dst, unsigned timeout_s);
int copy_out(struct agent_conn *c, const char *src, const char *dst, unsigned timeout_s,
	     uint64_t *budget);
struct job_report;
/* job_files.c: the job's files: into the guest, and its artifacts: out under `dir`. Print
 * what they copy and their errors on stderr; return an exit status. */
int job_files_in(const struct sandbox *sb, const struct jobspec *js);
int job_artifacts_out(const struct sandbox *sb, const struct jobspec *js, const char *dir,
		      struct job_report *r);
int cmd_run(int argc, char **argv);
/* cmd_snapshot.c: snapshot, restore, fork, suspend, snapshots, snapshot rm */
#define FORK_MAX 64 /* children of one fork (docs/snapshots.md; fork's help says it) */
int cmd_snapshot(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_fork(int argc, char **argv);
int cmd_suspend(int argc, char **argv);
int cmd_snapshots(int argc, char **argv);
/* The bytes a snapshot's directory takes on disk (its files' blocks). */
uint64_t snapshot_dir_bytes(const char *dir);
/* How many sandboxes run from the snapshot `name`, and snapshots were taken of them. */
unsigned snapshot_users(const char *name);

/* ---- job_report.c: what run reports (--json events, --junit), secrets masked ---- */

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

/* ---- job_cache.c: a job's state after its cache: step, kept as a snapshot ---- */

/* The cache snapshot's name (".job-<key>") for the state after js->cache_step of a job
 * created with `co`: a key of the image's content, the VMM, this CPU, cpus, memory, disk, the
 * network policy, the job's env, its files' names, modes and contents, and every step up to
 * it. -errno when there is none to be had (printed: the job runs uncached). */
int job_cache_name(const struct jobspec *js, const struct create_opts *co, char *out, size_t len);
/* The snapshot `name` was used now (restored or made): the last to be evicted. */
void job_cache_touch(const char *name);
/* Remove the least recently used job cache snapshots, none in use and never `keep`, until
 * they take at most `budget` bytes; prints what it removed. */
void job_cache_trim(uint64_t budget, const char *keep);

#endif
