/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest agent's loop (see agent.h): accepts connections, decodes their frames, dispatches
 * each through a table indexed by message type, queues replies with flow control, and reaps
 * every child through a signalfd for SIGCHLD.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

#define AGENT_MAX_EVENTS 32
#define AGENT_READ_LEN	 (64u << 10) /* bytes read from a client at a time */

/* Make room for n more bytes in b; see agent.h. */
int agent_buf_reserve(struct agent_buf *b, size_t n)
{
	uint8_t *grown;
	size_t cap;

	if (b->off > 0 && (b->off == b->len || b->len + n > b->cap)) {
		memmove(b->data, b->data + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
	}
	if (b->len + n <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 4096;
	while (cap < b->len + n)
		cap *= 2;
	grown = realloc(b->data, cap);
	if (grown == NULL)
		return -ENOMEM;
	b->data = grown;
	b->cap = cap;
	return 0;
}

/* Bytes pending in b; see agent.h. */
size_t agent_buf_pending(const struct agent_buf *b)
{
	return b->len - b->off;
}

/* Free b; see agent.h. */
void agent_buf_free(struct agent_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

/* Set w's epoll interest; see agent.h. */
int agent_watch_set(struct agent *a, struct agent_watch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};

	int op;

	if (w->fd < 0 || w->events == events)
		return 0;
	if (events == 0)
		op = EPOLL_CTL_DEL;
	else
		op = w->events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
	if (epoll_ctl(a->epoll_fd, op, w->fd, &ev) < 0)
		return -errno;
	w->events = events;
	return 0;
}

/* Remove w from epoll and close its fd; see agent.h. */
void agent_watch_close(struct agent *a, struct agent_watch *w)
{
	if (w->fd < 0)
		return;
	if (w->events != 0)
		epoll_ctl(a->epoll_fd, EPOLL_CTL_DEL, w->fd, NULL);
	close(w->fd);
	w->fd = -1;
	w->events = 0;
}

/* The CLOCK_MONOTONIC time in ms; see agent.h. */
uint64_t agent_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * Send what c has queued, without blocking. A hard error closes the connection (marked
 * closing with nothing left to send).
 */
static void agent_conn_flush(struct agent_conn *c)
{
	while (agent_buf_pending(&c->out) > 0) {
		ssize_t n = send(c->watch.fd, c->out.data + c->out.off, agent_buf_pending(&c->out),
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			c->closing = true;
			c->out.off = c->out.len = 0;
			return;
		}
		c->out.off += (size_t)n;
	}
	c->out.off = c->out.len = 0;
}

/* Queue one frame on c; see agent.h. */
int agent_send(struct agent_conn *c, uint16_t type, uint64_t id, const void *head,
	       uint32_t head_len, const void *tail, uint32_t tail_len)
{
	struct proto_hdr hdr = {.len = head_len + tail_len, .type = type, .flags = 0, .id = id};
	uint8_t *p;

	if (agent_buf_reserve(&c->out, PROTO_HDR_LEN + (size_t)head_len + tail_len) < 0) {
		c->closing = true;
		return -ENOMEM;
	}
	p = c->out.data + c->out.len;
	proto_hdr_encode(&hdr, p);
	if (head_len > 0)
		memcpy(p + PROTO_HDR_LEN, head, head_len);
	if (tail_len > 0)
		memcpy(p + PROTO_HDR_LEN + head_len, tail, tail_len);
	c->out.len += PROTO_HDR_LEN + (size_t)head_len + tail_len;
	if (agent_buf_pending(&c->out) >= AGENT_OUT_LOW)
		agent_conn_flush(c);
	return 0;
}

/* Send ERROR; see agent.h. */
int agent_send_error(struct agent_conn *c, uint64_t id, int err, const char *fmt, ...)
{
	uint8_t head[sizeof(struct proto_error)] = {0};
	char msg[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	proto_put_le32(head + offsetof(struct proto_error, err), (uint32_t)err);
	return agent_send(c, PROTO_MSG_ERROR, id, head, sizeof(head), msg, (uint32_t)n);
}

/* Send OK; see agent.h. */
int agent_send_ok(struct agent_conn *c, uint64_t id)
{
	return agent_send(c, PROTO_MSG_OK, id, NULL, 0, NULL, 0);
}

/* Whether id is live on c; see agent.h. */
bool agent_conn_id_live(const struct agent_conn *c, uint64_t id)
{
	return agent_exec_id_live(c, id) || agent_file_id_live(c, id) ||
	       agent_session_id_live(c, id);
}

/* Unlink c from the agent, end all its calls and free it. */
/* Take the listening socket out of epoll (it would be readable, and accept would fail,
 * forever) until a connection goes away. */
static void agent_accept_pause(struct agent *a, const char *why)
{
	if (a->accept_paused)
		return;
	log_warn("agent: not accepting connections for now: %s", why);
	if (agent_watch_set(a, &a->listen_watch, 0) == 0)
		a->accept_paused = true;
}

static void agent_conn_free(struct agent_conn *c)
{
	struct agent *a = c->agent;
	struct agent_conn **pp;

	for (pp = &c->agent->conns; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	agent_exec_drop_all(c);
	agent_file_drop_all(c);
	agent_session_detach_all(c);
	agent_watch_close(c->agent, &c->watch);
	proto_decoder_free(&c->dec);
	agent_buf_free(&c->out);
	free(c);
	a->nconns--;
	if (a->accept_paused && agent_watch_set(a, &a->listen_watch, EPOLLIN) == 0)
		a->accept_paused = false;
}

/*
 * A protocol error on c: answer ERROR on id 0 with why, end every call of c and close it once
 * the error is sent.
 */
static void agent_conn_fail(struct agent_conn *c, int err, const char *why)
{
	if (!c->closing)
		(void)!agent_send_error(c, 0, -err, "protocol error: %s", why);
	c->closing = true;
	agent_exec_drop_all(c);
	agent_file_drop_all(c);
	agent_session_detach_all(c);
}

/* The client went away: end every call of c and close it without sending anything more. */
static void agent_conn_drop(struct agent_conn *c)
{
	c->closing = true;
	c->out.off = c->out.len = 0;
	agent_exec_drop_all(c);
	agent_file_drop_all(c);
	agent_session_detach_all(c);
}

/* Re-evaluate c; see agent.h. Frees c when it is done (callers must not touch it after). */
void agent_conn_update(struct agent_conn *c)
{
	bool was_throttled = c->throttled;
	uint32_t events = 0;

	agent_conn_flush(c);
	if (!c->throttled && agent_buf_pending(&c->out) > AGENT_OUT_HIGH)
		c->throttled = true;
	else if (c->throttled && agent_buf_pending(&c->out) <= AGENT_OUT_LOW)
		c->throttled = false;
	if (c->throttled != was_throttled && !c->closing)
		agent_exec_throttle(c);
	/* pump file reads until the socket is full: a pump that the socket drains at once would
	 * otherwise leave no EPOLLOUT to wake the next one */
	while (!c->throttled && !c->closing && c->freads != NULL) {
		agent_file_pump(c);
		agent_conn_flush(c);
		if (agent_buf_pending(&c->out) > 0)
			break;
	}
	/* the same for the output of the sessions c is attached to */
	while (!c->closing && c->attaches != NULL && agent_session_pump(c)) {
		agent_conn_flush(c);
		if (agent_buf_pending(&c->out) > 0)
			break;
	}
	if (c->closing && agent_buf_pending(&c->out) == 0) {
		agent_conn_free(c);
		return;
	}
	if (!c->closing && !c->throttled && !agent_exec_stdin_full(c) &&
	    !agent_session_stdin_full(c))
		events |= EPOLLIN;
	if (agent_buf_pending(&c->out) > 0)
		events |= EPOLLOUT;
	if (agent_watch_set(c->agent, &c->watch, events) < 0) {
		agent_conn_free(c);
		return;
	}
}

/* HELLO: check the client's version and answer with ours. */
static int agent_handle_hello(struct agent_conn *c, const struct proto_frame *f)
{
	uint8_t head[sizeof(struct proto_hello)];
	uint32_t version = proto_get_le32(f->payload + offsetof(struct proto_hello, version));

	if (c->hello_done || f->hdr.id != 0)
		return -EPROTO;
	if (version != PROTO_VERSION) {
		(void)!agent_send_error(c, 0, EPROTONOSUPPORT,
					"protocol version %u not supported (agent speaks %u)",
					version, PROTO_VERSION);
		c->closing = true;
		return 0;
	}
	c->hello_done = true;
	proto_put_le32(head + offsetof(struct proto_hello, version), PROTO_VERSION);
	proto_put_le32(head + offsetof(struct proto_hello, max_payload), PROTO_MAX_PAYLOAD);
	return agent_send(c, PROTO_MSG_HELLO, 0, head, sizeof(head), NULL, 0);
}

/* PING: answer PONG with the guest's uptime. */
static int agent_handle_ping(struct agent_conn *c, const struct proto_frame *f)
{
	uint8_t head[sizeof(struct proto_pong)];
	struct timespec ts = {0, 0};

	clock_gettime(CLOCK_BOOTTIME, &ts);
	proto_put_le64(head + offsetof(struct proto_pong, uptime_ms),
		       (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
	return agent_send(c, PROTO_MSG_PONG, f->hdr.id, head, sizeof(head), NULL, 0);
}

/*
 * SET_CLOCK: step CLOCK_REALTIME to the host's time. A restored or forked VM's clock resumes
 * from the moment of its snapshot; CLOCK_MONOTONIC (the exec timeouts) is not touched.
 */
static int agent_handle_set_clock(struct agent_conn *c, const struct proto_frame *f)
{
	const uint8_t *p = f->payload;
	uint64_t sec = proto_get_le64(p + offsetof(struct proto_set_clock, sec));
	uint32_t nsec = proto_get_le32(p + offsetof(struct proto_set_clock, nsec));
	uint32_t reserved = proto_get_le32(p + offsetof(struct proto_set_clock, reserved));
	struct timespec ts;
	int err;

	if (nsec >= 1000000000u || reserved != 0 || sec > (uint64_t)INT64_MAX)
		return agent_send_error(c, f->hdr.id, EINVAL,
					"set clock: invalid time (sec %llu, nsec %u, reserved %u)",
					(unsigned long long)sec, nsec, reserved);
	ts.tv_sec = (time_t)sec;
	ts.tv_nsec = (long)nsec;
	if (clock_settime(CLOCK_REALTIME, &ts) < 0) {
		err = errno;
		return agent_send_error(c, f->hdr.id, err, "set clock: %s", strerror(err));
	}
	return agent_send_ok(c, f->hdr.id);
}

/* SHUTDOWN: answer OK, flush, then ask the config's shutdown hook. */
static int agent_handle_shutdown(struct agent_conn *c, const struct proto_frame *f)
{
	uint32_t flags = proto_get_le32(f->payload + offsetof(struct proto_shutdown, flags));
	int rc;

	if (c->agent->cfg->shutdown == NULL)
		return agent_send_error(c, f->hdr.id, ENOSYS, "shutdown is not available here");
	rc = agent_send_ok(c, f->hdr.id);
	if (rc < 0)
		return rc;
	agent_conn_flush(c);
	rc = c->agent->cfg->shutdown(flags);
	return agent_send_error(c, f->hdr.id, -rc, "shutdown: %s", strerror(-rc));
}

/* STDIN, STDIN_CLOSE, RESIZE: to the session attached as that id, else to the exec. */
static int agent_handle_stdin(struct agent_conn *c, const struct proto_frame *f)
{
	if (agent_session_id_live(c, f->hdr.id))
		return agent_session_stdin(c, f);
	return agent_exec_stdin(c, f);
}

static int agent_handle_stdin_close(struct agent_conn *c, const struct proto_frame *f)
{
	if (agent_session_id_live(c, f->hdr.id))
		return agent_session_stdin_close(c, f);
	return agent_exec_stdin_close(c, f);
}

static int agent_handle_resize(struct agent_conn *c, const struct proto_frame *f)
{
	if (agent_session_id_live(c, f->hdr.id))
		return agent_session_resize(c, f);
	return agent_exec_resize(c, f);
}

/* SIGNAL: its target is an attachment of c to a session, or an exec of c. */
static int agent_handle_signal(struct agent_conn *c, const struct proto_frame *f)
{
	uint64_t target = proto_get_le64(f->payload + offsetof(struct proto_signal, target_id));

	if (agent_session_id_live(c, target))
		return agent_session_signal(c, f, target);
	return agent_exec_signal(c, f);
}

/* A handler for one client-to-agent message type. Returns 0 or -errno (protocol error). */
typedef int (*agent_handler_fn)(struct agent_conn *c, const struct proto_frame *f);

/* What the agent does with each message type; NULL: the type is not for the agent. */
struct agent_handler {
	agent_handler_fn fn;
	bool new_call; /* the frame starts a call: its id must be non-zero and not live */
};

static const struct agent_handler agent_handlers[PROTO_MSG_MAX + 1] = {
	[PROTO_MSG_HELLO] = {agent_handle_hello, false},
	[PROTO_MSG_PING] = {agent_handle_ping, true},
	[PROTO_MSG_EXEC] = {agent_exec_start, true},
	[PROTO_MSG_STDIN] = {agent_handle_stdin, false},
	[PROTO_MSG_STDIN_CLOSE] = {agent_handle_stdin_close, false},
	[PROTO_MSG_RESIZE] = {agent_handle_resize, false},
	[PROTO_MSG_SIGNAL] = {agent_handle_signal, true},
	[PROTO_MSG_FILE_WRITE] = {agent_file_write, true},
	[PROTO_MSG_FILE_READ] = {agent_file_read, true},
	[PROTO_MSG_DATA] = {agent_file_data, false},
	[PROTO_MSG_END] = {agent_file_end, false},
	[PROTO_MSG_STAT] = {agent_file_stat, true},
	[PROTO_MSG_LIST] = {agent_file_list, true},
	[PROTO_MSG_MKDIR] = {agent_file_mkdir, true},
	[PROTO_MSG_REMOVE] = {agent_file_remove, true},
	[PROTO_MSG_SYNC] = {agent_file_sync, true},
	[PROTO_MSG_RESEED] = {agent_file_reseed, true},
	[PROTO_MSG_SHUTDOWN] = {agent_handle_shutdown, true},
	[PROTO_MSG_SET_CLOCK] = {agent_handle_set_clock, true},
	[PROTO_MSG_SESSION_EXEC] = {agent_session_exec, true},
	[PROTO_MSG_SESSION_ATTACH] = {agent_session_attach, true},
	[PROTO_MSG_SESSION_DETACH] = {agent_session_detach, false},
	[PROTO_MSG_SESSION_LIST] = {agent_session_list, true},
};

/* Whether the agent takes frame f on c now; see agent.h. */
int agent_frame_check(const struct agent_conn *c, const struct proto_frame *f, const char **why)
{
	const struct agent_handler *h = NULL;

	if (f->hdr.type <= PROTO_MSG_MAX)
		h = &agent_handlers[f->hdr.type];
	if (h == NULL || h->fn == NULL) {
		*why = "message type not accepted by the agent";
		return -EPROTO;
	}
	if (!c->hello_done && f->hdr.type != PROTO_MSG_HELLO) {
		*why = "the first frame must be HELLO";
		return -EPROTO;
	}
	if (h->new_call && (f->hdr.id == 0 || agent_conn_id_live(c, f->hdr.id))) {
		*why = f->hdr.id == 0 ? "a call with id 0" : "a call with the id of a live call";
		return -EPROTO;
	}
	return 0;
}

/* Dispatch one decoded frame of c. A protocol error fails the connection. */
static void agent_conn_dispatch(struct agent_conn *c, const struct proto_frame *f)
{
	const struct agent_handler *h = NULL;
	const char *why;
	int rc;

	if (agent_frame_check(c, f, &why) < 0)
		goto fail;
	h = &agent_handlers[f->hdr.type];
	rc = h->fn(c, f);
	if (rc == -ENOMEM) {
		why = "out of memory";
		goto fail;
	}
	if (rc < 0) {
		why = "malformed payload";
		goto fail;
	}
	return;
fail:
	log_warn("agent: closing a connection: %s (%s, id %llu)", why,
		 proto_type_name(f->hdr.type) ? proto_type_name(f->hdr.type) : "?",
		 (unsigned long long)f->hdr.id);
	agent_conn_fail(c, -EPROTO, why);
}

/* Read what the client sent and dispatch every complete frame. */
static void agent_conn_read(struct agent_conn *c)
{
	static uint8_t buf[AGENT_READ_LEN];
	ssize_t n = recv(c->watch.fd, buf, sizeof(buf), MSG_DONTWAIT);
	size_t pos = 0;

	if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n <= 0) {
		/* the client is gone (a client never half-closes): end everything it started */
		agent_conn_drop(c);
		return;
	}
	while (pos < (size_t)n && !c->closing) {
		struct proto_frame f;
		size_t used = 0;
		int rc = proto_decoder_feed(&c->dec, buf + pos, (size_t)n - pos, &used, &f);

		pos += used;
		if (rc < 0) {
			log_warn("agent: closing a connection: %s", proto_decoder_error(&c->dec));
			agent_conn_fail(c, rc, proto_decoder_error(&c->dec));
			return;
		}
		if (rc == 1)
			agent_conn_dispatch(c, &f);
	}
}

/* Accept every pending connection. */
static void agent_accept(struct agent *a)
{
	for (;;) {
		struct agent_conn *c;
		int fd;

		if (a->nconns >= AGENT_CONNS_MAX) {
			agent_accept_pause(a, "too many connections");
			return;
		}
		fd = accept4(a->listen_watch.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				agent_accept_pause(a, strerror(errno));
			else if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_warn("agent: accept: %s", strerror(errno));
			return;
		}
		c = calloc(1, sizeof(*c));
		if (c == NULL) {
			close(fd);
			agent_accept_pause(a, "out of memory");
			return;
		}
		a->nconns++;
		c->agent = a;
		c->watch = (struct agent_watch){AGENT_WATCH_CONN, fd, 0, c};
		proto_decoder_init(&c->dec);
		c->next = a->conns;
		a->conns = c;
		agent_conn_update(c);
	}
}

/* SIGCHLD: drain the signalfd, then reap every child that exited. */
static void agent_reap(struct agent *a)
{
	struct signalfd_siginfo si;
	int status;
	pid_t pid;

	while (read(a->signal_watch.fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
	for (;;) {
		pid = waitpid(-1, &status, WNOHANG);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid <= 0)
			break;
		if (!agent_session_reaped(a, pid, status))
			agent_exec_reaped(a, pid, status);
	}
}

/* Re-evaluate every connection: throttles, file pumps, closes. */
static void agent_update_all(struct agent *a)
{
	struct agent_conn *c = a->conns;

	while (c != NULL) {
		struct agent_conn *next = c->next;

		agent_conn_update(c);
		c = next;
	}
	agent_exec_free_dead(a);
	agent_session_free_dead(a);
}

/* Handle one epoll event. */
static void agent_event(struct agent *a, struct agent_watch *w, uint32_t events)
{
	struct agent_conn *c;

	switch (w->kind) {
	case AGENT_WATCH_LISTEN:
		agent_accept(a);
		break;
	case AGENT_WATCH_SIGNAL:
		agent_reap(a);
		break;
	case AGENT_WATCH_CONN:
		c = w->owner;
		if (events & EPOLLIN)
			agent_conn_read(c);
		else if (events & (EPOLLERR | EPOLLHUP))
			agent_conn_drop(c);
		break;
	case AGENT_WATCH_EXEC_OUT:
	case AGENT_WATCH_EXEC_ERR:
	case AGENT_WATCH_EXEC_IN:
		agent_exec_event(a, w, events);
		break;
	case AGENT_WATCH_SESSION_OUT:
	case AGENT_WATCH_SESSION_ERR:
	case AGENT_WATCH_SESSION_IN:
		agent_session_event(a, w, events);
		break;
	}
}

/* Block SIGCHLD into a signalfd and ignore SIGPIPE. Returns the signalfd or -errno. */
static int agent_setup_signals(void)
{
	struct sigaction sa;
	sigset_t mask;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	if (sigaction(SIGPIPE, &sa, NULL) < 0)
		return -errno;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -errno;
	fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	return fd;
}

/* Run the agent forever; see agent.h. */
int agent_run(const struct agent_config *cfg)
{
	struct epoll_event events[AGENT_MAX_EVENTS];
	struct agent a;
	int rc, flags;

	memset(&a, 0, sizeof(a));
	a.cfg = cfg;
	a.listen_watch = (struct agent_watch){AGENT_WATCH_LISTEN, cfg->listen_fd, 0, NULL};
	a.signal_watch = (struct agent_watch){AGENT_WATCH_SIGNAL, -1, 0, NULL};
	flags = fcntl(cfg->listen_fd, F_GETFL);
	if (flags < 0 || fcntl(cfg->listen_fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
	    fcntl(cfg->listen_fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	rc = agent_setup_signals();
	if (rc < 0)
		return rc;
	a.signal_watch.fd = rc;
	a.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (a.epoll_fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = agent_watch_set(&a, &a.listen_watch, EPOLLIN);
	if (rc == 0)
		rc = agent_watch_set(&a, &a.signal_watch, EPOLLIN);
	if (rc < 0)
		goto out;
	/* children that exited before the signalfd existed */
	agent_reap(&a);

	for (;;) {
		uint64_t now_ms = agent_now_ms();
		int timeout_ms = agent_exec_timeouts(&a, now_ms);
		int session_ms = agent_session_timeouts(&a, now_ms);
		int n, i;

		if (session_ms >= 0 && (timeout_ms < 0 || session_ms < timeout_ms))
			timeout_ms = session_ms;
		agent_session_free_dead(&a);
		n = epoll_wait(a.epoll_fd, events, AGENT_MAX_EVENTS, timeout_ms);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto out;
		}
		for (i = 0; i < n; i++)
			agent_event(&a, events[i].data.ptr, events[i].events);
		agent_update_all(&a);
	}
out:
	if (a.epoll_fd >= 0)
		close(a.epoll_fd);
	close(a.signal_watch.fd);
	return rc;
}
