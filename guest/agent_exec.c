/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's exec call (see agent.h, proto.h): start a child on pipes or a new pty, stream
 * its output as STDOUT/STDERR frames while its connection is not throttled, feed it STDIN,
 * signal it, kill its process group at its timeout, and send EXIT once it has been reaped and
 * its output has reached end of file.
 *
 * The child reports a failure to set itself up (chdir, uid, the terminal) through a CLOEXEC
 * pipe that the parent reads before it answers; end of file on that pipe means the exec
 * happened. A program that cannot be executed is reported the way a shell does it: a line on
 * the child's stderr and exit status 127 (126).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

#define AGENT_EOF_CHAR	     0x04	 /* ^D: what STDIN_CLOSE sends on a pty */
#define AGENT_EXEC_STACK_LEN (64u << 10) /* the child's stack until it execs, beyond argv */

/* One running (or just ended) exec. */
struct agent_exec {
	struct agent_conn *conn;
	uint64_t id;
	pid_t pid;
	bool pty;
	bool exited;	/* reaped; status holds its wait status */
	bool timed_out; /* killed at its deadline */
	bool stdin_eof; /* close stdin once stdin_buf is written */
	int status;
	uint64_t deadline_ms; /* 0: none */
	struct agent_watch out;
	struct agent_watch err;
	struct agent_watch in;
	struct agent_buf stdin_buf;
	struct agent_exec *conn_next; /* in conn->execs */
	struct agent_exec *next;      /* in agent->execs, then agent->dead */
};

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

/* Whether c has an exec with this id; see agent.h. */
bool agent_exec_id_live(const struct agent_conn *c, uint64_t id)
{
	const struct agent_exec *e;

	for (e = c->execs; e != NULL; e = e->conn_next) {
		if (e->id == id)
			return true;
	}
	return false;
}

/* The exec of c with this id, or NULL. */
static struct agent_exec *agent_exec_find(struct agent_conn *c, uint64_t id)
{
	struct agent_exec *e;

	for (e = c->execs; e != NULL; e = e->conn_next) {
		if (e->id == id)
			return e;
	}
	return NULL;
}

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

