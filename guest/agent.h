/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest agent inside sandbox-init: one single-threaded epoll loop that serves the protocol
 * of proto.h on every connection accepted from a listening socket (vsock port 52 in the guest,
 * a unix socket in the unit tests). agent.c runs the loop, the connections and the dispatch;
 * agent_exec.c runs programs; agent_session.c keeps command sessions (programs that outlive
 * their connection, with their output kept for replay); agent_file.c serves the file calls.
 *
 * The agent never exits on bad input: a protocol error closes that one connection after an
 * ERROR frame. It never buffers without bound: while a connection's output buffer holds more
 * than AGENT_OUT_HIGH bytes, the pipes of its children, its file reads and its own input are
 * not read. It reaps every child of the process (orphans too) through a signalfd for SIGCHLD.
 */
#ifndef SANDBOX_GUEST_AGENT_H
#define SANDBOX_GUEST_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

/* Output a connection may buffer before its producers pause, and where they resume. */
#define AGENT_OUT_HIGH	(256u << 10)
#define AGENT_OUT_LOW	(64u << 10)
/* Connections at once; beyond, the agent stops accepting until one closes (each holds fds,
 * and a host that opens them without end must not make PID 1 spin or run out). */
#define AGENT_CONNS_MAX 256u

/* Sessions held at once (running or ended and kept for replay): a 65th start evicts the oldest
 * ended one without attachment, or is refused EAGAIN. Each holds up to two rings. */
#define AGENT_SESSIONS_MAX	  64u
/* Bytes of each stream a session keeps: the last MiB; older bytes fall off the ring. */
#define AGENT_SESSION_RING	  (1u << 20)
/* Attachments of one session at once (each is a call on some connection). */
#define AGENT_SESSION_ATTACH_MAX  32u
/* Ids of sessions forgotten at their ttl, remembered to answer SessionExpired. */
#define AGENT_SESSION_EXPIRED_MAX 64u

/* What the caller of agent_run provides. */
struct agent_config {
	int listen_fd; /* a listening stream socket; the agent makes it non-blocking */
	/* SHUTDOWN: sync and reset/power off (PROTO_SHUTDOWN_*); returns only on failure, with
	 * -errno. NULL: SHUTDOWN is answered ENOSYS (the unit tests). */
	int (*shutdown)(uint32_t flags);
};

/*
 * Run the agent forever on cfg->listen_fd. Blocks SIGCHLD (taken through a signalfd) and
 * ignores SIGPIPE for this process. Returns only if the loop cannot be set up or epoll fails,
 * with -errno.
 */
int agent_run(const struct agent_config *cfg) __attribute__((warn_unused_result));

/* --- internal to agent*.c --- */

/* A growable byte buffer: bytes [off, len) are pending. */
struct agent_buf {
	uint8_t *data;
	size_t off;
	size_t len;
	size_t cap;
};

/* Make room for n more bytes after len (compacting first). Returns 0 or -ENOMEM. */
int agent_buf_reserve(struct agent_buf *b, size_t n) __attribute__((warn_unused_result));

/* Bytes pending in b. */
size_t agent_buf_pending(const struct agent_buf *b);

/* Free b's memory. */
void agent_buf_free(struct agent_buf *b);

/* What an epoll event's data points at. */
enum agent_watch_kind {
	AGENT_WATCH_LISTEN,
	AGENT_WATCH_SIGNAL,
	AGENT_WATCH_CONN,
	AGENT_WATCH_EXEC_OUT,
	AGENT_WATCH_EXEC_ERR,
	AGENT_WATCH_EXEC_IN,
	AGENT_WATCH_SESSION_OUT,
	AGENT_WATCH_SESSION_ERR,
	AGENT_WATCH_SESSION_IN,
};

/* One fd in the epoll set; events is what it is registered for now. */
struct agent_watch {
	enum agent_watch_kind kind;
	int fd; /* -1: not open */
	uint32_t events;
	void *owner;
};

struct agent;
struct agent_exec;
struct agent_fwrite;
struct agent_fread;
struct agent_session;
struct agent_attach;

/* One client connection. */
struct agent_conn {
	struct agent *agent;
	struct agent_watch watch;
	struct proto_decoder dec;
	struct agent_buf out; /* encoded frames not yet sent */
	bool hello_done;      /* the client's HELLO was accepted */
	bool closing;	      /* flush out, then close (after a protocol error) */
	bool throttled;	      /* out is above AGENT_OUT_HIGH: producers paused */
	struct agent_exec *execs;
	struct agent_fwrite *fwrites;
	struct agent_fread *freads;
	struct agent_attach *attaches; /* this connection's attachments to sessions */
	struct agent_conn *next;
};

