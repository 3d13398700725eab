/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest agent protocol: the wire format between sandbox-init (the agent, PID 1 of the
 * guest, listening on vsock port PROTO_VSOCK_PORT) and its clients on the host (sandboxctl,
 * the VMM's graceful shutdown). Defined once, here; docs/agent-protocol.md tells the story.
 *
 * A connection carries frames in both directions. A frame is a 16-byte header followed by
 * `len` bytes of payload:
 *
 *   offset 0  le32 len    payload length, at most PROTO_MAX_PAYLOAD
 *   offset 4  le16 type   one of PROTO_MSG_* below
 *   offset 6  le16 flags  reserved: sent as 0, a non-zero value is a protocol error
 *   offset 8  le64 id     request id, chosen by the client; 0 is the connection itself
 *
 * Every call the client makes has its own id; every frame the agent sends about that call
 * carries the same id, so many calls run at once on one connection. A call ends with exactly
 * one final frame: EXIT (exec), OK, PONG, STAT_REPLY, END (file read, list) or ERROR.
 *
 * Every field is fixed-width and little-endian; payload structs have no padding (each has a
 * _Static_assert on its size) and are followed, where said, by NUL-terminated strings or raw
 * bytes. The structs below document the layout; read and write their fields with
 * proto_get_le32(p + offsetof(struct proto_exec, uid)) and friends, which work on any host.
 * A receiver checks a frame's length against the type's minimum (PROTO_MESSAGES)
 * before it reads a byte of the payload, and a frame longer than PROTO_MAX_PAYLOAD is refused
 * from its header alone, before any buffer is sized for it. A protocol error (oversized,
 * unknown type, too short, non-zero flags) makes the agent send ERROR with id 0 and close
 * that connection; other connections go on.
 *
 * PROTO_VERSION changes with any change to this file's wire format.
 */
#ifndef SANDBOX_GUEST_PROTO_H
#define SANDBOX_GUEST_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION	  4u
#define PROTO_VSOCK_PORT  52u
/* Once the agent listens, sandbox-init connects to this host port (CID 2) and writes
 * PROTO_READY_LINE: the host learns the agent is up without polling it during boot. */
#define PROTO_READY_PORT  53u
#define PROTO_READY_LINE  "READY\n"
#define PROTO_HDR_LEN	  16u
#define PROTO_MAX_PAYLOAD (1u << 20) /* 1 MiB: a longer frame is a protocol error */

/* Data frames (STDOUT, STDERR, DATA) the agent sends carry at most this many bytes. */
#define PROTO_DATA_CHUNK (64u << 10)

/* The header of every frame, as it is on the wire. */
struct proto_hdr {
	uint32_t len;	/* payload bytes that follow the header */
	uint16_t type;	/* PROTO_MSG_* */
	uint16_t flags; /* 0 */
	uint64_t id;	/* request id; 0 for the connection (HELLO, a fatal ERROR) */
};
_Static_assert(sizeof(struct proto_hdr) == PROTO_HDR_LEN, "proto_hdr layout");

/*
 * The message types: X(NAME, value, minimum payload length, direction), where direction is
 * C (client to agent), A (agent to client) or B (both). The minimum is the fixed struct; the
 * strings or bytes that follow are checked by the handler.
 *
 *   HELLO        B  proto_hello. The client's first frame, id 0; the agent answers with its
 *                   own. A version other than PROTO_VERSION: ERROR EPROTONOSUPPORT, close.
 *   PING         C  empty. Answered by PONG.
 *   PONG         A  proto_pong: the guest's uptime.
 *   EXEC         C  proto_exec, then cwd, argv[argc], env[envc] as NUL-terminated strings.
 *                   Answered by STARTED, then STDOUT/STDERR as produced, then EXIT; or by
 *                   ERROR if the process could not be set up (bad cwd, uid, pty). A program
 *                   that cannot be executed is not an ERROR: like a shell, the child writes
 *                   "NAME: strerror\n" to its stderr and exits 127 (126 for EACCES & co).
 *   STARTED      A  proto_started: the child's pid.
 *   STDOUT       A  bytes the child wrote to stdout (or to the pty), in order.
 *   STDERR       A  bytes the child wrote to stderr (never with a pty).
 *   EXIT         A  proto_exit. The last frame of an exec, after all of its output.
 *   STDIN        C  bytes for the child's stdin (or the pty), id of the exec. Needs
 *                   PROTO_EXEC_STDIN; otherwise stdin is /dev/null and this is ignored.
 *   STDIN_CLOSE  C  empty: close the child's stdin (with a pty: send the terminal's EOF).
 *   RESIZE       C  proto_winsize, id of the exec: new pty window size (no pty: ignored).
 *   SIGNAL       C  proto_signal: send a signal to the exec target_id (to its process
 *                   group), or to the session attached as call target_id (its group).
 *                   Answered by OK, or ERROR ESRCH if that exec or session is not running.
 *   OK           A  empty: the call succeeded.
 *   ERROR        A  proto_error, then a message (not NUL-terminated, may be empty). Ends the
 *                   call with that id; with id 0, the agent closes the connection after it.
 *   FILE_WRITE   C  proto_file_write, then the path NUL-terminated. Followed by DATA frames
 *                   and one END with the same id. The agent writes a temporary file beside
 *                   the path and renames it over the path at END, then answers OK; any
 *                   failure answers ERROR at once and later frames with that id are ignored.
 *   FILE_READ    C  the path, NUL-terminated. Answered by DATA frames, then END (or ERROR).
 *   DATA         B  file bytes, in order.
 *   END          B  empty: the end of a file's data or of a listing.
 *   STAT         C  the path, NUL-terminated (lstat: a symlink is not followed).
 *   STAT_REPLY   A  proto_stat.
 *   LIST         C  the path of a directory, NUL-terminated. Answered by one DIRENT per
 *                   entry ("." and ".." left out), then END; or ERROR.
 *   DIRENT       A  proto_stat of the entry, then its name (not NUL-terminated).
 *   MKDIR        C  proto_mkdir, then the path NUL-terminated. OK or ERROR.
 *   REMOVE       C  proto_remove, then the path NUL-terminated. OK or ERROR.
 *   SYNC         C  empty: sync(2). OK.
 *   RESEED       C  1 to PROTO_RESEED_MAX random bytes, credited to the guest's entropy pool
 *                   (RNDADDENTROPY on /dev/urandom), then the CRNG reseeded from the pool at
 *                   once (RNDRESEEDCRNG), so a restored or forked VM's random numbers differ
 *                   from its siblings' from the next read on. OK or ERROR (with the errno of
 *                   the step that failed).
 *   SHUTDOWN     C  proto_shutdown: sync, answer OK, then reset (or power off) the VM.
 *   SET_CLOCK    C  proto_set_clock: step CLOCK_REALTIME to that time (a restored or forked
 *                   VM's clock resumes from the snapshot's moment). OK; ERROR EINVAL for
 *                   nsec >= 1e9, reserved != 0 or sec > INT64_MAX; else ERROR with
 *                   clock_settime's errno.
 *   SESSION_EXEC C  proto_session, then the command id (id_len bytes, not terminated), then
 *                   cwd, argv[argc], env[envc] as in EXEC. Get-or-create: when a session with
 *                   that command id exists, this attaches to it (the rest is ignored, no second
 *                   process). Answered by STARTED (pid), SESSION_OUT from the offsets, then
 *                   EXIT; or ERROR (cannot start; EAGAIN: too many sessions or attachments;
 *                   ESTALE "SessionExpired": that id's session ended past its ttl).
 *   SESSION_ATTACH C proto_session_attach, then the command id. Answered as an attach by
 *                   SESSION_EXEC; an unknown id is ERROR ENOENT "CommandNotFound", an expired
 *                   one ERROR ESTALE "SessionExpired".
 *   SESSION_OUT  A  proto_session_out, then at most PROTO_DATA_CHUNK bytes of valid UTF-8 (the
 *                   stream as the agent stores it), never a character split between frames.
 *   SESSION_DETACH C empty, id of a SESSION_EXEC/ATTACH call: end that attachment with OK; the
 *                   command goes on (unless it is KILL_ON_DISCONNECT and that was its last
 *                   attachment). An id that is not an attachment is ignored.
 *   SESSION_LIST C  empty. Answered by one DATA (proto_session_info, then the command id) per
 *                   session the agent holds, then END.
 *
 * A session's STDIN, STDIN_CLOSE and RESIZE frames carry the id of an attached call; SIGNAL
 * with that id as target_id signals the session's process group.
 */
#define PROTO_MESSAGES(X)                                                                          \
	X(HELLO, 1, 8, B)                                                                          \
	X(PING, 2, 0, C)                                                                           \
	X(PONG, 3, 8, A)                                                                           \
	X(EXEC, 4, 24, C)                                                                          \
	X(STARTED, 5, 8, A)                                                                        \
	X(STDOUT, 6, 0, A)                                                                         \
	X(STDERR, 7, 0, A)                                                                         \
	X(EXIT, 8, 16, A)                                                                          \
	X(STDIN, 9, 0, C)                                                                          \
	X(STDIN_CLOSE, 10, 0, C)                                                                   \
	X(RESIZE, 11, 8, C)                                                                        \
	X(SIGNAL, 12, 16, C)                                                                       \
	X(OK, 13, 0, A)                                                                            \
	X(ERROR, 14, 8, A)                                                                         \
	X(FILE_WRITE, 15, 16, C)                                                                   \
	X(FILE_READ, 16, 1, C)                                                                     \
	X(DATA, 17, 0, B)                                                                          \
	X(END, 18, 0, B)                                                                           \
	X(STAT, 19, 1, C)                                                                          \
	X(STAT_REPLY, 20, 32, A)                                                                   \
	X(LIST, 21, 1, C)                                                                          \
	X(DIRENT, 22, 32, A)                                                                       \
	X(MKDIR, 23, 8, C)                                                                         \
	X(REMOVE, 24, 8, C)                                                                        \
	X(SYNC, 25, 0, C)                                                                          \
	X(RESEED, 26, 1, C)                                                                        \
	X(SHUTDOWN, 27, 8, C)                                                                      \
	X(SET_CLOCK, 28, 16, C)                                                                    \
	X(SESSION_EXEC, 29, 56, C)                                                                 \
	X(SESSION_ATTACH, 30, 24, C)                                                               \
	X(SESSION_OUT, 31, 16, A)                                                                  \
	X(SESSION_DETACH, 32, 0, C)                                                                \
	X(SESSION_LIST, 33, 0, C)

enum proto_msg_type {
#define PROTO_X_ENUM(name, value, min_len, dir) PROTO_MSG_##name = value,
	PROTO_MESSAGES(PROTO_X_ENUM)
#undef PROTO_X_ENUM
};

/* The highest type value of PROTO_MESSAGES (proto.c checks every value against it). */
#define PROTO_MSG_MAX 33u

/* HELLO: each side's protocol version. */
struct proto_hello {
	uint32_t version;     /* PROTO_VERSION */
	uint32_t max_payload; /* PROTO_MAX_PAYLOAD of the sender */
};
_Static_assert(sizeof(struct proto_hello) == 8, "proto_hello layout");

/* PONG: time since the guest kernel booted (CLOCK_BOOTTIME). */
struct proto_pong {
	uint64_t uptime_ms;
};
_Static_assert(sizeof(struct proto_pong) == 8, "proto_pong layout");

/* proto_exec.flags */
#define PROTO_EXEC_STDIN 0x1u /* the client sends STDIN/STDIN_CLOSE; else stdin is /dev/null */
#define PROTO_EXEC_PTY	 0x2u /* run on a new pty (stdout carries both streams) */
#define PROTO_EXEC_FLAGS (PROTO_EXEC_STDIN | PROTO_EXEC_PTY)

/* uid or gid that means "the agent's own" (root). */
#define PROTO_ID_KEEP 0xffffffffu

/*
 * EXEC: followed by 1 + argc + envc NUL-terminated strings: cwd ("" for "/"), argv, env.
 * argc is at least 1; argv[0] is the program, looked up in PATH (of env if it sets one, else
 * the agent's) when it holds no '/'. env is the whole environment of the child.
 */
struct proto_exec {
	uint32_t flags;	     /* PROTO_EXEC_* */
	uint32_t uid;	     /* or PROTO_ID_KEEP */
	uint32_t gid;	     /* or PROTO_ID_KEEP */
	uint32_t timeout_ms; /* 0: none; else SIGKILL the process group after it, timed out */
	uint16_t rows;	     /* pty window size (0: the kernel's default) */
	uint16_t cols;
	uint16_t argc;
	uint16_t envc;
};
_Static_assert(sizeof(struct proto_exec) == 24, "proto_exec layout");

/* STARTED */
struct proto_started {
	uint32_t pid; /* in the guest's pid namespace */
	uint32_t reserved;
};
_Static_assert(sizeof(struct proto_started) == 8, "proto_started layout");

/* proto_exit.flags */
#define PROTO_EXIT_SIGNALED  0x1u /* killed by signal; code is 128 + signal, as a shell has it */
#define PROTO_EXIT_TIMED_OUT 0x2u /* the agent killed it at timeout_ms */
#define PROTO_EXIT_CORE	     0x4u /* it dumped core */

/* EXIT */
struct proto_exit {
	uint32_t code;	 /* exit status 0-255, or 128 + signal */
	uint32_t signal; /* the signal that killed it, 0 if it exited */
	uint32_t flags;	 /* PROTO_EXIT_* */
	uint32_t reserved;
};
_Static_assert(sizeof(struct proto_exit) == 16, "proto_exit layout");

/* RESIZE */
struct proto_winsize {
	uint16_t rows;
	uint16_t cols;
	uint32_t reserved;
};
_Static_assert(sizeof(struct proto_winsize) == 8, "proto_winsize layout");

/* SIGNAL */
struct proto_signal {
	uint64_t target_id; /* the id of the EXEC, or of a session attachment, to signal */
	uint32_t signal;    /* Linux signal number */
	uint32_t reserved;
};
_Static_assert(sizeof(struct proto_signal) == 16, "proto_signal layout");

/* ERROR: followed by a human-readable message. */
struct proto_error {
	uint32_t err; /* a Linux errno value */
	uint32_t reserved;
};
_Static_assert(sizeof(struct proto_error) == 8, "proto_error layout");

/* FILE_WRITE: followed by the path, NUL-terminated. */
struct proto_file_write {
	uint32_t mode; /* permission bits (07777) */
	uint32_t uid;  /* or PROTO_ID_KEEP */
	uint32_t gid;  /* or PROTO_ID_KEEP */
	uint32_t reserved;
};
_Static_assert(sizeof(struct proto_file_write) == 16, "proto_file_write layout");

/* STAT_REPLY, and the head of DIRENT. */
struct proto_stat {
	uint64_t size;
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	uint32_t mode; /* st_mode: type and permission bits */
	uint32_t uid;
	uint32_t gid;
};
_Static_assert(sizeof(struct proto_stat) == 32, "proto_stat layout");

/* proto_mkdir.flags */
#define PROTO_MKDIR_PARENTS 0x1u /* mkdir -p: create missing parents, an existing dir is OK */

/* MKDIR: followed by the path, NUL-terminated. */
struct proto_mkdir {
	uint32_t mode;
	uint32_t flags; /* PROTO_MKDIR_* */
};
_Static_assert(sizeof(struct proto_mkdir) == 8, "proto_mkdir layout");

/* proto_remove.flags */
#define PROTO_REMOVE_RECURSIVE 0x1u /* rm -r: a directory and everything under it */

/* REMOVE: followed by the path, NUL-terminated. */
struct proto_remove {
	uint32_t flags; /* PROTO_REMOVE_* */
	uint32_t reserved;
};
_Static_assert(sizeof(struct proto_remove) == 8, "proto_remove layout");

/* Most bytes one RESEED may carry. */
#define PROTO_RESEED_MAX 512u

/* proto_shutdown.flags */
#define PROTO_SHUTDOWN_POWEROFF 0x1u /* power off instead of the default reset */

/* SHUTDOWN */
struct proto_shutdown {
	uint32_t flags; /* PROTO_SHUTDOWN_* */
	uint32_t reserved;
};
_Static_assert(sizeof(struct proto_shutdown) == 8, "proto_shutdown layout");

/* SET_CLOCK: a CLOCK_REALTIME time. */
struct proto_set_clock {
	uint64_t sec;	   /* seconds since the epoch */
	uint32_t nsec;	   /* nanoseconds, below 1000000000 */
	uint32_t reserved; /* 0 */
};
_Static_assert(sizeof(struct proto_set_clock) == 16, "proto_set_clock layout");

/* proto_session.flags: PROTO_EXEC_STDIN, PROTO_EXEC_PTY, and: */
#define PROTO_SESSION_KILL_ON_DISCONNECT 0x4u /* killed when its last attachment goes */
/* argv[0] not found (ENOENT): /bin/sh runs with the same arguments instead (the API's clients
 * all ask for /bin/bash, which busybox and Alpine images lack) */
#define PROTO_SESSION_SHELL_FALLBACK	 0x8u
#define PROTO_SESSION_FLAGS                                                                        \
	(PROTO_EXEC_FLAGS | PROTO_SESSION_KILL_ON_DISCONNECT | PROTO_SESSION_SHELL_FALLBACK)
/* idle_timeout_s: never; ttl_s: kept until the VM dies. */
#define PROTO_SESSION_NEVER  0xffffffffu
#define PROTO_SESSION_ID_MAX 128u /* bytes of a command id (1 at least) */

/*
 * SESSION_EXEC: followed by id_len bytes of command id (opaque, not terminated), then 1 + argc
 * + envc NUL-terminated strings: cwd, argv, env, as in EXEC.
 */
struct proto_session {
	uint32_t flags;		 /* PROTO_EXEC_STDIN | PROTO_EXEC_PTY | PROTO_SESSION_* */
	uint32_t uid;		 /* or PROTO_ID_KEEP */
	uint32_t gid;		 /* or PROTO_ID_KEEP */
	uint32_t timeout_ms;	 /* 0: none; else SIGKILL the group after it, timed out */
	uint32_t idle_timeout_s; /* running with no attachment this long: killed; or NEVER */
	uint32_t ttl_s;		 /* an ended session is kept this long for replay; or NEVER */
	uint16_t id_len;	 /* 1..PROTO_SESSION_ID_MAX */
	uint16_t argc;
	uint16_t envc;
	uint16_t rows; /* pty window size (0: the kernel's default) */
	uint16_t cols;
	uint16_t reserved;	/* 0 */
	uint32_t reserved2;	/* 0 */
	uint64_t stdout_offset; /* replay from here on an attach (0 for a new session) */
	uint64_t stderr_offset;
};
_Static_assert(sizeof(struct proto_session) == 56, "proto_session layout");

/* SESSION_ATTACH: followed by id_len bytes of command id. */
struct proto_session_attach {
	uint64_t stdout_offset; /* older than the earliest byte held: from that byte */
	uint64_t stderr_offset;
	uint16_t id_len;
	uint16_t reserved;
	uint32_t reserved2;
};
_Static_assert(sizeof(struct proto_session_attach) == 24, "proto_session_attach layout");

/* proto_session_out.stream */
#define PROTO_STREAM_STDOUT 1u
#define PROTO_STREAM_STDERR 2u

/* SESSION_OUT: followed by the bytes of the stream from offset on. */
struct proto_session_out {
	uint32_t stream; /* PROTO_STREAM_* */
	uint32_t reserved;
	uint64_t offset; /* absolute, in the stream as stored (sanitised UTF-8) */
};
_Static_assert(sizeof(struct proto_session_out) == 16, "proto_session_out layout");

/* proto_session_info.flags */
#define PROTO_SESSION_RUNNING 0x1u /* its process (or its group holding the output) runs */
#define PROTO_SESSION_EXITED  0x2u /* ended: exit_code and exit_flags are set */
#define PROTO_SESSION_PTY     0x4u

/* The DATA frames of SESSION_LIST: followed by the command id. */
struct proto_session_info {
	uint32_t pid;
	uint32_t flags;	     /* PROTO_SESSION_RUNNING | EXITED | PTY */
	uint32_t exit_code;  /* as in EXIT, once EXITED */
	uint32_t exit_flags; /* PROTO_EXIT_* once EXITED */
	uint64_t stdout_len; /* bytes stored so far (the end offset) */
	uint64_t stderr_len;
	uint64_t started_ms; /* CLOCK_REALTIME of its start, ms since the epoch */
};
_Static_assert(sizeof(struct proto_session_info) == 40, "proto_session_info layout");

/* Little-endian field access, independent of the host's byte order and alignment. */
static inline uint16_t proto_get_le16(const void *p)
{
	const uint8_t *b = p;

	return (uint16_t)(b[0] | b[1] << 8);
}

static inline uint32_t proto_get_le32(const void *p)
{
	const uint8_t *b = p;

	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline uint64_t proto_get_le64(const void *p)
{
	const uint8_t *b = p;

	return (uint64_t)proto_get_le32(b) | (uint64_t)proto_get_le32(b + 4) << 32;
}

/* True for the agent's frames that end a call (the list at the top of this file). */
static inline int proto_msg_is_final(uint16_t type)
{
	return type == PROTO_MSG_EXIT || type == PROTO_MSG_OK || type == PROTO_MSG_PONG ||
	       type == PROTO_MSG_STAT_REPLY || type == PROTO_MSG_END || type == PROTO_MSG_ERROR;
}

static inline void proto_put_le16(void *p, uint16_t v)
{
	uint8_t *b = p;

	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
}

static inline void proto_put_le32(void *p, uint32_t v)
{
	uint8_t *b = p;

	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)(v >> 16);
	b[3] = (uint8_t)(v >> 24);
}

static inline void proto_put_le64(void *p, uint64_t v)
{
	proto_put_le32(p, (uint32_t)v);
	proto_put_le32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}

/* --- proto.c: the codec, shared by the agent and the host tools (C11 + POSIX only) --- */

/* The name of a message type ("EXEC"), or NULL for an unknown type. */
const char *proto_type_name(uint16_t type);

/*
 * The minimum payload length of a known type in *min_len. Returns 0, or -EBADMSG for an
 * unknown type.
 */
int proto_type_min_len(uint16_t type, uint32_t *min_len) __attribute__((warn_unused_result));

/*
 * Check a header as a receiver must before reading its payload: flags zero, type known, len
 * within [minimum of the type, PROTO_MAX_PAYLOAD]. Returns 0, -EMSGSIZE (too long), -EBADMSG
 * (unknown type) or -EPROTO (too short for its type, or non-zero flags); *why (if not NULL)
 * then points at a static description.
 */
int proto_hdr_check(const struct proto_hdr *hdr, const char **why)
	__attribute__((warn_unused_result));

/* Encode hdr into its 16 wire bytes at out. */
void proto_hdr_encode(const struct proto_hdr *hdr, uint8_t out[PROTO_HDR_LEN]);

/* Decode 16 wire bytes at in into *hdr (no check: see proto_hdr_check). */
void proto_hdr_decode(const uint8_t in[PROTO_HDR_LEN], struct proto_hdr *hdr);

/*
 * Encode one whole frame (header of type/id, then payload_len bytes of payload) into out,
 * which holds out_cap bytes. Returns the frame's length, or -EMSGSIZE if payload_len exceeds
 * PROTO_MAX_PAYLOAD or the frame does not fit in out_cap.
 */
long proto_frame_encode(uint8_t *out, size_t out_cap, uint16_t type, uint64_t id,
			const void *payload, uint32_t payload_len)
	__attribute__((warn_unused_result));

/*
 * Walk NUL-terminated strings in a payload: *off is where the next string starts; on success
 * *str points at it (inside buf) and *off moves past its NUL. Returns 0, or -EPROTO if no
 * NUL is left before len.
 */
int proto_next_string(const uint8_t *buf, size_t len, size_t *off, const char **str)
	__attribute__((warn_unused_result));

/* One complete frame handed out by the decoder; payload stays valid until its next call. */
struct proto_frame {
	struct proto_hdr hdr;
	const uint8_t *payload;
};

/*
 * An incremental decoder: bytes go in as they arrive, complete and checked frames come out.
 * Its buffer grows to the largest frame seen (never beyond PROTO_MAX_PAYLOAD, and only after
 * that frame's header passed proto_hdr_check). After an error it stays failed.
 */
struct proto_decoder {
	uint8_t hdr_bytes[PROTO_HDR_LEN];
	uint32_t hdr_have; /* header bytes collected */
	struct proto_hdr hdr;
	uint8_t *buf; /* the payload of the frame being collected */
	uint32_t buf_cap;
	uint32_t buf_have;
	int err;	   /* 0, or the -errno that failed it */
	const char *why;   /* a description of err */
	int frame_pending; /* the last feed returned a frame: reset on the next */
};

/* Make d empty. */
void proto_decoder_init(struct proto_decoder *d);

/* Free d's buffer; d may be initialised again. */
void proto_decoder_free(struct proto_decoder *d);

/*
 * Feed up to len bytes of in. Stops at the end of the first complete frame: *used says how
 * many bytes were taken (feed the rest again). Returns 1 with *frame filled, 0 when every byte
 * was taken and no frame is complete yet, or a -errno of proto_hdr_check (or -ENOMEM) with
 * proto_decoder_error() saying why; the decoder then stays failed.
 */
int proto_decoder_feed(struct proto_decoder *d, const void *in, size_t len, size_t *used,
		       struct proto_frame *frame) __attribute__((warn_unused_result));

/* Why the decoder failed ("" if it did not). */
const char *proto_decoder_error(const struct proto_decoder *d);

#endif /* SANDBOX_GUEST_PROTO_H */
