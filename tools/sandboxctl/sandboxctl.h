/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl: the command line that creates, drives and destroys sandboxes. No daemon: every
 * command reads the state under $SANDBOX_HOME, talks to the sandbox's VMM (api.sock,
 * wire/api_proto.h) and agent (vsock.sock, wire/proto.h) and exits. One file per command
 * (cmd_*.c); this header is what they share: the state directory (state.c), the clients
 * (api_client.c, agent_client.c) and small helpers (util.c).
 *
 * Internal functions return 0 or -errno and print nothing unless their comment says so;
 * commands (cmd_*) print one-line errors and return an exit status (docs/sandboxctl.md).
 */
#ifndef SANDBOXCTL_H
#define SANDBOXCTL_H

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

/* ---- host.c: can sandboxes boot here? ---- */

/* Why a host of KVM `flavour` (enum kvm_flavour) cannot boot a sandbox, or NULL when it can:
 * no usable /dev/kvm, or kvm-pvm. */
const char *host_refusal(int flavour, bool kvm_usable);
/* Before a VMM is started: 0 when this host can boot sandboxes (or SANDBOX_SKIP_HOST_CHECK=1
 * says to try anyway), else prints why not and what works here and returns EXIT_SANDBOX. */
int host_check_linux(void);

/* ---- cmd_create.c ---- */

#define CREATE_DEFAULT_IMAGE "debian"
struct create_opts {
	const char *image;
	const char *name; /* NULL: the id is the name */
	const char *console;
	unsigned cpus;
	uint64_t memory_mib;
	uint64_t disk_size_gib; /* 0: the image's */
	unsigned timeout_s;	/* for the agent's first answer */
	bool no_wait;
	const char *disks[EXTRA_DISKS_MAX]; /* --disk PATH[:ro], checked by create */
	bool disks_ro[EXTRA_DISKS_MAX];
	unsigned ndisks;
};
#define CREATE_OPTS_DEFAULT                                                                        \
	{                                                                                          \
		.image = CREATE_DEFAULT_IMAGE, .cpus = 1, .memory_mib = 512, .timeout_s = 60,      \
	}
/* Create and start a sandbox (create's whole job but printing the id). Prints its errors and
 * returns an exit status; on failure nothing of the sandbox is left. */
int sandbox_create(const struct create_opts *o, struct sandbox *sb);
/* Start the VMM of `sb` (its directory, config and root.layer exist), write its pid file and,
 * unless `no_wait`, wait up to `timeout_s` for its agent. The console goes to `console_opt`,
 * else console.log (appended). Prints its errors and returns an exit status; on failure the
 * caller cleans up. */
int sandbox_boot(struct sandbox *sb, const char *console_opt, unsigned timeout_s, bool no_wait);

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
/* Print an ERROR frame's message as "sandboxctl: what: message (strerror)". */
void agent_print_error(const char *what, const struct proto_frame *f);

/* ---- exec.c: one command through the agent ---- */

struct exec_opts {
	char **argv;
	int argc;
	char **env; /* K=V, after (and overriding) PATH, HOME, LANG and, with tty, TERM */
	unsigned nenv;
	const char *cwd;    /* NULL: / */
	unsigned timeout_s; /* 0: none */
	bool interactive;   /* forward our stdin */
	bool tty;	    /* a pty in the guest; our terminal raw when interactive */
};
/* Run the command, streaming its output to ours. Returns its exit status (128+N for signal
 * N), EXIT_TIMEOUT, EXIT_CMD_EXEC when the agent could not start it (the message says why),
 * EXIT_SANDBOX when the agent cannot be reached or the connection is lost. */
int exec_run(const struct sandbox *sb, const struct exec_opts *o);
/* Resolve `ref` and check that it runs: prints why not and returns EXIT_SANDBOX, else 0. */
int sandbox_resolve_running(const char *ref, struct sandbox *sb);

/* ---- jobspec.c: the job specs of sandboxctl run (libyaml) ---- */

struct job_step {
	char *name;
	char *run; /* a sh -c script */
	unsigned timeout_s;
};
struct jobspec {
	char image[NAME_MAX_LEN + 1];
	unsigned cpus;
	uint64_t memory_mib;
	unsigned timeout_s; /* the whole job; 0: none */
	char **env;	    /* K=V */
	unsigned nenv;
	struct job_step *steps;
	unsigned nsteps;
};
/* Parse the spec at `path`. On failure `err` says why as "FILE:LINE:COLUMN: what"; call
 * jobspec_free either way. */
int jobspec_load(const char *path, struct jobspec *js, char *err, size_t err_len) __must_check;
void jobspec_free(struct jobspec *js);

/* ---- images (cmd_images.c) ---- */

/* $SANDBOX_HOME/images/<name>/<file>; -ENOENT when the image lacks it. */
int image_path(const char *name, const char *file, char *out, size_t len) __must_check;

/* ---- the commands: argv[0] is the command's name ---- */

int cmd_images(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_start(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_pause(int argc, char **argv); /* pause and resume */
int cmd_exec(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_run(int argc, char **argv);

#endif
