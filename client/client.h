/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host-side client library: what sandboxctl, the benchmarks and the tests share to reach
 * sandboxes. The state directory under $SANDBOX_HOME (state.c), the VMM's control socket
 * (api_client.c, wire/api_proto.h), the guest agent (agent_client.c, wire/proto.h: connect,
 * frames, and agent_call, which assigns a call's id and waits for its final frame), and small
 * helpers (util.c).
 *
 * Functions return 0 or -errno and print nothing unless their comment says so.
 */
#ifndef SANDBOX_CLIENT_H
#define SANDBOX_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define __must_check __attribute__((warn_unused_result))

/* Exit statuses (docs/sandboxctl.md). exec returns the command's own status. */
#define EXIT_OK	      0
#define EXIT_ERR      1	  /* an error: the message says what */
#define EXIT_USAGE    2	  /* bad command line */
#define EXIT_TIMEOUT  124 /* exec --timeout expired (as timeout(1)) */
#define EXIT_SANDBOX  125 /* the sandbox is unusable: unknown, not running, VMM or agent dead */
#define EXIT_CMD_EXEC 126 /* found but could not be executed (from the agent) */

#define ID_LEN		12 /* hex digits of a sandbox id */
#define EXTRA_DISKS_MAX 3  /* --disk: /dev/vdb, vdc, vdd beside the root disk */
#define DISK_PATH_MAX	1024
#define NAME_MAX_LEN	63 /* names: [A-Za-z0-9][A-Za-z0-9._-]* */

/* ---- util.c ---- */

/* "sandboxctl: " + the message + "\n" on stderr. */
void errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parse a decimal number in [min, max]; false on anything else. */
bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* True for [A-Za-z0-9][A-Za-z0-9._-]{0,NAME_MAX_LEN-1}. */
bool valid_name(const char *s);
/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t now_ms(void);
/* Write `len` bytes to `path` atomically: a temporary file beside it, fsync, rename, fsync of
 * the directory. */
int write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode) __must_check;
/* Read a regular file of at most `max` bytes into a NUL-terminated malloc'ed buffer. */
int read_file(const char *path, size_t max, char **out, size_t *len) __must_check;
/* write() all of it, retrying on EINTR and short writes. */
int write_all(int fd, const void *buf, size_t len) __must_check;
/* Print the last `nlines` lines of the file `path` to stderr, each indented, for errors. */
void print_tail(const char *path, unsigned nlines);
/* Remove a directory of plain files (a sandbox's or an image's: neither has subdirectories). */
void remove_flat_dir(const char *path);
/* snprintf that reports truncation as -ENAMETOOLONG. */
int path_fmt(char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4))) __must_check;

/* ---- state.c: $SANDBOX_HOME ---- */

/* The state root: $SANDBOX_HOME, else /var/lib/sandbox. */
const char *state_home(void);
/* Make $SANDBOX_HOME/{images,sandboxes} if missing. */
int state_init(void) __must_check;

enum sandbox_state { SB_RUNNING, SB_PAUSED, SB_STOPPED, SB_DEAD };
const char *sandbox_state_name(enum sandbox_state s);

/* A sandbox as its directory describes it (the file `config`). */
struct sandbox {
	char id[ID_LEN + 1];
	char name[NAME_MAX_LEN + 1];
	char image[NAME_MAX_LEN + 1];
	unsigned cpus;
	uint64_t memory_mib;
	uint64_t created; /* seconds since the epoch */
	char dir[4096];	  /* $SANDBOX_HOME/sandboxes/<id> */
	pid_t pid;	  /* of the VMM, 0 when there is no pid file */
	/* Extra disks (create --disk), in /dev/vdb.. order: absolute paths without commas. */
	struct {
		char path[DISK_PATH_MAX];
		bool ro;
	} disks[EXTRA_DISKS_MAX];
	unsigned ndisks;
};

/* Write `sb`'s config atomically into sb->dir. */
int sandbox_save(const struct sandbox *sb) __must_check;
/* Load the sandbox whose directory is $SANDBOX_HOME/sandboxes/<id>; every field is checked.
 * -ENOENT no such sandbox, -EBADMSG a config that does not parse. */
int sandbox_load(const char *id, struct sandbox *sb) __must_check;
/* Find a sandbox by full id, unique id prefix or name. Prints the error and returns
 * EXIT_SANDBOX (unknown, ambiguous) or 0. */
