/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's command sessions (see agent.h, proto.h, docs/agent-protocol.md "Command
 * sessions"): a program started by SESSION_EXEC under a command id outlives the call and the
 * connection that started it. Its output is stored as it comes, made valid UTF-8, in a ring of
 * the last AGENT_SESSION_RING bytes per stream, with absolute offsets; any number of calls (up
 * to AGENT_SESSION_ATTACH_MAX, on any connections) attach to it by id, each replayed from its
 * own offsets and then fed live, and each ends with the session's EXIT or a SESSION_DETACH.
 * Its timers: a deadline (timeout_ms), an idle timeout while nobody is attached, and a ttl that
 * keeps an ended session for replay.
 *
 * Flow control: without attachments the pipes are always read (a detached command never
 * blocks on its output; the ring forgets the oldest bytes). With attachments a pipe is read
 * only while the ring has room that no attachment still has to be sent, so a slow connection
 * (throttled by agent.c) pauses its session's pipes as EXEC does.
 *
 * This file does not spawn (agent_exec_spawn_req does) and does not run EXEC's calls.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

#define AGENT_SESSION_EOF_CHAR 0x04 /* ^D: what STDIN_CLOSE sends on a pty */
/* Raw bytes read from a pipe at a time: sanitised, they grow at most 3 times (U+FFFD). */
#define AGENT_SESSION_READ_LEN (PROTO_DATA_CHUNK)
/* A pipe is read only when the ring has room for this much sanitised output. */
#define AGENT_SESSION_READ_MIN 64u

/* One output stream of a session: its pipe, the ring of what it wrote, the UTF-8 tail. */
struct agent_stream {
	struct agent_watch watch;
	struct agent_ring ring;
	uint8_t tail[4];  /* an incomplete character read last, not stored yet */
	uint8_t tail_len; /* 0 to 3 */
};

/* One session. */
struct agent_session {
	struct agent *agent;
	uint8_t id[PROTO_SESSION_ID_MAX];
	uint16_t id_len;
	pid_t pid;
	uint32_t flags; /* PROTO_SESSION_FLAGS */
	bool exited;	/* reaped; status holds its wait status */
	bool finished;	/* exited and both streams at end of file: EXIT may go */
	bool killed;	/* killed by a timer or a disconnect: its timers stop */
	bool timed_out; /* killed at its deadline */
	bool stdin_eof; /* close stdin once stdin_buf is written */
	int status;
	uint32_t idle_timeout_s;
	uint32_t ttl_s;
	uint64_t deadline_ms;	/* CLOCK_MONOTONIC; 0: none */
	uint64_t idle_since_ms; /* when its last attachment went (while it has none) */
	uint64_t finished_ms;
	uint64_t started_real_ms;  /* CLOCK_REALTIME, for SESSION_LIST */
	struct agent_stream st[2]; /* stdout, stderr (never written with a pty) */
	struct agent_watch in;
	struct agent_buf stdin_buf;
	struct agent_attach *attaches;
	unsigned nattach;
	struct agent_session *next; /* in agent->sessions, then agent->sessions_dead */
};

/* One call attached to a session: where it is in each stream. */
struct agent_attach {
	struct agent_session *s;
	struct agent_conn *c;
	uint64_t id;		     /* the call's id on c */
	uint64_t cur[2];	     /* the next offset to send of stdout, stderr */
	struct agent_attach *s_next; /* in s->attaches */
	struct agent_attach *c_next; /* in c->attaches */
};

/* Bytes the ring of stream k can take without dropping any an attachment has yet to get. */
static size_t agent_session_room(const struct agent_session *s, int k)
{
	const struct agent_stream *st = &s->st[k];
	uint64_t lag = 0;
	const struct agent_attach *t;

	for (t = s->attaches; t != NULL; t = t->s_next) {
		uint64_t cur = t->cur[k] < agent_ring_start(&st->ring) ? agent_ring_start(&st->ring)
								       : t->cur[k];

		if (cur < st->ring.end && st->ring.end - cur > lag)
			lag = st->ring.end - cur;
	}
	return AGENT_SESSION_RING - (size_t)lag;
}

