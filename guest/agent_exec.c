/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's exec call (see agent.h, proto.h): start a child on pipes or a new pty
 * (agent_spawn.c), stream its output as STDOUT/STDERR frames while its connection is not
 * throttled, feed it STDIN, signal it, kill its process group at its timeout, and send EXIT
 * once it has been reaped and its output has reached end of file.
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

#define AGENT_EOF_CHAR 0x04 /* ^D: what STDIN_CLOSE sends on a pty */

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

/* Parse cwd, argv and env; see agent.h. */
int agent_exec_parse_strings(const uint8_t *p, size_t len, size_t off, uint16_t argc, uint16_t envc,
			     struct agent_exec_req *req)
{
	const char *s;
	uint32_t i;
	int rc;

	req->argv = NULL;
	req->envp = NULL;
	if (argc == 0)
		return -EPROTO;
	req->argv = calloc((size_t)argc + 1, sizeof(char *));
	req->envp = calloc((size_t)envc + 1, sizeof(char *));
	if (req->argv == NULL || req->envp == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	rc = proto_next_string(p, len, &off, &req->cwd);
	for (i = 0; rc == 0 && i < argc; i++) {
		rc = proto_next_string(p, len, &off, &s);
		req->argv[i] = (char *)s;
	}
	for (i = 0; rc == 0 && i < envc; i++) {
		rc = proto_next_string(p, len, &off, &s);
		req->envp[i] = (char *)s;
	}
	if (rc == 0 && req->argv[0][0] == '\0')
		rc = -EPROTO;
out:
	if (rc < 0) {
		free(req->argv);
		free(req->envp);
		req->argv = req->envp = NULL;
	}
	return rc;
}

/* Parse an EXEC payload; see agent.h. */
int agent_exec_parse(const struct proto_frame *f, struct agent_exec_req *req)
{
	const uint8_t *p = f->payload;
	uint16_t argc = proto_get_le16(p + offsetof(struct proto_exec, argc));
	uint16_t envc = proto_get_le16(p + offsetof(struct proto_exec, envc));

	memset(req, 0, sizeof(*req));
	req->flags = proto_get_le32(p + offsetof(struct proto_exec, flags));
	req->uid = proto_get_le32(p + offsetof(struct proto_exec, uid));
	req->gid = proto_get_le32(p + offsetof(struct proto_exec, gid));
	req->timeout_ms = proto_get_le32(p + offsetof(struct proto_exec, timeout_ms));
	req->rows = proto_get_le16(p + offsetof(struct proto_exec, rows));
	req->cols = proto_get_le16(p + offsetof(struct proto_exec, cols));
	if ((req->flags & ~PROTO_EXEC_FLAGS) != 0)
		return -EPROTO;
	return agent_exec_parse_strings(p, f->hdr.len, sizeof(struct proto_exec), argc, envc, req);
}

/* EXEC; see agent.h. */
int agent_exec_start(struct agent_conn *c, const struct proto_frame *f)
{
	uint8_t head[sizeof(struct proto_started)] = {0};
	struct agent *a = c->agent;
	struct agent_exec_req req;
	struct agent_spawned sp;
	struct agent_exec *e;
	char msg[256];
	int rc;

	rc = agent_exec_parse(f, &req);
	if (rc < 0)
		return rc;
	rc = agent_exec_spawn_req(&req, &sp, msg, sizeof(msg));
	if (rc < 0) {
		rc = agent_send_error(c, f->hdr.id, -rc, "%s", msg);
		goto out;
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL) {
		kill(sp.pid, SIGKILL);
		close(sp.out_fd);
		if (sp.err_fd >= 0)
			close(sp.err_fd);
		if (sp.in_fd >= 0)
			close(sp.in_fd);
		rc = -ENOMEM;
		goto out;
	}
	e->conn = c;
	e->id = f->hdr.id;
	e->pid = sp.pid;
	e->pty = req.flags & PROTO_EXEC_PTY;
	if (req.timeout_ms != 0)
		e->deadline_ms = agent_now_ms() + req.timeout_ms;
	e->out = (struct agent_watch){AGENT_WATCH_EXEC_OUT, sp.out_fd, 0, e};
	e->err = (struct agent_watch){AGENT_WATCH_EXEC_ERR, sp.err_fd, 0, e};
	e->in = (struct agent_watch){AGENT_WATCH_EXEC_IN, sp.in_fd, 0, e};
	e->conn_next = c->execs;
	c->execs = e;
	e->next = a->execs;
	a->execs = e;

	if (!c->throttled)
		rc = agent_watch_set(a, &e->out, EPOLLIN);
	if (rc == 0 && !c->throttled)
		rc = agent_watch_set(a, &e->err, EPOLLIN);
	if (rc < 0)
		log_warn("agent: exec %s: %s", req.argv[0], strerror(-rc));
	proto_put_le32(head + offsetof(struct proto_started, pid), (uint32_t)sp.pid);
	rc = agent_send(c, PROTO_MSG_STARTED, e->id, head, sizeof(head), NULL, 0);
out:
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

/* The EXIT payload of a wait status; see agent.h. */
void agent_exec_exit_encode(int status, bool timed_out, uint8_t head[sizeof(struct proto_exit)])
{
	uint32_t code = 0, sig = 0, flags = 0;

	if (WIFEXITED(status)) {
		code = (uint32_t)WEXITSTATUS(status);
	} else if (WIFSIGNALED(status)) {
		sig = (uint32_t)WTERMSIG(status);
		code = 128 + sig;
		flags |= PROTO_EXIT_SIGNALED;
		if (WCOREDUMP(status))
			flags |= PROTO_EXIT_CORE;
	}
	if (timed_out)
		flags |= PROTO_EXIT_TIMED_OUT;
	memset(head, 0, sizeof(struct proto_exit));
	proto_put_le32(head + offsetof(struct proto_exit, code), code);
	proto_put_le32(head + offsetof(struct proto_exit, signal), sig);
	proto_put_le32(head + offsetof(struct proto_exit, flags), flags);
}

/* If e has been reaped and its output is all read, send EXIT and end it. */
static void agent_exec_maybe_finish(struct agent *a, struct agent_exec *e)
{
	uint8_t head[sizeof(struct proto_exit)];

	if (!e->exited || e->out.fd >= 0 || e->err.fd >= 0)
		return;
	agent_exec_exit_encode(e->status, e->timed_out, head);
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