int sandbox_resolve(const char *ref, struct sandbox *sb);
/* The path of a file in the sandbox's directory. */
int sandbox_path(const struct sandbox *sb, const char *file, char *out, size_t len) __must_check;
/* Is the VMM of pid file alive (and really ours: its command line names this directory)? */
bool sandbox_vmm_alive(const struct sandbox *sb);
/* The state: stopped (a `stopped` marker), dead (no live VMM), else paused or running as the
 * VMM says. `uptime_ms` (may be NULL) gets the VMM's uptime when it answered, else 0. */
enum sandbox_state sandbox_state(const struct sandbox *sb, uint64_t *uptime_ms);
/* Call `fn` for every sandbox directory that loads (others are reported on stderr). Returns
 * the number of sandboxes, or -errno. */
int sandbox_foreach(int (*fn)(const struct sandbox *sb, void *opaque), void *opaque);
/* Stop the VMM: the API's shutdown, then SIGTERM, then SIGKILL, each with a timeout; then
 * mark it stopped and remove its sockets. Prints what it had to force. */
int sandbox_stop_vmm(struct sandbox *sb, bool force) __must_check;

/* ---- api_client.c: wire/api_proto.h over api.sock ---- */

struct api_status;
/* One request of `type` and its reply; *error gets the reply's error (0 or -errno). `status`
 * (may be NULL) receives a STATUS reply's body in host byte order. Times out after
 * `timeout_ms`. Returns -errno when the socket itself failed. */
int api_call(const struct sandbox *sb, uint16_t type, unsigned timeout_ms, int32_t *error,
	     struct api_status *status) __must_check;

/* ---- agent_client.c: wire/proto.h through vsock.sock (CONNECT 52) ---- */

struct proto_frame;
struct agent_conn {
	int fd;
	uint64_t next_id; /* the next call's id */
	void *dec;	  /* struct proto_decoder */
	uint8_t *rbuf;	  /* bytes read, not yet decoded: [roff, rlen) */
	size_t roff, rlen;
	bool in_dec;	   /* dec holds part of a frame: the next bytes are its rest */
	int send_stall_ms; /* agent_send gives up after this long without progress; 0: default */
};
/* Connect to the agent of `sb` and exchange HELLO, within `timeout_ms`. -ECONNREFUSED or
 * -ENOENT while the guest is not up yet, -EPROTO for a peer that does not speak the
 * protocol. */
int agent_connect(const struct sandbox *sb, unsigned timeout_ms, struct agent_conn *c) __must_check;
/* The same through the VMM's vsock socket at `vsock_path` (a sandbox's vsock.sock). */
int agent_connect_path(const char *vsock_path, unsigned timeout_ms,
		       struct agent_conn *c) __must_check;
void agent_close(struct agent_conn *c);
/* Send one frame, waiting while the socket is full, but -ETIMEDOUT after
 * c->send_stall_ms (default AGENT_SEND_STALL_MS) without progress: a guest that stopped
 * reading. */
#define AGENT_SEND_STALL_MS 60000
int agent_send(struct agent_conn *c, uint16_t type, uint64_t id, const void *payload,
	       uint32_t len) __must_check;
/* The next frame, waiting up to `timeout_ms` (-1: for ever). Returns 1 with *f filled (valid
 * until the next call), 0 on timeout, -ECONNRESET when the agent closed, -EPROTO on a frame
 * that fails its checks. */
int agent_recv(struct agent_conn *c, int timeout_ms, struct proto_frame *f) __must_check;
/* True when a frame (or part of one) is buffered: poll() would not say so. */
bool agent_buffered(const struct agent_conn *c);
/* Connect and ping; *uptime_ms gets the guest's uptime. */
int agent_ping(const struct sandbox *sb, unsigned timeout_ms, uint64_t *uptime_ms) __must_check;
/* One whole call on `c`: send a `type` frame with `payload` under the connection's next id,
 * then take that id's frames until its final one (proto_msg_is_final), which lands in *final
 * (valid until the next receive on `c`). Each frame before it (STDOUT, DATA, DIRENT...) goes
 * to `on_frame` when it is not NULL; a negative return from on_frame ends the call with that
 * error. Frames of other ids (calls still running on `c`) are skipped. -ETIMEDOUT when no
 * final frame came within `timeout_ms` in all (-1: no limit). */
int agent_call(struct agent_conn *c, uint16_t type, const void *payload, uint32_t len,
	       int timeout_ms, int (*on_frame)(void *arg, const struct proto_frame *f), void *arg,
	       struct proto_frame *final) __must_check;
/* Print an ERROR frame's message as "sandboxctl: what: message (strerror)". */
void agent_print_error(const char *what, const struct proto_frame *f);

#endif