/* The agent: its loop and everything it serves. */
struct agent {
	const struct agent_config *cfg;
	int epoll_fd;
	struct agent_watch listen_watch;
	struct agent_watch signal_watch;
	struct agent_conn *conns;
	unsigned nconns;
	bool accept_paused; /* AGENT_CONNS_MAX reached or out of fds: listen_watch is out of epoll
			     */
	struct agent_exec *execs;	/* every exec of every connection, for reaping by pid */
	struct agent_exec *dead;	/* ended execs, freed after the current batch of events */
	struct agent_session *sessions; /* every session held, newest first */
	unsigned nsessions;		/* in sessions: at most AGENT_SESSIONS_MAX */
	struct agent_session *sessions_dead; /* forgotten, freed after the current batch */
	/* ids of sessions forgotten at their ttl, for SessionExpired: a ring, the oldest
	 * overwritten */
	uint8_t expired[AGENT_SESSION_EXPIRED_MAX][PROTO_SESSION_ID_MAX];
	uint8_t expired_len[AGENT_SESSION_EXPIRED_MAX]; /* 0: an empty slot */
	unsigned expired_next;
};

/*
 * Set w's epoll interest to events; 0 takes it out of the epoll set (a silent registration
 * would still report EPOLLHUP, over and over). Returns 0 or -errno.
 */
int agent_watch_set(struct agent *a, struct agent_watch *w, uint32_t events)
	__attribute__((warn_unused_result));

/* Remove w from the epoll set and close its fd (if open). */
void agent_watch_close(struct agent *a, struct agent_watch *w);

/*
 * Queue one frame (header of type/id, then head_len bytes of head and tail_len of tail) on c's
 * output and try to send it. Returns 0 or -ENOMEM (the connection is then closing).
 */
int agent_send(struct agent_conn *c, uint16_t type, uint64_t id, const void *head,
	       uint32_t head_len, const void *tail, uint32_t tail_len)
	__attribute__((warn_unused_result));

/* Send ERROR(err, printf message) for id. Returns 0 or -ENOMEM. */
int agent_send_error(struct agent_conn *c, uint64_t id, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5), warn_unused_result));

/* Send OK for id. Returns 0 or -ENOMEM. */
int agent_send_ok(struct agent_conn *c, uint64_t id) __attribute__((warn_unused_result));

/* Whether id is the id of a call in progress on c. */
bool agent_conn_id_live(const struct agent_conn *c, uint64_t id);

/* Re-evaluate c's throttle, epoll interest and whether it can close now. */
void agent_conn_update(struct agent_conn *c);

/* Whether the agent takes the decoded frame f on c now, before its handler looks at the
 * payload: a type the agent serves, HELLO first, a new call's id non-zero and not live.
 * 0, or -EPROTO with *why (the connection is then failed). The fuzz target calls it too. */
int agent_frame_check(const struct agent_conn *c, const struct proto_frame *f, const char **why)
	__attribute__((warn_unused_result));

/* --- agent_exec.c --- */

/* The fds and pid of a child started by agent_exec_spawn_req. */
struct agent_spawned {
	pid_t pid;
	int out_fd; /* stdout pipe, or the pty master */
	int err_fd; /* stderr pipe; -1 with a pty */
	int in_fd;  /* stdin pipe or a dup of the master with PROTO_EXEC_STDIN; else -1 */
};

/* The decoded EXEC request; strings point into the frame's payload. */
struct agent_exec_req {
	uint32_t flags;
	uint32_t uid;
	uint32_t gid;
	uint32_t timeout_ms;
	uint16_t rows;
	uint16_t cols;
	const char *cwd;
	char **argv; /* argc + 1, NULL-terminated */
	char **envp; /* envc + 1, NULL-terminated */
};

/* Parse the EXEC payload of f into req: its fixed fields, then cwd, argv and envp pointing
 * into the payload (the two arrays allocated, NULL-terminated; free them). 0, -EPROTO (an
 * unknown flag, no argv, an empty argv[0], a string missing or not terminated) or -ENOMEM
 * (nothing to free then). */
int agent_exec_parse(const struct proto_frame *f, struct agent_exec_req *req)
	__attribute__((warn_unused_result));