/* --- lifetime --- */

/* Whether something of s still runs: its process, or a member of its group that holds its
 * output open. */
static bool agent_session_alive(const struct agent_session *s)
{
	return !s->exited || s->st[0].watch.fd >= 0 || s->st[1].watch.fd >= 0;
}

/* SIGKILL s's process group and s itself (see agent_exec_kill for why the group is safe). */
static void agent_session_kill(struct agent_session *s)
{
	if (!agent_session_alive(s))
		return;
	kill(-s->pid, SIGKILL);
	if (!s->exited)
		kill(s->pid, SIGKILL);
	s->killed = true;
}

/* Set the epoll interest of s's pipes from the room in their rings. */
static void agent_session_arm(struct agent_session *s)
{
	int k;

	for (k = 0; k < 2; k++) {
		uint32_t ev = agent_session_room(s, k) >= AGENT_SESSION_READ_MIN ? EPOLLIN : 0;

		if (agent_watch_set(s->agent, &s->st[k].watch, ev) < 0)
			log_warn("agent: session pipe: epoll: %s", strerror(errno));
	}
}

/* The session whose command id is id[0, len), or NULL. */
static struct agent_session *agent_session_find(struct agent *a, const uint8_t *id, size_t len)
{
	struct agent_session *s;

	for (s = a->sessions; s != NULL; s = s->next) {
		if (s->id_len == len && memcmp(s->id, id, len) == 0)
			return s;
	}
	return NULL;
}

/* Whether id[0, len) is the id of a session forgotten at its ttl (or evicted). */
static bool agent_session_expired(const struct agent *a, const uint8_t *id, size_t len)
{
	unsigned i;

	for (i = 0; i < AGENT_SESSION_EXPIRED_MAX; i++) {
		if (a->expired_len[i] == len && memcmp(a->expired[i], id, len) == 0)
			return true;
	}
	return false;
}

/* Forget s (ended, nobody attached): its id is remembered as expired, it is freed after the
 * current batch of events. */
