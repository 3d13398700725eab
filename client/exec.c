/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running one command in a sandbox through its agent (sandbox_exec, client.h), a verb for every
 * front end (sandboxctl exec, the job runner of tools/jobs/): the EXEC call, then a loop over
 * the agent connection, this process's stdin and its signals. Output goes to the caller's
 * on_output as its frames arrive; nothing is buffered beyond one frame, so a command printing
 * gigabytes runs in constant memory (the agent stops reading its pipes while we do not read).
 * It prints nothing: a failure is a -errno with its message in the caller's lc_report
 * (docs/design.md, "Architecture"), what it had to do (stop waiting) a note.
 *
 * What we send in the loop (stdin, signals, window sizes) goes through a small queue written
 * without blocking, and stdin is only read while the queue is empty: a blocking send would
 * deadlock with a command that echoes its input (`cat`), since the agent stops reading us
 * while we do not read its output.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "client.h"
#include "proto.h"

#define STDIN_CHUNK	 (64u << 10)
/* Beyond the agent's own timeout, how long we wait for its EXIT before giving up. */
#define TIMEOUT_GRACE_MS 15000
/* After a SIGTERM or SIGHUP was passed on, how long the command has to end before we stop
 * waiting for it (a second SIGINT, SIGTERM or SIGHUP stops at once). */
#define SIGNAL_GRACE_MS	 5000

static const char *const default_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"LANG=C.UTF-8",
};

/* Append a NUL-terminated string to the payload being built. */
static int put_str(uint8_t *buf, size_t cap, size_t *len, const char *s)
{
	size_t n = strlen(s) + 1;

	if (n > cap - *len)
		return -E2BIG;
	memcpy(buf + *len, s, n);
	*len += n;
	return 0;
}

/* In a networked sandbox: where TLS clients find the trust bundle with the proxy's CA. */
static const char *const net_env[] = {
	"SSL_CERT_FILE=/etc/sandbox/bundle.pem",
	"REQUESTS_CA_BUNDLE=/etc/sandbox/bundle.pem",
	"CURL_CA_BUNDLE=/etc/sandbox/bundle.pem",
	"NODE_EXTRA_CA_CERTS=/etc/sandbox/ca.pem",
};

/* Is the key of `kv` (K=V) set by one of the `n` entries of `env`? */
static bool env_has(char *const *env, unsigned n, const char *kv)
{
	size_t klen = strcspn(kv, "=");

	for (unsigned i = 0; i < n; i++)
		if (strncmp(env[i], kv, klen) == 0 && env[i][klen] == '=')
			return true;
	return false;
}

/* Is `kv` overridden by a later user --env of the same key (or, for the built-in defaults,
 * by the image's exec.conf)? */
static bool env_overridden(const struct exec_opts *o, const char *kv, bool by_image)
{
	return env_has(o->env, o->nenv, kv) ||
	       (by_image && o->image && env_has(o->image->env, o->image->nenv, kv));
}

/* The uid and gid the command runs as: --user, else the image's user, else the agent's. */
static void exec_ids(const struct exec_opts *o, uint32_t *uid, uint32_t *gid)
{
	*uid = *gid = PROTO_ID_KEEP;
	if (o->user_set) {
		*uid = o->uid;
		*gid = o->gid;
	} else if (o->image && o->image->has_user) {
		*uid = o->image->uid;
		*gid = o->image->gid;
	}
}

/* The EXEC payload: proto_exec, cwd, argv, env. The environment, each later layer over the
 * earlier: PATH, HOME, LANG; the image's Env (exec.conf); the network's CA variables; TERM;
 * the caller's --env. */
