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

/* sandbox_host_check, its refusal said: 0, or EXIT_SANDBOX. */
int host_check_linux(void);

/* ---- main.c: the signal that interrupted this command ---- */

/* The signal that interrupted this command, 0 while none did: for the handler of a command
 * that lets SIGINT, SIGTERM and SIGHUP interrupt its waits. The lifecycle's waits for an agent
 * give up when it is set (CTL_REPORT), so a create fails (and cleans up) within a poll's
 * 500 ms. None sets it now: run's job runner has its own (job_interrupted, tools/jobs/). */
extern volatile sig_atomic_t sandbox_interrupted;

/* ---- cmd_exec.c ---- */

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
int cmd_push(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_cp(int argc, char **argv);
/* cmd_run.c: run, over the job runner (tools/jobs/) */
int cmd_run(int argc, char **argv);
/* cmd_snapshot.c: snapshot, restore, fork, suspend, snapshots, snapshot rm */
#define FORK_MAX 64 /* children of one fork (docs/snapshots.md; fork's help says it) */
int cmd_snapshot(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_fork(int argc, char **argv);
int cmd_suspend(int argc, char **argv);
int cmd_snapshots(int argc, char **argv);
/* The bytes a snapshot's directory takes on disk (its files' blocks); run's cache trim takes
 * it too (job_run_opts). */
uint64_t snapshot_dir_bytes(const char *dir);
/* How many sandboxes run from the snapshot `name`, and snapshots were taken of them. */
unsigned snapshot_users(const char *name);

#endif