/* Parse the 1 + argc + envc strings (cwd, argv, env) of payload p[0, len) from off into req
 * (req's fixed fields are the caller's). The arrays are allocated (free them) only on
 * success. 0, -EPROTO or -ENOMEM. Shared by EXEC and SESSION_EXEC. */
int agent_exec_parse_strings(const uint8_t *p, size_t len, size_t off, uint16_t argc, uint16_t envc,
			     struct agent_exec_req *req) __attribute__((warn_unused_result));

/* Start the child of req on new pipes or a pty and wait for it to exec. 0 with *sp filled
 * (our fds non-blocking and CLOEXEC), or -errno with a message for an ERROR in msg. */
int agent_exec_spawn_req(const struct agent_exec_req *req, struct agent_spawned *sp, char *msg,
			 size_t msg_len) __attribute__((warn_unused_result));

/* The EXIT payload of wait status `status` (timed_out: PROTO_EXIT_TIMED_OUT) into head. */
void agent_exec_exit_encode(int status, bool timed_out, uint8_t head[sizeof(struct proto_exit)]);

/* EXEC: start the program of frame f. Returns 0, or -errno for a protocol error. */
int agent_exec_start(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));

/* STDIN, STDIN_CLOSE, RESIZE for an exec of c (unknown ids are ignored). Returns 0 or -errno
 * for a protocol error. */
int agent_exec_stdin(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_exec_stdin_close(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_exec_resize(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));

/* SIGNAL: signal an exec of c. Returns 0 or -errno for a protocol error. */
int agent_exec_signal(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));

/* Handle an epoll event on one of an exec's fds. */
void agent_exec_event(struct agent *a, struct agent_watch *w, uint32_t events);

/* A child exited with status: find its exec (if any) and finish it once its output is done. */
void agent_exec_reaped(struct agent *a, pid_t pid, int status);

/* Pause or resume the output pipes of c's execs after c->throttled changed. */
void agent_exec_throttle(struct agent_conn *c);

/* Kill (SIGKILL to the process group) and free every exec of c; c is going away. */
void agent_exec_drop_all(struct agent_conn *c);

/* Whether an exec of c holds more stdin than AGENT_OUT_HIGH not yet written to the child. */
bool agent_exec_stdin_full(const struct agent_conn *c);

/* Free the execs that ended (after a batch of events, when no event can point at them). */
void agent_exec_free_dead(struct agent *a);

/*
 * Kill every exec past its deadline at now_ms; returns the ms until the next deadline, or -1
 * if there is none (an epoll_wait timeout).
 */
int agent_exec_timeouts(struct agent *a, uint64_t now_ms);

/* The CLOCK_MONOTONIC time in ms. */
uint64_t agent_now_ms(void);

/* --- agent_session.c: command sessions (docs/agent-protocol.md, "Command sessions") --- */

/* The fixed part of a decoded SESSION_EXEC or SESSION_ATTACH; pointers into the payload. */
struct agent_session_req {
	struct agent_exec_req exec; /* flags, ids, timeout, window; argv/envp NULL */
	const uint8_t *id;	    /* the command id, id_len bytes (not terminated) */
	uint16_t id_len;
	uint16_t argc, envc;
	size_t strings_off; /* where cwd, argv, env start (agent_exec_parse_strings) */
	uint32_t idle_timeout_s;
	uint32_t ttl_s;
	uint64_t off[2]; /* the stdout and stderr offsets to replay from */
};

/* Decode the head and the command id of a SESSION_EXEC (attach false) or SESSION_ATTACH into
 * *q. 0; -EINVAL for an id of 0 or more than PROTO_SESSION_ID_MAX bytes (a call-level error);
 * -EPROTO for an unknown flag or an id running past the payload (a protocol error). The fuzz
 * target calls it too. */
int agent_session_parse(const struct proto_frame *f, bool attach, struct agent_session_req *q)
	__attribute__((warn_unused_result));

/* SESSION_EXEC, SESSION_ATTACH, SESSION_DETACH, SESSION_LIST: 0 (call-level failures are
 * answered with ERROR) or -errno for a protocol error. */