static int build_exec(const struct exec_opts *o, const struct winsize *ws, bool network,
		      uint8_t *buf, size_t cap, size_t *len)
{
	const char *term = getenv("TERM");
	const char *cwd = o->cwd ? o->cwd : o->image && o->image->workdir ? o->image->workdir : "";
	char termbuf[128];
	uint8_t *h = buf;
	unsigned envc = 0;
	uint32_t uid, gid;
	int err = 0;

	if (o->argc < 1 || o->argc > 0xffff || o->nenv > 0xfff0 ||
	    (o->image && o->image->nenv > 0xfff0 - o->nenv))
		return -E2BIG;
	exec_ids(o, &uid, &gid);
	memset(h, 0, sizeof(struct proto_exec));
	*len = sizeof(struct proto_exec);
	if ((err = put_str(buf, cap, len, cwd)) < 0)
		return err;
	for (int i = 0; i < o->argc; i++)
		if ((err = put_str(buf, cap, len, o->argv[i])) < 0)
			return err;
	for (size_t i = 0; i < sizeof(default_env) / sizeof(default_env[0]); i++) {
		const char *kv = default_env[i];

		if (env_overridden(o, kv, true))
			continue;
		/* root's home is not another user's: "/" as Docker gives a user without one */
		if (strncmp(kv, "HOME=", 5) == 0 && uid != PROTO_ID_KEEP && uid != 0)
			kv = "HOME=/";
		if ((err = put_str(buf, cap, len, kv)) < 0)
			return err;
		envc++;
	}
	for (unsigned i = 0; o->image && i < o->image->nenv; i++) {
		if (env_overridden(o, o->image->env[i], false))
			continue;
		if ((err = put_str(buf, cap, len, o->image->env[i])) < 0)
			return err;
		envc++;
	}
	for (size_t i = 0; network && i < sizeof(net_env) / sizeof(net_env[0]); i++) {
		if (env_overridden(o, net_env[i], false))
			continue;
		if ((err = put_str(buf, cap, len, net_env[i])) < 0)
			return err;
		envc++;
	}
	if (o->tty) {
		snprintf(termbuf, sizeof(termbuf), "TERM=%s",
			 term && *term && strlen(term) < 64 ? term : "xterm");
		if (!env_overridden(o, termbuf, true)) {
			if ((err = put_str(buf, cap, len, termbuf)) < 0)
				return err;
			envc++;
		}
	}
	for (unsigned i = 0; i < o->nenv; i++) {
		if ((err = put_str(buf, cap, len, o->env[i])) < 0)
			return err;
		envc++;
	}
	proto_put_le32(h + offsetof(struct proto_exec, flags),
		       (o->interactive ? PROTO_EXEC_STDIN : 0) | (o->tty ? PROTO_EXEC_PTY : 0));
	proto_put_le32(h + offsetof(struct proto_exec, uid), uid);
	proto_put_le32(h + offsetof(struct proto_exec, gid), gid);
	proto_put_le32(h + offsetof(struct proto_exec, timeout_ms), o->timeout_s * 1000);
	proto_put_le16(h + offsetof(struct proto_exec, rows), ws ? ws->ws_row : 0);
	proto_put_le16(h + offsetof(struct proto_exec, cols), ws ? ws->ws_col : 0);
	proto_put_le16(h + offsetof(struct proto_exec, argc), (uint16_t)o->argc);
	proto_put_le16(h + offsetof(struct proto_exec, envc), (uint16_t)envc);
	return 0;
}

/* Frames to the agent, sent as the socket takes them. Bounded by the loop: stdin is read
 * only while it is empty, so it holds at most one STDIN frame and a few small ones. */
struct outq {
	uint8_t *buf;
	size_t off, len, cap;
};

static int outq_frame(struct outq *q, uint16_t type, uint64_t id, const void *payload, uint32_t len)
{
	struct proto_hdr h = {.len = len, .type = type, .id = id};
	size_t need = PROTO_HDR_LEN + len;

	if (q->off == q->len)
		q->off = q->len = 0;
	if (need > q->cap - q->len) {
		size_t cap = q->len + need + 4096;
		uint8_t *b = realloc(q->buf, cap);

		if (!b)
			return -ENOMEM;
		q->buf = b;
		q->cap = cap;
	}
	proto_hdr_encode(&h, q->buf + q->len);
	if (len)
		memcpy(q->buf + q->len + PROTO_HDR_LEN, payload, len);
	q->len += need;
	return 0;
}

/* Send what the socket takes now. */
static int outq_flush(struct outq *q, int fd)
{
	while (q->off < q->len) {
		ssize_t n = send(fd, q->buf + q->off, q->len - q->off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		q->off += (size_t)n;
	}
	return 0;
}

static int send_winsize(struct outq *q, uint64_t id)
{
	uint8_t p[sizeof(struct proto_winsize)] = {0};
	struct winsize ws;

	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0)
		return 0;
	proto_put_le16(p + offsetof(struct proto_winsize, rows), ws.ws_row);
	proto_put_le16(p + offsetof(struct proto_winsize, cols), ws.ws_col);
	return outq_frame(q, PROTO_MSG_RESIZE, id, p, sizeof(p));
}

