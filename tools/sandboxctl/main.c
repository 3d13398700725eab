/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl: create, drive and destroy sandboxes (docs/sandboxctl.md). Dispatches to one
 * function per command, each in its own cmd_*.c, which returns the process's exit status.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "sandboxctl.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *what;
} commands[] = {
	{"create", cmd_create, "create a sandbox and print its id once its agent answers"},
	{"exec", cmd_exec, "run a command in a sandbox, streaming its output"},
	{"cp", cmd_cp, "copy a file into or out of a sandbox"},
	{"run", cmd_run, "run a job spec (YAML) in a fresh sandbox"},
	{"ls", cmd_ls, "list sandboxes"},
	{"stats", cmd_stats, "a sandbox's CPU, memory and I/O used, and its limits"},
	{"logs", cmd_logs, "print a sandbox's console"},
	{"pause", cmd_pause, "stop a sandbox's vCPUs"},
	{"resume", cmd_pause, "run a paused sandbox's vCPUs again"},
	{"stop", cmd_stop, "stop a sandbox's VM (its disk stays)"},
	{"start", cmd_start, "boot a stopped sandbox again, from its own disk"},
	{"rm", cmd_rm, "remove a sandbox"},
	{"snapshot", cmd_snapshot, "snapshot a sandbox (memory, devices, disk) under a name"},
	{"restore", cmd_restore, "a new sandbox from a snapshot, running where it was"},
	{"fork", cmd_fork, "copies of a running sandbox, each going on from its state"},
	{"suspend", cmd_suspend, "snapshot a sandbox to disk and end its VM (resume ID)"},
	{"snapshots", cmd_snapshots, "list snapshots"},
	{"images", cmd_images, "list or import images"},
	{"net", cmd_net, "a sandbox's network policy and audit log"},
	{"port", cmd_port, "forward a host port on 127.0.0.1 to a sandbox's port"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: sandboxctl COMMAND [ARGS...]   (sandboxctl COMMAND --help)\n"
		   "       sandboxctl --version\n\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].what);
	fprintf(f,
		"\nState lives in $SANDBOX_HOME (default /var/lib/sandbox).\n"
		"Exit status: 0 ok, 1 error, 2 usage, 125 sandbox unusable; exec: the command's\n"
		"status, 128+N killed by signal N, 124 timeout (docs/sandboxctl.md).\n");
}

volatile sig_atomic_t sandbox_interrupted;

void ctl_note(void *ctx, const char *line)
{
	errmsg("%s", line);
}

void ctl_show_log(void *ctx, const char *path, unsigned lines)
{
	print_tail(path, lines);
}

const struct lc_report ctl_report = CTL_REPORT;

int ctl_failed(const struct lc_report *r, int err)
{
	if (r->error[0])
		errmsg("%s", r->error);
	else if (!r->bad_option) /* (else it was said: the proxy's policy, on stderr) */
		errmsg("%s", strerror(-err));
	lc_show_log(r);
	return err == -ESRCH ? EXIT_SANDBOX : r->bad_option ? EXIT_USAGE : EXIT_ERR;
}

void agent_print_error(const char *what, const struct proto_frame *f)
{
	char msg[512];

	errmsg("%s: %s", what, agent_error_text(f, msg, sizeof(msg)));
}

int host_check_linux(void)
{
	struct lc_report r = CTL_REPORT;
	int err = sandbox_host_check(&r);

	return err < 0 ? ctl_failed(&r, err) : 0;
}

int sandbox_resolve(const char *ref, struct sandbox *sb)
{
	int err = sandbox_find(ref, sb, &ctl_report);

	if (err == 0)
		return 0;
	if (err == -EINVAL)
		errmsg("'%.80s' is not a sandbox id or name", ref);
	else if (err == -ENOTUNIQ)
		errmsg("'%s' matches several sandboxes: give more of the id", ref);
	else if (err == -ENOENT)
		errmsg("no sandbox '%s' (see sandboxctl ls)", ref);
	else
		errmsg("cannot read %s/sandboxes: %s", state_home(), strerror(-err));
	return EXIT_SANDBOX;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("sandboxctl %s\n", SANDBOX_VERSION); /* meson's project version */
		return EXIT_OK;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	errmsg("unknown command '%.64s'", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
