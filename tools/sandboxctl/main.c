/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl: create, drive and destroy sandboxes (docs/sandboxctl.md). Dispatches through the
 * command table (commands.c) to one function per command, each in its own cmd_*.c, which
 * returns the process's exit status.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "sandboxctl.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: sandboxctl COMMAND [ARGS...]   (sandboxctl COMMAND --help)\n"
		   "       sandboxctl --version\n\n");
	for (const struct ctl_command *c = ctl_commands; c->name; c++)
		if (c->what)
			fprintf(f, "  %-8s %s\n", c->name, c->what);
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

void ctl_show_log(void *ctx, const char *text)
{
	fputs(text, stderr);
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
	const struct ctl_command *c;

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
	c = ctl_command_find(argv[1]);
	if (c && c->fn)
		return c->fn(argc - 1, argv + 1);
	errmsg("unknown command '%.64s'", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
