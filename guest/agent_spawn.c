/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Starting a child for the agent (see agent.h): an exec's and a command session's program, on
 * new pipes or a new pty, in its own process group (its own session with a pty), as the uid and
 * gid asked, in its cwd. Shared by agent_exec.c and agent_session.c.
 *
 * The child reports a failure to set itself up (chdir, uid, the terminal) through a CLOEXEC
 * pipe that the parent reads before it answers; end of file on that pipe means the exec
 * happened. A program that cannot be executed is reported the way a shell does it: a line on
 * the child's stderr and exit status 127 (126).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

#define AGENT_EXEC_STACK_LEN (64u << 10) /* the child's stack until it execs, beyond argv */
#define AGENT_SHELL_ARGS_MAX 8		 /* arguments of a command the shell fallback takes */

/* What the child reports when it cannot get to exec. */
struct agent_exec_report {
	int stage; /* AGENT_STAGE_* */
	int err;
};

enum {
	AGENT_STAGE_TTY,
	AGENT_STAGE_STDIO,
	AGENT_STAGE_CHDIR,
	AGENT_STAGE_GROUPS,
	AGENT_STAGE_GID,
	AGENT_STAGE_UID,
};

static const char *const agent_stage_names[] = {
	[AGENT_STAGE_TTY] = "controlling terminal",
	[AGENT_STAGE_STDIO] = "stdio",
	[AGENT_STAGE_CHDIR] = "chdir",
	[AGENT_STAGE_GROUPS] = "setgroups",
	[AGENT_STAGE_GID] = "setgid",
	[AGENT_STAGE_UID] = "setuid",
};

/* The fds of a child being set up: the child's ends and ours. -1 where unused. */
struct agent_exec_fds {
	int child_in, child_out, child_err; /* pipes: the child's ends; pty: the slave in out */
	int in, out, err; /* ours: pipe ends, or the master (out) and a dup (in) */
};

/* Close every fd of fds that is open. */
static void agent_exec_close_fds(struct agent_exec_fds *fds)
{
	int *all[] = {&fds->child_in, &fds->child_out, &fds->child_err,
		      &fds->in,	      &fds->out,       &fds->err};
	size_t i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (*all[i] >= 0)
			close(*all[i]);
		*all[i] = -1;
	}
}

/* Open a pty for req: fds->out is the master, fds->in a dup of it, child_out the slave. */
static int agent_exec_open_pty(const struct agent_exec_req *req, struct agent_exec_fds *fds)
{
	char name[64];
	int fd;

	fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	fds->out = fd;
	if (grantpt(fd) < 0 || unlockpt(fd) < 0 || ptsname_r(fd, name, sizeof(name)) != 0)
		return errno ? -errno : -ENOTTY;
	fds->child_out = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fds->child_out < 0)
		return -errno;
	if (req->rows != 0 && req->cols != 0) {
		struct winsize ws = {.ws_row = req->rows, .ws_col = req->cols};

		if (ioctl(fd, TIOCSWINSZ, &ws) < 0)
			return -errno;
	}
	fds->in = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (fds->in < 0)
		return -errno;
	return 0;
}

/* Open the pipes for req: stdout, stderr and (with PROTO_EXEC_STDIN) stdin. */
static int agent_exec_open_pipes(const struct agent_exec_req *req, struct agent_exec_fds *fds)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	fds->out = p[0];
	fds->child_out = p[1];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	fds->err = p[0];
	fds->child_err = p[1];
	if (req->flags & PROTO_EXEC_STDIN) {
		if (pipe2(p, O_CLOEXEC) < 0)
			return -errno;
		fds->child_in = p[0];
		fds->in = p[1];
	}
	return 0;
}

/* In the child: report a failed stage through report_fd and exit. */
static __attribute__((noreturn)) void agent_exec_child_fail(int report_fd, int stage, int err)
{
	struct agent_exec_report rep = {stage, err};

	(void)!write(report_fd, &rep, sizeof(rep));
	_exit(127);
}

/* What the child of agent_exec_spawn gets: it runs on the agent's memory until it execs. */
struct agent_exec_child_arg {
	const struct agent_exec_req *req;
	const struct agent_exec_fds *fds;
	int report_fd;
};

/* In the child: write s to fd, whole or not at all (no stdio: the memory is the agent's). */
static void agent_exec_child_puts(int fd, const char *s)
{
	(void)!write(fd, s, strlen(s));
}