static int send_signal(struct agent_conn *c, struct outq *q, uint64_t target, uint32_t sig)
{
	uint8_t p[sizeof(struct proto_signal)] = {0};

	proto_put_le64(p + offsetof(struct proto_signal, target_id), target);
	proto_put_le32(p + offsetof(struct proto_signal, signal), sig);
	/* its own id: the OK or ERROR that answers it is skipped by the loop */
	return outq_frame(q, PROTO_MSG_SIGNAL, ++c->next_id, p, sizeof(p));
}

/*
 * Signals we were sent that ask us to stop, beyond passing them on: a guest that ignores them
 * must not keep us. The second SIGINT, SIGTERM or SIGHUP ends the wait at once; the first
 * SIGTERM or SIGHUP gives the command SIGNAL_GRACE_MS to end. A first SIGINT alone does not:
 * a command may take it as a request (an interpreter's KeyboardInterrupt).
 */
struct exec_stop {
	unsigned count;	    /* SIGINT, SIGTERM, SIGHUP so far */
	uint64_t grace_end; /* the grace's end, UINT64_MAX while none runs */
	int sig;	    /* the signal whose 128+N we exit with */
};

/* Count `sig`; true when the wait ends now. */
static bool exec_stop_signal(struct exec_stop *s, uint32_t sig)
{
	if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP)
		return false;
	s->sig = (int)sig;
	if (++s->count >= 2)
		return true;
	if (sig != SIGINT)
		s->grace_end = now_ms() + SIGNAL_GRACE_MS;
	return false;
}

/* We stop waiting with the command still running: SIGKILL it, as far as the socket takes the
 * frame now (closing the connection then makes the agent kill its execs too), and say so (a
 * note). Returns 128 + the signal, as shells do. */
static int exec_stop_now(const struct sandbox *sb, struct agent_conn *c, struct outq *q,
			 uint64_t id, const struct exec_stop *s, const struct lc_report *r)
{
	const char *name = s->sig == SIGINT ? "SIGINT" : s->sig == SIGTERM ? "SIGTERM" : "SIGHUP";

	if (send_signal(c, q, id, SIGKILL) == 0)
		(void)outq_flush(q, c->fd);
	lc_note(r, "%s: the command went on %s %s: stopped waiting for it (it is killed)", sb->id,
		s->count >= 2 ? "after a second signal," : "5 s after", name);
	return 128 + s->sig;
}