int agent_session_exec(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_session_attach(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_session_detach(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_session_list(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));

/* Whether id is an attachment of c (its STDIN, STDIN_CLOSE, RESIZE, SIGNAL go to the
 * session). */
bool agent_session_id_live(const struct agent_conn *c, uint64_t id);

/* STDIN, STDIN_CLOSE, RESIZE of attachment f->hdr.id of c; SIGNAL of attachment target. Each
 * returns 0 or -errno for a protocol error. */
int agent_session_stdin(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_session_stdin_close(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_session_resize(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_session_signal(struct agent_conn *c, const struct proto_frame *f, uint64_t target)
	__attribute__((warn_unused_result));

/* Handle an epoll event on one of a session's fds. */
void agent_session_event(struct agent *a, struct agent_watch *w, uint32_t events);

/* A child exited with status: if it is a session's, record it. Returns whether it was. */
bool agent_session_reaped(struct agent *a, pid_t pid, int status);

/* Queue the output (then EXIT) of c's attachments while c's output is below AGENT_OUT_HIGH.
 * Returns whether a frame was queued. */
bool agent_session_pump(struct agent_conn *c);

/* Whether a session c is attached to holds more stdin than AGENT_OUT_HIGH not yet written. */
bool agent_session_stdin_full(const struct agent_conn *c);

/* c is going away: end its attachments (a KILL_ON_DISCONNECT session left with none is
 * killed); the sessions go on. */
void agent_session_detach_all(struct agent_conn *c);

/* Run the sessions' timers at now_ms (timeout, idle, ttl); returns the ms until the next, or
 * -1 if there is none. */
int agent_session_timeouts(struct agent *a, uint64_t now_ms);

/* Free the sessions forgotten during the last batch of events. */
void agent_session_free_dead(struct agent *a);

/* --- agent_ring.c: a session's stored output --- */

/* Turn the n bytes at in into valid UTF-8 at out, which holds 3 * n bytes, and return how
 * many were written. Each invalid sequence (its maximal subpart, as Unicode and Python have
 * it) becomes one U+FFFD. An incomplete character at the very end is not written but copied to
 * tail (*tail_len, 0 to 3 bytes), for the caller to put before the next bytes; at eof it
 * becomes U+FFFD too. */
size_t agent_utf8_sanitize(const uint8_t *in, size_t n, bool eof, uint8_t *out, uint8_t tail[4],
			   uint8_t *tail_len);

/* Whether b continues a UTF-8 character (10xxxxxx). */
bool agent_utf8_cont(uint8_t b);

/* The last AGENT_SESSION_RING bytes of a stream, at absolute offsets: the byte at offset o is
 * data[o % AGENT_SESSION_RING]. data grows as output comes, up to AGENT_SESSION_RING. */
struct agent_ring {
	uint8_t *data;
	size_t cap;   /* bytes allocated */
	uint64_t end; /* the offset just past the last byte stored: the stream's length */
};

/* The oldest offset r still holds. */
uint64_t agent_ring_start(const struct agent_ring *r);

/* The byte at offset off, which r holds. */
uint8_t agent_ring_at(const struct agent_ring *r, uint64_t off);

/* Store n <= AGENT_SESSION_RING bytes at the end of r (the oldest fall off). 0 or -ENOMEM
 * (nothing stored). */
int agent_ring_append(struct agent_ring *r, const uint8_t *data, size_t n)
	__attribute__((warn_unused_result));

/* Copy len bytes from offset off, all held by r, to out. */
void agent_ring_copy(const struct agent_ring *r, uint64_t off, size_t len, uint8_t *out);

/* Free r's memory. */
void agent_ring_free(struct agent_ring *r);

/* --- agent_file.c --- */

/* FILE_WRITE, DATA, END, FILE_READ, STAT, LIST, MKDIR, REMOVE, SYNC, RESEED: each returns 0
 * (call-level failures are answered with ERROR) or -errno for a protocol error. */
int agent_file_write(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_file_data(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_file_end(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_file_read(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_file_stat(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_file_list(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_file_mkdir(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_file_remove(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_file_sync(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));
int agent_file_reseed(struct agent_conn *c, const struct proto_frame *f)
	__attribute__((warn_unused_result));

/* The path in f's payload, NUL-terminated, starting at off. Returns 0 or -EPROTO (missing,
 * empty, or not terminated). */
int agent_file_path(const struct proto_frame *f, size_t off, const char **path)
	__attribute__((warn_unused_result));

/* Send the next chunks of c's file reads while c is not throttled. */
void agent_file_pump(struct agent_conn *c);

/* Free every file call of c (temporary files are removed). */
void agent_file_drop_all(struct agent_conn *c);

/* Whether c has a file write or read in progress with this id. */
bool agent_file_id_live(const struct agent_conn *c, uint64_t id);

/* Whether c has an exec in progress with this id. */
bool agent_exec_id_live(const struct agent_conn *c, uint64_t id);

#endif /* SANDBOX_GUEST_AGENT_H */