/* Parse an EXEC payload; see agent.h. */
int agent_exec_parse(const struct proto_frame *f, struct agent_exec_req *req)
{
	const uint8_t *p = f->payload;
	uint16_t argc = proto_get_le16(p + offsetof(struct proto_exec, argc));
	uint16_t envc = proto_get_le16(p + offsetof(struct proto_exec, envc));
	size_t off = sizeof(struct proto_exec);
	const char *s;
	uint32_t i;
	int rc;

	memset(req, 0, sizeof(*req));
	req->flags = proto_get_le32(p + offsetof(struct proto_exec, flags));
	req->uid = proto_get_le32(p + offsetof(struct proto_exec, uid));
	req->gid = proto_get_le32(p + offsetof(struct proto_exec, gid));
	req->timeout_ms = proto_get_le32(p + offsetof(struct proto_exec, timeout_ms));
	req->rows = proto_get_le16(p + offsetof(struct proto_exec, rows));
	req->cols = proto_get_le16(p + offsetof(struct proto_exec, cols));
	if ((req->flags & ~PROTO_EXEC_FLAGS) != 0 || argc == 0)
		return -EPROTO;
	req->argv = calloc((size_t)argc + 1, sizeof(char *));
	req->envp = calloc((size_t)envc + 1, sizeof(char *));
	if (req->argv == NULL || req->envp == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	rc = proto_next_string(p, f->hdr.len, &off, &req->cwd);
	for (i = 0; rc == 0 && i < argc; i++) {
		rc = proto_next_string(p, f->hdr.len, &off, &s);
		req->argv[i] = (char *)s;
	}
	for (i = 0; rc == 0 && i < envc; i++) {
		rc = proto_next_string(p, f->hdr.len, &off, &s);
		req->envp[i] = (char *)s;
	}
	if (rc == 0 && req->argv[0][0] == '\0')
		rc = -EPROTO;
out:
	if (rc < 0) {
		free(req->argv);
		free(req->envp);
	}
	return rc;
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

/* Send the error of a failed start of request id to c. Returns 0 or -ENOMEM. */
static int agent_exec_send_start_error(struct agent_conn *c, uint64_t id,
				       const struct agent_exec_req *req, int stage, int err)
{
	if (stage == AGENT_STAGE_CHDIR)
		return agent_send_error(c, id, err, "chdir %s: %s", req->cwd, strerror(err));
	if (stage >= 0 && (size_t)stage < sizeof(agent_stage_names) / sizeof(agent_stage_names[0]))
		return agent_send_error(c, id, err, "%s: %s", agent_stage_names[stage],
					strerror(err));
	return agent_send_error(c, id, err, "starting %s: %s", req->argv[0], strerror(err));
}

/* EXEC; see agent.h. */
int agent_exec_start(struct agent_conn *c, const struct proto_frame *f)
{
	struct agent_exec_fds fds = {-1, -1, -1, -1, -1, -1};
	uint8_t head[sizeof(struct proto_started)] = {0};
	struct agent *a = c->agent;
	struct agent_exec_req req;
	struct agent_exec *e;
	int rc, stage = -1;
	pid_t pid;

	rc = agent_exec_parse(f, &req);
	if (rc < 0)
		return rc;
	if (req.flags & PROTO_EXEC_PTY)
		rc = agent_exec_open_pty(&req, &fds);
	else
		rc = agent_exec_open_pipes(&req, &fds);
	if (rc < 0) {
		rc = agent_send_error(c, f->hdr.id, -rc, "%s: %s",
				      req.flags & PROTO_EXEC_PTY ? "pty" : "pipe", strerror(-rc));
		goto out;
	}
	pid = agent_exec_launch(&req, &fds, &stage);
	close(fds.child_in);
	close(fds.child_out);
	close(fds.child_err);
	fds.child_in = fds.child_out = fds.child_err = -1;
	if (pid < 0) {
		rc = agent_exec_send_start_error(c, f->hdr.id, &req, stage, -pid);
		goto out;
	}

	e = calloc(1, sizeof(*e));
	if (e == NULL) {
		kill(pid, SIGKILL);
		rc = -ENOMEM;
		goto out;
	}
	e->conn = c;
	e->id = f->hdr.id;
	e->pid = pid;
	e->pty = req.flags & PROTO_EXEC_PTY;
	if (req.timeout_ms != 0)
		e->deadline_ms = agent_now_ms() + req.timeout_ms;
	e->out = (struct agent_watch){AGENT_WATCH_EXEC_OUT, fds.out, 0, e};
	e->err = (struct agent_watch){AGENT_WATCH_EXEC_ERR, fds.err, 0, e};
	e->in = (struct agent_watch){AGENT_WATCH_EXEC_IN, -1, 0, e};
	if (req.flags & PROTO_EXEC_STDIN)
		e->in.fd = fds.in;
	else if (fds.in >= 0)
		close(fds.in);
	fds.out = fds.err = fds.in = -1;
	e->conn_next = c->execs;
	c->execs = e;
	e->next = a->execs;
	a->execs = e;

	rc = agent_exec_nonblock(e->out.fd);
	if (rc == 0)
		rc = agent_exec_nonblock(e->err.fd);
	if (rc == 0)
		rc = agent_exec_nonblock(e->in.fd);
	if (rc == 0 && !c->throttled)
		rc = agent_watch_set(a, &e->out, EPOLLIN);
	if (rc == 0 && !c->throttled)
		rc = agent_watch_set(a, &e->err, EPOLLIN);
	if (rc < 0)
		log_warn("agent: exec %s: %s", req.argv[0], strerror(-rc));
	proto_put_le32(head + offsetof(struct proto_started, pid), (uint32_t)pid);
	rc = agent_send(c, PROTO_MSG_STARTED, e->id, head, sizeof(head), NULL, 0);
out:
	agent_exec_close_fds(&fds);
	free(req.argv);
	free(req.envp);
	return rc;
}

/* Take e out of its connection's and the agent's lists and onto the dead list. */
static void agent_exec_bury(struct agent *a, struct agent_exec *e)
{
	struct agent_exec **pp;

	if (e->conn != NULL) {
		for (pp = &e->conn->execs; *pp != NULL; pp = &(*pp)->conn_next) {
			if (*pp == e) {
				*pp = e->conn_next;
				break;
			}
		}
	}
	for (pp = &a->execs; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	}
	agent_watch_close(a, &e->out);
	agent_watch_close(a, &e->err);
	agent_watch_close(a, &e->in);
	e->conn = NULL;
	e->next = a->dead;
	a->dead = e;
}

/* Free the dead execs; see agent.h. */
void agent_exec_free_dead(struct agent *a)
{
	while (a->dead != NULL) {
		struct agent_exec *e = a->dead;

		a->dead = e->next;
		agent_buf_free(&e->stdin_buf);
		free(e);
	}
}

/* If e has been reaped and its output is all read, send EXIT and end it. */
static void agent_exec_maybe_finish(struct agent *a, struct agent_exec *e)
{
	uint8_t head[sizeof(struct proto_exit)] = {0};
	uint32_t code = 0, sig = 0, flags = 0;

	if (!e->exited || e->out.fd >= 0 || e->err.fd >= 0)
		return;
	if (WIFEXITED(e->status)) {
		code = (uint32_t)WEXITSTATUS(e->status);
	} else if (WIFSIGNALED(e->status)) {
		sig = (uint32_t)WTERMSIG(e->status);
		code = 128 + sig;
		flags |= PROTO_EXIT_SIGNALED;
		if (WCOREDUMP(e->status))
			flags |= PROTO_EXIT_CORE;
	}
	if (e->timed_out)
		flags |= PROTO_EXIT_TIMED_OUT;
	proto_put_le32(head + offsetof(struct proto_exit, code), code);
	proto_put_le32(head + offsetof(struct proto_exit, signal), sig);
	proto_put_le32(head + offsetof(struct proto_exit, flags), flags);
	if (e->conn != NULL)
		(void)!agent_send(e->conn, PROTO_MSG_EXIT, e->id, head, sizeof(head), NULL, 0);
	agent_exec_bury(a, e);
}

/* Read one chunk of e's stdout or stderr (w) into a frame on its connection. */
static void agent_exec_read_output(struct agent *a, struct agent_exec *e, struct agent_watch *w)
{
	uint16_t type = w == &e->err ? PROTO_MSG_STDERR : PROTO_MSG_STDOUT;
	struct agent_conn *c = e->conn;
	struct proto_hdr hdr = {.type = type, .flags = 0, .id = e->id};
	ssize_t n;

	if (agent_buf_reserve(&c->out, PROTO_HDR_LEN + PROTO_DATA_CHUNK) < 0)
		return; /* try again on the next event */
	do {
		n = read(w->fd, c->out.data + c->out.len + PROTO_HDR_LEN, PROTO_DATA_CHUNK);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n <= 0) {
		/* end of file; EIO on a pty master once the child's side is all closed */
		agent_watch_close(a, w);
		agent_exec_maybe_finish(a, e);
		return;
	}
	hdr.len = (uint32_t)n;
	proto_hdr_encode(&hdr, c->out.data + c->out.len);
	c->out.len += PROTO_HDR_LEN + (size_t)n;
}

/* Write e's pending stdin; close stdin once it is written and the client closed it. */
static void agent_exec_write_input(struct agent *a, struct agent_exec *e)
{
	struct agent_buf *b = &e->stdin_buf;

	while (agent_buf_pending(b) > 0) {
		ssize_t n = write(e->in.fd, b->data + b->off, agent_buf_pending(b));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			/* the child closed its stdin (EPIPE): drop what is left */
			b->off = b->len = 0;
			e->stdin_eof = true;
			break;
		}
		b->off += (size_t)n;
	}
	b->off = b->len = 0;
	if (e->stdin_eof)
		agent_watch_close(a, &e->in);
	else
		(void)!agent_watch_set(a, &e->in, 0);
}

/* An event on an exec's fd; see agent.h. */
void agent_exec_event(struct agent *a, struct agent_watch *w, uint32_t events)
{
	struct agent_exec *e = w->owner;

	if (w->fd < 0 || e->conn == NULL)
		return; /* closed earlier in this batch of events */
	if (w == &e->in)
		agent_exec_write_input(a, e);
	else
		agent_exec_read_output(a, e, w);
}

/* Queue bytes (or a close) for e's stdin and arm its watch. */
static void agent_exec_queue_stdin(struct agent *a, struct agent_exec *e, const uint8_t *data,
				   size_t len)
{
	struct agent_buf *b = &e->stdin_buf;

	if (len > 0) {
		if (agent_buf_reserve(b, len) < 0)
			return;
		memcpy(b->data + b->len, data, len);
		b->len += len;
	}
	if (agent_buf_pending(b) > 0 || e->stdin_eof)
		(void)!agent_watch_set(a, &e->in, EPOLLOUT);
}

/* STDIN; see agent.h. */
int agent_exec_stdin(struct agent_conn *c, const struct proto_frame *f)
{
	struct agent_exec *e = agent_exec_find(c, f->hdr.id);

	if (e == NULL || e->in.fd < 0 || e->stdin_eof)
		return 0; /* it ended, or has no stdin: the bytes have nowhere to go */
	agent_exec_queue_stdin(c->agent, e, f->payload, f->hdr.len);
	return 0;
}

/* Close e's stdin once what is queued is written (a pty gets ^D instead). */
static void agent_exec_end_stdin(struct agent *a, struct agent_exec *e)
{
	static const uint8_t eof = AGENT_EOF_CHAR;

	if (e->in.fd < 0 || e->stdin_eof)
		return;
	if (e->pty) {
		agent_exec_queue_stdin(a, e, &eof, 1);
		return;
	}
	e->stdin_eof = true;
	agent_exec_queue_stdin(a, e, NULL, 0);
}

/* STDIN_CLOSE; see agent.h. */
int agent_exec_stdin_close(struct agent_conn *c, const struct proto_frame *f)
{
	struct agent_exec *e = agent_exec_find(c, f->hdr.id);

	if (e != NULL)
		agent_exec_end_stdin(c->agent, e);
	return 0;
}

/* Whether an exec of c has too much stdin queued; see agent.h. */
bool agent_exec_stdin_full(const struct agent_conn *c)
{
	const struct agent_exec *e;

	for (e = c->execs; e != NULL; e = e->conn_next) {
		if (agent_buf_pending(&e->stdin_buf) > AGENT_OUT_HIGH)
			return true;
	}
	return false;
}

/* RESIZE; see agent.h. */
int agent_exec_resize(struct agent_conn *c, const struct proto_frame *f)
{
	struct agent_exec *e = agent_exec_find(c, f->hdr.id);
	struct winsize ws;
	int fd;

	if (e == NULL || !e->pty)
		return 0;
	fd = e->out.fd >= 0 ? e->out.fd : e->in.fd;
	if (fd < 0)
		return 0;
	memset(&ws, 0, sizeof(ws));
	ws.ws_row = proto_get_le16(f->payload + offsetof(struct proto_winsize, rows));
	ws.ws_col = proto_get_le16(f->payload + offsetof(struct proto_winsize, cols));
	if (ioctl(fd, TIOCSWINSZ, &ws) < 0)
		log_warn("agent: TIOCSWINSZ: %s", strerror(errno));
	return 0;
}

/* SIGNAL; see agent.h. */
int agent_exec_signal(struct agent_conn *c, const struct proto_frame *f)
{
	uint64_t target = proto_get_le64(f->payload + offsetof(struct proto_signal, target_id));
	uint32_t sig = proto_get_le32(f->payload + offsetof(struct proto_signal, signal));
	struct agent_exec *e = agent_exec_find(c, target);

	if (e == NULL || e->exited)
		return agent_send_error(c, f->hdr.id, ESRCH, "no running exec with id %llu",
					(unsigned long long)target);
	if (sig == 0 || sig >= (uint32_t)NSIG)
		return agent_send_error(c, f->hdr.id, EINVAL, "no signal %u", sig);
	/* the process group first (its children too); the child itself if it left it */
	if (kill(-e->pid, (int)sig) < 0 && kill(e->pid, (int)sig) < 0)
		return agent_send_error(c, f->hdr.id, errno, "kill %d: %s", (int)e->pid,
					strerror(errno));
	return agent_send_ok(c, f->hdr.id);
}

/* Is something of e still running: its process, or (once it is reaped) a process of its
 * group that holds its output open, such as `sleep 1000 &`? */
static bool agent_exec_alive(const struct agent_exec *e)
{
	return !e->exited || e->out.fd >= 0 || e->err.fd >= 0;
}

/* SIGKILL e's process group and e itself. After e was reaped its pid stays reserved while
 * its group has members, so the group kill cannot reach another group; it is only sent
 * while the output is open, i.e. while a member most likely lives. */
static void agent_exec_kill(struct agent_exec *e)
{
	if (!agent_exec_alive(e))
		return;
	kill(-e->pid, SIGKILL);
	if (!e->exited)
		kill(e->pid, SIGKILL);
}

/* A child was reaped; see agent.h. */
void agent_exec_reaped(struct agent *a, pid_t pid, int status)
{
	struct agent_exec *e;

	for (e = a->execs; e != NULL; e = e->next) {
		if (e->pid == pid && !e->exited)
			break;
	}
	if (e == NULL)
		return; /* an orphan, or a child that failed before exec */
	e->exited = true;
	e->status = status;
	agent_exec_maybe_finish(a, e);
}

/* Pause or resume the output of c's execs; see agent.h. */
void agent_exec_throttle(struct agent_conn *c)
{
	uint32_t events = c->throttled ? 0 : EPOLLIN;
	struct agent_exec *e;

	for (e = c->execs; e != NULL; e = e->conn_next) {
		(void)!agent_watch_set(c->agent, &e->out, events);
		(void)!agent_watch_set(c->agent, &e->err, events);
	}
}

/* Kill and end every exec of c; see agent.h. */
void agent_exec_drop_all(struct agent_conn *c)
{
	while (c->execs != NULL) {
		struct agent_exec *e = c->execs;

		agent_exec_kill(e);
		agent_exec_bury(c->agent, e);
	}
}

/* Kill the execs past their deadline; see agent.h. */
int agent_exec_timeouts(struct agent *a, uint64_t now_ms)
{
	uint64_t next_ms = UINT64_MAX;
	struct agent_exec *e;

	for (e = a->execs; e != NULL; e = e->next) {
		if (e->deadline_ms == 0 || e->timed_out || !agent_exec_alive(e))
			continue;
		if (now_ms >= e->deadline_ms) {
			e->timed_out = true;
			agent_exec_kill(e);
			continue;
		}
		if (e->deadline_ms - now_ms < next_ms)
			next_ms = e->deadline_ms - now_ms;
	}
	if (next_ms == UINT64_MAX)
		return -1;
	return next_ms > 60000 ? 60000 : (int)next_ms;
}