/*
 * In the child, which shares the agent's memory (CLONE_VM | CLONE_VFORK) until it execs or
 * exits: set up stdio, the session or process group, cwd and ids, then exec. So it must not
 * allocate, touch stdio or leave anything of its own in the agent's memory; the one global it
 * changes, environ, the parent puts back. Never returns.
 */
static int agent_exec_child(void *opaque)
{
	const struct agent_exec_child_arg *arg = opaque;
	const struct agent_exec_req *req = arg->req;
	const struct agent_exec_fds *fds = arg->fds;
	int report_fd = arg->report_fd;
	char *path_env[2] = {NULL, NULL};
	struct sigaction sa;
	sigset_t empty;
	size_t i;
	int err, null_fd;

	/*
	 * Undo the agent's signal set-up: the ignored SIGPIPE, init's SIGCHLD handler (this
	 * child has its own copy of the handlers: no CLONE_SIGHAND) and the blocked SIGCHLD.
	 */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigaction(SIGPIPE, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	sigemptyset(&empty);
	sigprocmask(SIG_SETMASK, &empty, NULL);

	if (req->flags & PROTO_EXEC_PTY) {
		if (setsid() < 0 || ioctl(fds->child_out, TIOCSCTTY, 0) < 0)
			agent_exec_child_fail(report_fd, AGENT_STAGE_TTY, errno);
		if (dup2(fds->child_out, 0) < 0 || dup2(fds->child_out, 1) < 0 ||
		    dup2(fds->child_out, 2) < 0)
			agent_exec_child_fail(report_fd, AGENT_STAGE_STDIO, errno);
	} else {
		setpgid(0, 0);
		if (fds->child_in >= 0) {
			null_fd = fds->child_in;
		} else {
			null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (null_fd < 0)
				agent_exec_child_fail(report_fd, AGENT_STAGE_STDIO, errno);
		}
		if (dup2(null_fd, 0) < 0 || dup2(fds->child_out, 1) < 0 ||
		    dup2(fds->child_err, 2) < 0)
			agent_exec_child_fail(report_fd, AGENT_STAGE_STDIO, errno);
	}
	if (chdir(req->cwd[0] != '\0' ? req->cwd : "/") < 0)
		agent_exec_child_fail(report_fd, AGENT_STAGE_CHDIR, errno);
	if (req->gid != PROTO_ID_KEEP) {
		if (setgroups(0, NULL) < 0)
			agent_exec_child_fail(report_fd, AGENT_STAGE_GROUPS, errno);
		if (setgid(req->gid) < 0)
			agent_exec_child_fail(report_fd, AGENT_STAGE_GID, errno);
	}
	if (req->uid != PROTO_ID_KEEP && setuid(req->uid) < 0)
		agent_exec_child_fail(report_fd, AGENT_STAGE_UID, errno);

	/*
	 * execvpe searches the PATH of this process: take the request's, if it has one, through
	 * an environ of just that (execvpe reads it with getenv; the parent restores environ).
	 */
	for (i = 0; req->envp[i] != NULL; i++) {
		if (strncmp(req->envp[i], "PATH=", 5) == 0)
			path_env[0] = req->envp[i];
	}
	if (path_env[0] != NULL)
		environ = path_env;
	execvpe(req->argv[0], req->argv, req->envp);
	err = errno;
	if (err == ENOENT && (req->flags & PROTO_SESSION_SHELL_FALLBACK)) {
		/* argv[0] becomes /bin/sh too: busybox picks its applet by it. Our own copy of
		 * the array (a shell's few arguments): the parent's memory is shared until the
		 * exec. */
		char *sh_argv[AGENT_SHELL_ARGS_MAX + 1] = {(char *)"/bin/sh"};
		size_t n = 1;

		while (n < AGENT_SHELL_ARGS_MAX && req->argv[n] != NULL) {
			sh_argv[n] = req->argv[n];
			n++;
		}
		if (req->argv[n] == NULL) {
			execve("/bin/sh", sh_argv, req->envp);
			err = errno;
		}
	}
	agent_exec_child_puts(2, req->argv[0]);
	agent_exec_child_puts(2, ": ");
	agent_exec_child_puts(2, strerror(err));
	agent_exec_child_puts(2, "\n");
	_exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

/*
 * Start agent_exec_child(arg) as a new process the way posix_spawn does: clone with
 * CLONE_VM | CLONE_VFORK on a stack of its own, so the agent's page tables are not copied and
 * its pages not made copy-on-write for a child that execs at once (fork cost the guest about
 * as much as the rest of an exec's round trip). The agent sleeps until the child has exec'd or
 * exited. Returns the pid, or -errno.
 */
static pid_t agent_exec_spawn(struct agent_exec_child_arg *arg, size_t argc)
{
	/* execvpe may copy argv onto the stack (a script without #!): room for that too */
	size_t stack_len = AGENT_EXEC_STACK_LEN + (argc + 2) * sizeof(char *);
	char **saved_environ = environ;
	void *stack;
	pid_t pid;
	int err;

	stack_len = (stack_len + 4095) & ~(size_t)4095;
	stack = mmap(NULL, stack_len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return -errno;
	/* the stack grows down on x86-64: the child starts at its top */
	pid = clone(agent_exec_child, (char *)stack + stack_len, CLONE_VM | CLONE_VFORK | SIGCHLD,
		    arg);
	err = errno;
	environ = saved_environ;
	munmap(stack, stack_len);
	return pid < 0 ? -err : pid;
}

/*
 * Start the child of req on fds and wait for it to exec. Returns its pid, or -errno with *stage set
 * (-1: the agent's own failure, else AGENT_STAGE_* of the child).
 */
static pid_t agent_exec_launch(const struct agent_exec_req *req, struct agent_exec_fds *fds,
			       int *stage)
{
	struct agent_exec_child_arg arg = {req, fds, -1};
	struct agent_exec_report rep;
	size_t argc = 0;
	int report[2];
	ssize_t n;
	pid_t pid;

	*stage = -1;
	if (pipe2(report, O_CLOEXEC) < 0)
		return -errno;
	/* both ends are CLOEXEC: the child's copies close at its exec */
	arg.report_fd = report[1];
	while (req->argv[argc] != NULL)
		argc++;
	pid = agent_exec_spawn(&arg, argc);
	close(report[1]);
	if (pid < 0) {
		close(report[0]);
		return pid;
	}
	do {
		n = read(report[0], &rep, sizeof(rep));
	} while (n < 0 && errno == EINTR);
	close(report[0]);
	if (n == (ssize_t)sizeof(rep)) {
		/* the child exits 127 by itself; agent_reap collects it as a stranger */
		*stage = rep.stage;
		return rep.err > 0 ? -rep.err : -EIO;
	}
	return pid;
}

/* Make fd non-blocking. Returns 0 or -errno. */
static int agent_exec_nonblock(int fd)
{
	int flags;

	if (fd < 0)
		return 0;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* The message of a failed start of req, into msg. */
static void agent_exec_start_error(const struct agent_exec_req *req, int stage, int err, char *msg,
				   size_t msg_len)
{
	if (stage == AGENT_STAGE_CHDIR)
		snprintf(msg, msg_len, "chdir %s: %s", req->cwd, strerror(err));
	else if (stage >= 0 &&
		 (size_t)stage < sizeof(agent_stage_names) / sizeof(agent_stage_names[0]))
		snprintf(msg, msg_len, "%s: %s", agent_stage_names[stage], strerror(err));
	else
		snprintf(msg, msg_len, "starting %s: %s", req->argv[0], strerror(err));
}

/* Start req's child; see agent.h. */
int agent_exec_spawn_req(const struct agent_exec_req *req, struct agent_spawned *sp, char *msg,
			 size_t msg_len)
{
	struct agent_exec_fds fds = {-1, -1, -1, -1, -1, -1};
	int rc, stage = -1;
	pid_t pid;

	if (req->flags & PROTO_EXEC_PTY)
		rc = agent_exec_open_pty(req, &fds);
	else
		rc = agent_exec_open_pipes(req, &fds);
	if (rc < 0) {
		snprintf(msg, msg_len, "%s: %s", req->flags & PROTO_EXEC_PTY ? "pty" : "pipe",
			 strerror(-rc));
		goto out;
	}
	pid = agent_exec_launch(req, &fds, &stage);
	if (pid < 0) {
		rc = pid;
		agent_exec_start_error(req, stage, -rc, msg, msg_len);
		goto out;
	}
	if (!(req->flags & PROTO_EXEC_STDIN) && fds.in >= 0) {
		close(fds.in); /* the pty's dup: no stdin was asked for */
		fds.in = -1;
	}
	rc = agent_exec_nonblock(fds.out);
	if (rc == 0)
		rc = agent_exec_nonblock(fds.err);
	if (rc == 0)
		rc = agent_exec_nonblock(fds.in);
	if (rc < 0)
		log_warn("agent: exec %s: %s", req->argv[0], strerror(-rc));
	*sp = (struct agent_spawned){pid, fds.out, fds.err, fds.in};
	fds.out = fds.err = fds.in = -1;
	rc = 0;
out:
	agent_exec_close_fds(&fds);
	return rc;
}
