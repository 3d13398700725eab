/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest agent inside sandbox-init: one single-threaded epoll loop that serves the protocol
 * of proto.h on every connection accepted from a listening socket (vsock port 52 in the guest,
 * a unix socket in the unit tests). agent.c runs the loop, the connections and the dispatch;
 * agent_exec.c runs programs; agent_file.c serves the file calls.
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
	struct agent_exec *execs; /* every exec of every connection, for reaping by pid */
	struct agent_exec *dead;  /* ended execs, freed after the current batch of events */
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
