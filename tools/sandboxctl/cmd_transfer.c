/* SPDX-License-Identifier: Apache-2.0 */
/*
 * push SANDBOX URL [--name NAME] [--keep] [--key-file F], pull NAME URL [--as LOCAL] [--keep]
 * [--key-file F]: a sandbox to a service's fleet and back through its API (docs/fleet.md,
 * "Push and pull"). The work is sandbox-transfer's (tools/transfer/: it needs libcurl, which
 * this static program cannot link); this checks the arguments and runs it, its stdout and
 * stderr ours, its exit status ours (1 failed, 2 usage).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandboxctl.h"

static int run_transfer(const char *verb, int argc, char **argv)
{
	static const struct option opts[] = {
		{"name", required_argument, NULL, 'n'},
		{"as", required_argument, NULL, 'a'},
		{"keep", no_argument, NULL, 'k'},
		{"key-file", required_argument, NULL, 'f'},
		{"wait", required_argument, NULL, 'w'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool push = strcmp(verb, "push") == 0;
	char prog[4096];
	int c, status;
	pid_t pid;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h')
			return ctl_help(verb);
		if (c == '?' || (c == 'n' && !push) || (c == 'a' && push))
			return ctl_usage(verb);
		if ((c == 'n' || c == 'a') && !valid_name(optarg)) {
			errmsg("%s '%.80s': not a name", push ? "--name" : "--as", optarg);
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 2)
		return ctl_usage(verb);
	if (program_find("SANDBOX_TRANSFER", "tools/transfer", "sandbox-transfer", prog,
			 sizeof(prog)) < 0)
		return EXIT_ERR;
	const char *args[24];
	int n = 0;

	args[n++] = prog;
	args[n++] = verb;
	for (int i = 1; i < argc && n < 22; i++)
		args[n++] = strcmp(argv[i], "--as") == 0 ? "--name" : argv[i];
	args[n] = NULL;
	fflush(NULL);
	if ((pid = fork()) < 0) {
		errmsg("%s: fork: %s", verb, strerror(errno));
		return EXIT_ERR;
	}
	if (pid == 0) {
		execv(prog, (char *const *)args);
		fprintf(stderr, "sandboxctl: %s: cannot run %s: %s\n", verb, prog, strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return EXIT_ERR;
	if (!WIFEXITED(status))
		return EXIT_ERR;
	return WEXITSTATUS(status) == 0	  ? EXIT_OK
	       : WEXITSTATUS(status) == 2 ? EXIT_USAGE
					  : EXIT_ERR;
}

int cmd_push(int argc, char **argv)
{
	return run_transfer("push", argc, argv);
}

int cmd_pull(int argc, char **argv)
{
	return run_transfer("pull", argc, argv);
}