static void agent_session_forget(struct agent *a, struct agent_session *s)
{
	struct agent_session **pp;
	unsigned slot = a->expired_next;

	for (pp = &a->sessions; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	a->nsessions--;
	memcpy(a->expired[slot], s->id, s->id_len);
	a->expired_len[slot] = (uint8_t)s->id_len;
	a->expired_next = (slot + 1) % AGENT_SESSION_EXPIRED_MAX;
	agent_watch_close(a, &s->st[0].watch);
	agent_watch_close(a, &s->st[1].watch);
	agent_watch_close(a, &s->in);
	s->next = a->sessions_dead;
	a->sessions_dead = s;
}

/* Free the forgotten sessions; see agent.h. */
void agent_session_free_dead(struct agent *a)
{
	while (a->sessions_dead != NULL) {
		struct agent_session *s = a->sessions_dead;

		a->sessions_dead = s->next;
		agent_ring_free(&s->st[0].ring);
		agent_ring_free(&s->st[1].ring);
		agent_buf_free(&s->stdin_buf);
		free(s);
	}
}

/* If s has been reaped and its output is all read, it is finished: its attachments get EXIT
 * once they have its output, and its ttl starts. */
static void agent_session_maybe_finish(struct agent_session *s)
{
	if (s->finished || !s->exited || s->st[0].watch.fd >= 0 || s->st[1].watch.fd >= 0)
		return;
	s->finished = true;
	s->finished_ms = agent_now_ms();
	agent_watch_close(s->agent, &s->in);
}

/* A child was reaped; see agent.h. */
bool agent_session_reaped(struct agent *a, pid_t pid, int status)
{
	struct agent_session *s;

	for (s = a->sessions; s != NULL; s = s->next) {
		if (s->pid == pid && !s->exited) {
			s->exited = true;
			s->status = status;
			agent_session_maybe_finish(s);
			return true;
		}
	}
	return false;
}

/* --- attachments --- */

/* The attachment of c with call id id, or NULL. */
static struct agent_attach *agent_attach_find(const struct agent_conn *c, uint64_t id)
{
	struct agent_attach *t;

	for (t = c->attaches; t != NULL; t = t->c_next) {
		if (t->id == id)
			return t;
	}
	return NULL;
}

/* Whether id is an attachment of c; see agent.h. */
bool agent_session_id_live(const struct agent_conn *c, uint64_t id)
{
	return agent_attach_find(c, id) != NULL;
}

/* Unlink and free t. by_exit: it ended with EXIT; else it was detached, and a running
 * KILL_ON_DISCONNECT session left with no attachment is killed. */
static void agent_attach_end(struct agent_attach *t, bool by_exit)
{
	struct agent_session *s = t->s;
	struct agent_attach **pp;

	for (pp = &s->attaches; *pp != NULL; pp = &(*pp)->s_next) {
		if (*pp == t) {
			*pp = t->s_next;
			break;
		}
	}
	for (pp = &t->c->attaches; *pp != NULL; pp = &(*pp)->c_next) {
		if (*pp == t) {
			*pp = t->c_next;
			break;
		}
	}
	free(t);
	s->nattach--;
	if (s->nattach == 0) {
		s->idle_since_ms = agent_now_ms();
		if (!by_exit && (s->flags & PROTO_SESSION_KILL_ON_DISCONNECT))
			agent_session_kill(s);
	}
	agent_session_arm(s);
}

/* Attach call id of c to s from the offsets: STARTED now, the output by agent_session_pump. */
static int agent_session_attach_call(struct agent_conn *c, struct agent_session *s, uint64_t id,
				     uint64_t off_out, uint64_t off_err)
{
	uint8_t head[sizeof(struct proto_started)] = {0};
	struct agent_attach *t;

	if (s->nattach >= AGENT_SESSION_ATTACH_MAX)
		return agent_send_error(c, id, EAGAIN, "too many attachments (%u) to this command",
					AGENT_SESSION_ATTACH_MAX);
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	t->s = s;
	t->c = c;
	t->id = id;
	t->cur[0] = off_out;
	t->cur[1] = off_err;
	t->s_next = s->attaches;
	s->attaches = t;
	t->c_next = c->attaches;
	c->attaches = t;
	s->nattach++;
	proto_put_le32(head + offsetof(struct proto_started, pid), (uint32_t)s->pid);
	return agent_send(c, PROTO_MSG_STARTED, id, head, sizeof(head), NULL, 0);
}

/* Queue one SESSION_OUT frame of t's stream k on its connection if it has output to get.
 * Returns 1 when it did, 0 when t has all of it, -ENOMEM (try again later). */
static int agent_attach_send(struct agent_attach *t, int k)
{
	const struct agent_stream *st = &t->s->st[k];
	struct proto_hdr hdr = {.type = PROTO_MSG_SESSION_OUT, .flags = 0, .id = t->id};
	struct agent_buf *out = &t->c->out;
	uint64_t cur = t->cur[k];
	size_t len;
	uint8_t *p;

	if (cur < agent_ring_start(&st->ring)) {
		/* older than what is held: from the earliest whole character held */
		cur = agent_ring_start(&st->ring);
		while (cur < st->ring.end && agent_utf8_cont(agent_ring_at(&st->ring, cur)))
			cur++;
	}
	while (cur < st->ring.end && agent_utf8_cont(agent_ring_at(&st->ring, cur)))
		cur++; /* an offset inside a character (a client's mistake): from the next one */
	t->cur[k] = cur > t->cur[k] ? cur : t->cur[k];
	if (cur >= st->ring.end)
		return 0;
	len = st->ring.end - cur < PROTO_DATA_CHUNK ? (size_t)(st->ring.end - cur)
						    : PROTO_DATA_CHUNK;
	/* never split a character: the ring holds valid UTF-8, so this backs off 3 at most */
	while (cur + len < st->ring.end && len > 0 &&
	       agent_utf8_cont(agent_ring_at(&st->ring, cur + len)))
		len--;
	if (len == 0)
		return 0;
	if (agent_buf_reserve(out, PROTO_HDR_LEN + sizeof(struct proto_session_out) + len) < 0)
		return -ENOMEM;
	hdr.len = (uint32_t)(sizeof(struct proto_session_out) + len);
	p = out->data + out->len;
	proto_hdr_encode(&hdr, p);
	p += PROTO_HDR_LEN;
	memset(p, 0, sizeof(struct proto_session_out));
	proto_put_le32(p + offsetof(struct proto_session_out, stream),
		       k == 0 ? PROTO_STREAM_STDOUT : PROTO_STREAM_STDERR);
	proto_put_le64(p + offsetof(struct proto_session_out, offset), cur);
	agent_ring_copy(&st->ring, cur, len, p + sizeof(struct proto_session_out));
	out->len += PROTO_HDR_LEN + hdr.len;
	t->cur[k] = cur + len;
	return 1;
}

/* Queue output of c's attachments; see agent.h. */
bool agent_session_pump(struct agent_conn *c)
{
	struct agent_attach *t = c->attaches, *next;
	bool sent = false;

	for (; t != NULL && !c->closing; t = next) {
		struct agent_session *s = t->s;
		bool more = true, stuck = false;

		next = t->c_next;
		while (more && !stuck && agent_buf_pending(&c->out) <= AGENT_OUT_HIGH) {
			int got_out = agent_attach_send(t, 0), got_err = agent_attach_send(t, 1);

			stuck = got_out < 0 || got_err < 0;
			more = got_out > 0 || got_err > 0;
			sent = sent || more;
		}
		/* EXIT only once all of the output is queued before it */
		if (!more && !stuck && s->finished) {
			uint8_t head[sizeof(struct proto_exit)];

			agent_exec_exit_encode(s->status, s->timed_out, head);
			(void)!agent_send(c, PROTO_MSG_EXIT, t->id, head, sizeof(head), NULL, 0);
			agent_attach_end(t, true);
			sent = true;
			continue;
		}
		agent_session_arm(s);
	}
	return sent;
}

/* End c's attachments; see agent.h. */
void agent_session_detach_all(struct agent_conn *c)
{
	while (c->attaches != NULL)
		agent_attach_end(c->attaches, false);
}

/* --- reading and writing the pipes --- */

/* Read one chunk of stream k of s into its ring. */
static void agent_session_read(struct agent *a, struct agent_session *s, int k)
{
	static uint8_t raw[4 + AGENT_SESSION_READ_LEN];
	static uint8_t clean[3 * (4 + AGENT_SESSION_READ_LEN)];
	struct agent_stream *st = &s->st[k];
	size_t room = agent_session_room(s, k), max, n_clean;
	uint8_t held = st->tail_len;
	ssize_t n;
	bool eof;

	/* sanitised, held + n bytes take up to 3 times as many */
	max = room / 3 > 4 ? room / 3 - 4 : 0;
	if (max > AGENT_SESSION_READ_LEN)
		max = AGENT_SESSION_READ_LEN;
	if (max == 0) {
		agent_session_arm(s);
		return;
	}
	memcpy(raw, st->tail, held);
	do {
		n = read(st->watch.fd, raw + held, max);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	/* end of file; EIO on a pty master once the child's side is all closed */
	eof = n <= 0;
	n_clean = agent_utf8_sanitize(raw, held + (eof ? 0 : (size_t)n), eof, clean, st->tail,
				      &st->tail_len);
	if (n_clean > 0 && agent_ring_append(&st->ring, clean, n_clean) < 0) {
		log_warn("agent: session output: out of memory, closing its pipe");
		eof = true;
	}
	if (eof) {
		agent_watch_close(a, &st->watch);
		agent_session_maybe_finish(s);
	}
}

/* Write s's pending stdin; close it once written and the client closed it. */
static void agent_session_write_input(struct agent *a, struct agent_session *s)
{
	struct agent_buf *b = &s->stdin_buf;

	while (agent_buf_pending(b) > 0) {
		ssize_t n = write(s->in.fd, b->data + b->off, agent_buf_pending(b));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			b->off = b->len = 0; /* the child closed its stdin: drop the rest */
			s->stdin_eof = true;
			break;
		}
		b->off += (size_t)n;
	}
	b->off = b->len = 0;
	if (s->stdin_eof)
		agent_watch_close(a, &s->in);
	else
		(void)!agent_watch_set(a, &s->in, 0);
}

/* An event on a session's fd; see agent.h. */
void agent_session_event(struct agent *a, struct agent_watch *w, uint32_t events)
{
	struct agent_session *s = w->owner;

	(void)events;
	if (w->fd < 0)
		return; /* closed earlier in this batch of events */
	if (w == &s->in)
		agent_session_write_input(a, s);
	else
		agent_session_read(a, s, w == &s->st[1].watch ? 1 : 0);
}

/* Queue len bytes (or, with none, a close) for s's stdin and arm its watch. */
static void agent_session_queue_stdin(struct agent_session *s, const uint8_t *data, size_t len)
{
	struct agent_buf *b = &s->stdin_buf;

	if (len > 0) {
		if (agent_buf_reserve(b, len) < 0)
			return;
		memcpy(b->data + b->len, data, len);
		b->len += len;
	}
	if (agent_buf_pending(b) > 0 || s->stdin_eof)
		(void)!agent_watch_set(s->agent, &s->in, EPOLLOUT);
}

/* STDIN of an attachment; see agent.h. */
int agent_session_stdin(struct agent_conn *c, const struct proto_frame *f)
{
	struct agent_attach *t = agent_attach_find(c, f->hdr.id);

	if (t == NULL || t->s->in.fd < 0 || t->s->stdin_eof)
		return 0; /* it ended, or has no stdin */
	agent_session_queue_stdin(t->s, f->payload, f->hdr.len);
	return 0;
}

/* STDIN_CLOSE of an attachment; see agent.h. */
int agent_session_stdin_close(struct agent_conn *c, const struct proto_frame *f)
{
	static const uint8_t eof = AGENT_SESSION_EOF_CHAR;
	struct agent_attach *t = agent_attach_find(c, f->hdr.id);

	if (t == NULL || t->s->in.fd < 0 || t->s->stdin_eof)
		return 0;
	if (t->s->flags & PROTO_EXEC_PTY) {
		agent_session_queue_stdin(t->s, &eof, 1);
		return 0;
	}
	t->s->stdin_eof = true;
	agent_session_queue_stdin(t->s, NULL, 0);
	return 0;
}

/* Whether a session of c has too much stdin queued; see agent.h. */
bool agent_session_stdin_full(const struct agent_conn *c)
{
	const struct agent_attach *t;

	for (t = c->attaches; t != NULL; t = t->c_next) {
		if (agent_buf_pending(&t->s->stdin_buf) > AGENT_OUT_HIGH)
			return true;
	}
	return false;
}

/* RESIZE of an attachment; see agent.h. */
int agent_session_resize(struct agent_conn *c, const struct proto_frame *f)
{
	struct agent_attach *t = agent_attach_find(c, f->hdr.id);
	struct winsize ws;
	int fd;

	if (t == NULL || !(t->s->flags & PROTO_EXEC_PTY))
		return 0;
	fd = t->s->st[0].watch.fd >= 0 ? t->s->st[0].watch.fd : t->s->in.fd;
	if (fd < 0)
		return 0;
	memset(&ws, 0, sizeof(ws));
	ws.ws_row = proto_get_le16(f->payload + offsetof(struct proto_winsize, rows));
	ws.ws_col = proto_get_le16(f->payload + offsetof(struct proto_winsize, cols));
	if (ioctl(fd, TIOCSWINSZ, &ws) < 0)
		log_warn("agent: TIOCSWINSZ: %s", strerror(errno));
	return 0;
}

/* SIGNAL of an attachment; see agent.h. */
int agent_session_signal(struct agent_conn *c, const struct proto_frame *f, uint64_t target)
{
	uint32_t sig = proto_get_le32(f->payload + offsetof(struct proto_signal, signal));
	struct agent_attach *t = agent_attach_find(c, target);

	if (t == NULL || !agent_session_alive(t->s))
		return agent_send_error(c, f->hdr.id, ESRCH, "no running command attached as %llu",
					(unsigned long long)target);
	if (sig == 0 || sig >= (uint32_t)NSIG)
		return agent_send_error(c, f->hdr.id, EINVAL, "no signal %u", sig);
	/* the whole group: a background child holding the output too */
	if (kill(-t->s->pid, (int)sig) < 0 && kill(t->s->pid, (int)sig) < 0)
		return agent_send_error(c, f->hdr.id, errno, "kill %d: %s", (int)t->s->pid,
					strerror(errno));
	return agent_send_ok(c, f->hdr.id);
}

/* --- the calls --- */

/* Make room for one more session: evict the oldest ended one nobody is attached to. Returns
 * whether there is room. */
static bool agent_session_make_room(struct agent *a)
{
	struct agent_session *s, *oldest = NULL;

	if (a->nsessions < AGENT_SESSIONS_MAX)
		return true;
	for (s = a->sessions; s != NULL; s = s->next) {
		if (s->finished && s->nattach == 0)
			oldest = s; /* the list is newest first */
	}
	if (oldest == NULL)
		return false;
	agent_session_forget(a, oldest);
	return true;
}

/* Decode a SESSION_EXEC or SESSION_ATTACH head and id; see agent.h. */
int agent_session_parse(const struct proto_frame *f, bool attach, struct agent_session_req *q)
{
	const uint8_t *p = f->payload;
	size_t head;

	memset(q, 0, sizeof(*q));
	if (attach) {
		head = sizeof(struct proto_session_attach);
		q->id_len = proto_get_le16(p + offsetof(struct proto_session_attach, id_len));
		q->off[0] =
			proto_get_le64(p + offsetof(struct proto_session_attach, stdout_offset));
		q->off[1] =
			proto_get_le64(p + offsetof(struct proto_session_attach, stderr_offset));
	} else {
		head = sizeof(struct proto_session);
		q->exec.flags = proto_get_le32(p + offsetof(struct proto_session, flags));
		q->exec.uid = proto_get_le32(p + offsetof(struct proto_session, uid));
		q->exec.gid = proto_get_le32(p + offsetof(struct proto_session, gid));
		q->exec.timeout_ms = proto_get_le32(p + offsetof(struct proto_session, timeout_ms));
		q->exec.rows = proto_get_le16(p + offsetof(struct proto_session, rows));
		q->exec.cols = proto_get_le16(p + offsetof(struct proto_session, cols));
		q->idle_timeout_s =
			proto_get_le32(p + offsetof(struct proto_session, idle_timeout_s));
		q->ttl_s = proto_get_le32(p + offsetof(struct proto_session, ttl_s));
		q->id_len = proto_get_le16(p + offsetof(struct proto_session, id_len));
		q->argc = proto_get_le16(p + offsetof(struct proto_session, argc));
		q->envc = proto_get_le16(p + offsetof(struct proto_session, envc));
		q->off[0] = proto_get_le64(p + offsetof(struct proto_session, stdout_offset));
		q->off[1] = proto_get_le64(p + offsetof(struct proto_session, stderr_offset));
		if ((q->exec.flags & ~PROTO_SESSION_FLAGS) != 0)
			return -EPROTO;
	}
	/* the frame's length is at least the head's: its minimum in PROTO_MESSAGES */
	if (f->hdr.len < head || q->id_len > f->hdr.len - head)
		return -EPROTO;
	if (q->id_len == 0 || q->id_len > PROTO_SESSION_ID_MAX)
		return -EINVAL;
	q->id = p + head;
	q->strings_off = head + q->id_len;
	return 0;
}

/* A new session for q (its strings parsed), attached to call f of c. 0 or -ENOMEM. */
static int agent_session_create(struct agent_conn *c, const struct proto_frame *f,
				const struct agent_session_req *q)
{
	struct agent *a = c->agent;
	struct agent_spawned sp;
	struct agent_session *s;
	struct timespec ts = {0, 0};
	char msg[256];
	int rc;

	if (!agent_session_make_room(a))
		return agent_send_error(c, f->hdr.id, EAGAIN,
					"too many commands (%u) running or kept for replay",
					AGENT_SESSIONS_MAX);
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	rc = agent_exec_spawn_req(&q->exec, &sp, msg, sizeof(msg));
	if (rc < 0) {
		free(s);
		return agent_send_error(c, f->hdr.id, -rc, "%s", msg);
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	s->agent = a;
	memcpy(s->id, q->id, q->id_len);
	s->id_len = q->id_len;
	s->pid = sp.pid;
	s->flags = q->exec.flags;
	s->idle_timeout_s = q->idle_timeout_s;
	s->ttl_s = q->ttl_s;
	if (q->exec.timeout_ms != 0)
		s->deadline_ms = agent_now_ms() + q->exec.timeout_ms;
	s->started_real_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	s->st[0].watch = (struct agent_watch){AGENT_WATCH_SESSION_OUT, sp.out_fd, 0, s};
	s->st[1].watch = (struct agent_watch){AGENT_WATCH_SESSION_ERR, sp.err_fd, 0, s};
	s->in = (struct agent_watch){AGENT_WATCH_SESSION_IN, sp.in_fd, 0, s};
	s->idle_since_ms = agent_now_ms();
	s->next = a->sessions;
	a->sessions = s;
	a->nsessions++;
	rc = agent_session_attach_call(c, s, f->hdr.id, q->off[0], q->off[1]);
	agent_session_arm(s);
	return rc;
}

/* SESSION_EXEC and SESSION_ATTACH: attach to the session of the id, or start it (exec). */
static int agent_session_open(struct agent_conn *c, const struct proto_frame *f, bool attach)
{
	struct agent_session_req q;
	struct agent_session *s;
	bool expired;
	int rc;

	rc = agent_session_parse(f, attach, &q);
	if (rc == -EINVAL)
		return agent_send_error(c, f->hdr.id, EINVAL, "a command id of %u bytes (1 to %u)",
					q.id_len, PROTO_SESSION_ID_MAX);
	if (rc < 0)
		return rc;
	s = agent_session_find(c->agent, q.id, q.id_len);
	if (s != NULL)
		return agent_session_attach_call(c, s, f->hdr.id, q.off[0], q.off[1]);
	expired = agent_session_expired(c->agent, q.id, q.id_len);
	if (attach)
		return expired ? agent_send_error(c, f->hdr.id, ESTALE, "SessionExpired")
			       : agent_send_error(c, f->hdr.id, ENOENT, "CommandNotFound");
	rc = agent_exec_parse_strings(f->payload, f->hdr.len, q.strings_off, q.argc, q.envc,
				      &q.exec);
	if (rc < 0)
		return rc;
	/* never a second run of an id whose session ended and was forgotten */
	if (expired)
		rc = agent_send_error(c, f->hdr.id, ESTALE, "SessionExpired");
	else
		rc = agent_session_create(c, f, &q);
	free(q.exec.argv);
	free(q.exec.envp);
	return rc;
}

/* SESSION_EXEC; see agent.h. */
int agent_session_exec(struct agent_conn *c, const struct proto_frame *f)
{
	return agent_session_open(c, f, false);
}

/* SESSION_ATTACH; see agent.h. */
int agent_session_attach(struct agent_conn *c, const struct proto_frame *f)
{
	return agent_session_open(c, f, true);
}

/* SESSION_DETACH; see agent.h. */
int agent_session_detach(struct agent_conn *c, const struct proto_frame *f)
{
	struct agent_attach *t = agent_attach_find(c, f->hdr.id);

	if (t == NULL)
		return 0; /* it ended already (its EXIT crossed this frame) */
	agent_attach_end(t, false);
	return agent_send_ok(c, f->hdr.id);
}

/* SESSION_LIST; see agent.h. */
int agent_session_list(struct agent_conn *c, const struct proto_frame *f)
{
	uint8_t head[sizeof(struct proto_session_info)];
	struct agent_session *s;
	int rc;

	for (s = c->agent->sessions; s != NULL; s = s->next) {
		uint32_t flags = s->flags & PROTO_EXEC_PTY ? PROTO_SESSION_PTY : 0;
		uint8_t exit_head[sizeof(struct proto_exit)] = {0};

		if (agent_session_alive(s))
			flags |= PROTO_SESSION_RUNNING;
		if (s->finished) {
			flags |= PROTO_SESSION_EXITED;
			agent_exec_exit_encode(s->status, s->timed_out, exit_head);
		}
		memset(head, 0, sizeof(head));
		proto_put_le32(head + offsetof(struct proto_session_info, pid), (uint32_t)s->pid);
		proto_put_le32(head + offsetof(struct proto_session_info, flags), flags);
		memcpy(head + offsetof(struct proto_session_info, exit_code),
		       exit_head + offsetof(struct proto_exit, code), 4);
		memcpy(head + offsetof(struct proto_session_info, exit_flags),
		       exit_head + offsetof(struct proto_exit, flags), 4);
		proto_put_le64(head + offsetof(struct proto_session_info, stdout_len),
			       s->st[0].ring.end);
		proto_put_le64(head + offsetof(struct proto_session_info, stderr_len),
			       s->st[1].ring.end);
		proto_put_le64(head + offsetof(struct proto_session_info, started_ms),
			       s->started_real_ms);
		rc = agent_send(c, PROTO_MSG_DATA, f->hdr.id, head, sizeof(head), s->id, s->id_len);
		if (rc < 0)
			return rc;
	}
	return agent_send(c, PROTO_MSG_END, f->hdr.id, NULL, 0, NULL, 0);
}

/* --- timers --- */

/* Fold due_ms into *next_ms (the ms from now_ms to the earliest timer); returns whether due. */
static bool agent_session_due(uint64_t due_ms, uint64_t now_ms, uint64_t *next_ms)
{
	if (now_ms >= due_ms)
		return true;
	if (due_ms - now_ms < *next_ms)
		*next_ms = due_ms - now_ms;
	return false;
}

/* Run the sessions' timers; see agent.h. */
int agent_session_timeouts(struct agent *a, uint64_t now_ms)
{
	uint64_t next_ms = UINT64_MAX;
	struct agent_session *s = a->sessions, *next;

	for (; s != NULL; s = next) {
		next = s->next;
		if (agent_session_alive(s) && !s->killed) {
			if (s->deadline_ms != 0 &&
			    agent_session_due(s->deadline_ms, now_ms, &next_ms)) {
				s->timed_out = true;
				agent_session_kill(s);
			} else if (s->nattach == 0 && s->idle_timeout_s != PROTO_SESSION_NEVER &&
				   agent_session_due(s->idle_since_ms +
							     (uint64_t)s->idle_timeout_s * 1000u,
						     now_ms, &next_ms)) {
				agent_session_kill(s);
			}
		}
		if (s->finished && s->nattach == 0 && s->ttl_s != PROTO_SESSION_NEVER &&
		    agent_session_due(s->finished_ms + (uint64_t)s->ttl_s * 1000u, now_ms,
				      &next_ms))
			agent_session_forget(a, s);
	}
	if (next_ms == UINT64_MAX)
		return -1;
	return next_ms > 60000 ? 60000 : (int)next_ms;
}