int sandbox_exec(const struct sandbox *sb, const struct exec_opts *o, struct lc_report *r)
{
	static uint8_t buf[PROTO_MAX_PAYLOAD];
	bool stdin_open = o->interactive, raw = false;
	struct termios saved;
	struct winsize ws, *wsp = NULL;
	struct agent_conn c;
	struct proto_frame f;
	struct outq q = {0};
	struct exec_stop stop = {.grace_end = UINT64_MAX};
	sigset_t mask, old_mask;
	uint64_t id, deadline = UINT64_MAX;
	size_t len;
	int sfd = -1, err, status = -ESRCH;
	char msg[512];
	bool masked = false;

	if (o->tty && isatty(STDIN_FILENO) && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
		wsp = &ws;
	if ((err = build_exec(o, wsp, sb->network, buf, sizeof(buf), &len)) < 0) {
		return lc_bad_option(r, "exec: the command and its environment are too long (%s)",
				     strerror(-err));
	}
	if ((err = agent_connect(sb, 10000, &c)) < 0) {
		return lc_fail(r, -ESRCH, "%s: cannot reach the guest agent: %s", sb->id,
			       strerror(-err));
	}
	id = ++c.next_id;
	if ((err = agent_send(&c, PROTO_MSG_EXEC, id, buf, (uint32_t)len)) < 0) {
		lc_fail(r, -ESRCH, "%s: cannot send the command to the agent: %s", sb->id,
			strerror(-err));
		goto out;
	}
	if (o->timeout_s)
		deadline = now_ms() + o->timeout_s * 1000ull + TIMEOUT_GRACE_MS;
	/* Signals become messages to the command: taken through a signalfd. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGQUIT);
	sigaddset(&mask, SIGWINCH);
	masked = sigprocmask(SIG_BLOCK, &mask, &old_mask) == 0;
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (o->tty && o->interactive && isatty(STDIN_FILENO) &&
	    tcgetattr(STDIN_FILENO, &saved) == 0) {
		struct termios t = saved;

		cfmakeraw(&t);
		raw = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
	}
	for (;;) {
		bool sending = q.off < q.len;
		struct pollfd pfd[3] = {
			{.fd = c.fd, .events = POLLIN | (sending ? POLLOUT : 0)},
			{.fd = sfd, .events = POLLIN},
			{.fd = stdin_open && !sending ? STDIN_FILENO : -1, .events = POLLIN},
		};
		uint64_t now = now_ms(),
			 until = deadline < stop.grace_end ? deadline : stop.grace_end;
		int n;

		if (now >= stop.grace_end) {
			status = exec_stop_now(sb, &c, &q, id, &stop, r);
			goto out;
		}
		if (now >= deadline) {
			status = lc_fail(r, -ETIMEDOUT,
					 "%s: the agent did not end the command %u s after its "
					 "timeout",
					 sb->id, TIMEOUT_GRACE_MS / 1000);
			goto out;
		}
		if (!agent_buffered(&c) &&
		    poll(pfd, 3, until == UINT64_MAX ? -1 : (int)(until - now)) < 0 &&
		    errno != EINTR) {
			lc_fail(r, -ESRCH, "poll: %s", strerror(errno));
			goto out;
		}
		if (pfd[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGWINCH)
					err = o->tty ? send_winsize(&q, id) : 0;
				else
					err = send_signal(&c, &q, id, si.ssi_signo);
				if (err < 0)
					break;
				if (exec_stop_signal(&stop, si.ssi_signo)) {
					status = exec_stop_now(sb, &c, &q, id, &stop, r);
					goto out;
				}
			}
		}
		err = 0;
		if (pfd[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t got = read(STDIN_FILENO, buf, STDIN_CHUNK);

			if (got > 0) {
				err = outq_frame(&q, PROTO_MSG_STDIN, id, buf, (uint32_t)got);
			} else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
				stdin_open = false;
				err = outq_frame(&q, PROTO_MSG_STDIN_CLOSE, id, NULL, 0);
			}
		}
		if (err == 0 && q.off < q.len)
			err = outq_flush(&q, c.fd);
		if (err < 0) {
			lc_fail(r, -ESRCH, "%s: lost the connection to the agent: %s", sb->id,
				strerror(-err));
			goto out;
		}
		if (!(pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) && !agent_buffered(&c))
			continue;
		n = agent_recv(&c, 0, &f);
		if (n == 0)
			continue;
		if (n < 0) {
			lc_fail(r, -ESRCH,
				"%s: lost the connection to the agent (%s): is the sandbox still "
				"running?",
				sb->id, n == -EPROTO ? "bad frame" : strerror(-n));
			goto out;
		}
		if (f.hdr.id != id) {
			if (f.hdr.id == 0 && f.hdr.type == PROTO_MSG_ERROR) {
				lc_fail(r, -ESRCH, "agent: %s",
					agent_error_text(&f, msg, sizeof(msg)));
				goto out;
			}
			continue; /* the answer to a SIGNAL */
		}
		switch (f.hdr.type) {
		case PROTO_MSG_STDOUT:
			if (o->on_output)
				o->on_output(o->output_arg, 1, f.payload, f.hdr.len);
			break;
		case PROTO_MSG_STDERR:
			if (o->on_output)
				o->on_output(o->output_arg, 2, f.payload, f.hdr.len);
			break;
		case PROTO_MSG_EXIT: {
			uint32_t code =
				proto_get_le32(f.payload + offsetof(struct proto_exit, code));
			uint32_t flags =
				proto_get_le32(f.payload + offsetof(struct proto_exit, flags));

			if (raw) {
				tcsetattr(STDIN_FILENO, TCSANOW, &saved);
				raw = false;
			}
			if (flags & PROTO_EXIT_TIMED_OUT) {
				status = lc_fail(r, -ETIMEDOUT,
						 "%s: command timed out after %u s: killed", sb->id,
						 o->timeout_s);
			} else {
				status = code > 255 ? 255 : (int)code;
			}
			goto out;
		}
		case PROTO_MSG_ERROR:
			if (raw) {
				tcsetattr(STDIN_FILENO, TCSANOW, &saved);
				raw = false;
			}
			status = lc_fail(r, -ENOEXEC, "%s: %s", o->argv[0],
					 agent_error_text(&f, msg, sizeof(msg)));
			goto out;
		default:
			break; /* STARTED, and types a newer agent may add */
		}
	}
out:
	if (raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	if (sfd >= 0)
		close(sfd);
	if (masked)
		sigprocmask(SIG_SETMASK, &old_mask, NULL);
	agent_close(&c);
	free(q.buf);
	return status;
}
