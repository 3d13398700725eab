/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host-side client library: what sandboxctl, the benchmarks and the tests share to reach
 * sandboxes. The state directory under $SANDBOX_HOME (state.c), the VMM's control socket
 * (api_client.c, wire/api_proto.h), the guest agent (agent_client.c, wire/proto.h: connect,
 * frames, and agent_call, which assigns a call's id and waits for its final frame), and small
 * helpers (util.c).
 *
 * Functions return 0 or -errno and print nothing: what a lifecycle verb has to say goes through
 * its caller's reporter (struct lc_report). Only a child forked to exec another program (the
 * VMM, the proxy, nft) writes its own failure to exec on the stderr it was given.
 */
#ifndef SANDBOX_CLIENT_H
#define SANDBOX_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>

#define __must_check __attribute__((warn_unused_result))

#include "hostutil.h" /* now_ms, write_all, write_file_atomic, read_file, parse_u64 */

struct lc_report; /* lifecycle.c's reporter, below */

#define ID_LEN		     12 /* hex digits of a sandbox id */
#define EXTRA_DISKS_MAX	     3	/* --disk: /dev/vdb, vdc, vdd beside the root disk */
#define DISK_PATH_MAX	     1024
#define NAME_MAX_LEN	     63 /* names: [A-Za-z0-9][A-Za-z0-9._-]* */
/* The image a sandbox (a create, a job spec) gets when it names none. */
#define CREATE_DEFAULT_IMAGE "debian"

/* ---- util.c ---- */

/* "sandboxctl: " + the message + "\n" on stderr. */
void errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Make text from a guest or a file safe to print on a terminal, in place: control bytes (C0,
 * DEL), C1 controls and bytes of invalid UTF-8 become '?' one for one; printable ASCII and
 * valid UTF-8 from U+00A0 up stay, and tab and newline when `keep_lines` (a log's lines).
 * Every program of ours prints such text through this (errmsg does for its messages). */
void printable(char *buf, size_t len, bool keep_lines);
/* The values no message of ours shows (secrets: errmsg and printable_copy write "***" for
 * each), `n` strings that stay valid, longest first so a longer one is not half masked. */
void output_mask(const char *const *values, unsigned n);
/* `s` made printable into `out` (cut to out_len - 1 bytes, NUL-terminated; `out` may be `s`),
 * output_mask's values masked; returns out. */
const char *printable_copy(const char *s, char *out, size_t out_len);
/* The environment a process that faces a guest starts with (the VMM, the proxy's daemon):
 * PATH, SANDBOX_SECCOMP, the sanitizers' options and the emulated host's DEVHOST_*, nothing
 * else of ours (no secret). Static, pointing into environ; for execve in a child. */
char *const *child_env(void);
/* A duration: N seconds, or N followed by s, m, h or d; from 1 s to `max_s`. */
bool parse_duration(const char *s, uint64_t max_s, uint64_t *out_s);
/* True for [A-Za-z0-9][A-Za-z0-9._-]{0,NAME_MAX_LEN-1}. */
bool valid_name(const char *s);
/* The last `nlines` lines of the file `path` (its last 8 KiB at most), made printable, each
 * indented under a "--- last lines of PATH ---" line, into `out` (cut to fit, NUL-terminated);
 * returns its length, 0 when the file cannot be read. */
size_t tail_format(const char *path, unsigned nlines, char *out, size_t out_len);
/* Print tail_format's text on stderr, for errors. */
void print_tail(const char *path, unsigned nlines);
/* Remove a directory of plain files and of subdirectories of plain files (a sandbox's, whose
 * proxy/ is one, or an image's), never following a link. */
void remove_flat_dir(const char *path);
/* One of our programs: $`env`, else the build tree's (build/`build_dir`/`name`, beside
 * build/tools/<this program>/), else one installed beside this program, else `name` for
 * execvp's PATH search. */
int program_find(const char *env, const char *build_dir, const char *name, char *out,
		 size_t len) __must_check;
/* snprintf that reports truncation as -ENAMETOOLONG. */
int path_fmt(char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4))) __must_check;

/* ---- state.c: $SANDBOX_HOME ---- */

/* The state root: $SANDBOX_HOME, else /var/lib/sandbox. */
const char *state_home(void);
/* Make $SANDBOX_HOME/{images,sandboxes,snapshots} if missing. */
int state_init(void) __must_check;

enum sandbox_state { SB_RUNNING, SB_PAUSED, SB_STOPPED, SB_DEAD, SB_SUSPENDED };
const char *sandbox_state_name(enum sandbox_state s);

/* A sandbox as its directory describes it (the file `config`). */
struct sandbox {
	char id[ID_LEN + 1];
	char name[NAME_MAX_LEN + 1];
	char image[NAME_MAX_LEN + 1];
	unsigned cpus;
	uint64_t memory_mib;
	uint64_t created;   /* seconds since the epoch */
	char dir[4096];	    /* $SANDBOX_HOME/sandboxes/<id> */
	pid_t pid;	    /* of the VMM, 0 when there is no pid file */
	uint64_t pid_start; /* its start time (pid_start_time), 0 when the pid file has none */
	/* Extra disks (create --disk), in /dev/vdb.. order: absolute paths without commas. */
	struct {
		char path[DISK_PATH_MAX];
		bool ro;
	} disks[EXTRA_DISKS_MAX];
	unsigned ndisks;
	/* The root disk's top layer, a file of `dir`: root.layer, or root.<n>.layer after n
	 * snapshots froze the ones below it (sandbox_find_top; not in the config). */
	char top[32];
	/* A root layer above `top` not owned by root: made by a jailed VMM and not taken over
	 * (sandbox_find_top; the sandbox refuses to start until someone decides). */
	char stray_top[32];
	/* The snapshot this sandbox was restored or forked from, "" when it booted. */
	char base[NAME_MAX_LEN + 2];
	/* true: a NIC behind its own namespace and proxy (create --network proxy, the default);
	 * false: no NIC (--network none). The config says "network proxy|none". */
	bool network;
	/* create --ttl: when the sandbox's lifetime ends, in seconds since the epoch (0: none);
	 * every start of its VMM gives it --timeout for what is left (config "deadline N"). */
	uint64_t deadline;
	/* Not in the config: a pipe's read end its VMM inherits as --lifeline when > 0 (the VMM
	 * stops when the pipe's writer, sandboxctl run, is gone). */
	int lifeline_fd;
};

/* ---- jail.c: the jail each VMM runs in (docs/hardening.md) ---- */

/* Sandbox uids and gids: SANDBOX_UID_BASE + the first 4 hex digits of the id (unique among
 * the sandboxes). The host must not use this range for anything else. */
#define SANDBOX_UID_BASE 0x50000000u
/* Jailed unless SANDBOX_JAIL=off (debugging only). */
bool jail_enabled(void);
uid_t sandbox_uid(const char *id);
/* The sandbox's proxy's uid and gid: SANDBOX_UID_BASE + 0x10000 + the same 16 bits, so never
 * a VMM's. */
#define SANDBOX_PROXY_UID_OFFSET 0x10000u
uid_t sandbox_proxy_uid(const char *id);
/* The sandbox directory as the jail's root: root's, group the sandbox's, mode 1770. */
int sandbox_jail_prepare(const struct sandbox *sb) __must_check;
/* The empty network namespace every jailed VMM joins (made on first use). */
#define JAIL_NETNS_PATH "/run/netns/sandbox-jail"
/* sandbox-vmm's --jail argument (with netns=JAIL_NETNS_PATH when it can be made). */
int sandbox_jail_arg(const struct sandbox *sb, char *out, size_t len) __must_check;
/* Let the jailed VMM connect to the host's socket `path`. */
int sandbox_jail_socket(const struct sandbox *sb, const char *path) __must_check;
/* Take over a file the VMM made: a regular file with one link, the sandbox's or root's,
 * becomes root's, mode 0600; anything else is -EPERM. */
int sandbox_jail_adopt(const struct sandbox *sb, const char *path) __must_check;

/* Set sb->top from the files of sb->dir: the highest-numbered root layer. */
void sandbox_find_top(struct sandbox *sb);
/* Write `sb`'s config atomically into sb->dir. */
int sandbox_save(const struct sandbox *sb) __must_check;
/* Load the sandbox whose directory is $SANDBOX_HOME/sandboxes/<id>; every field is checked.
 * -ENOENT no such sandbox, -EBADMSG a config that does not parse. */
int sandbox_load(const char *id, struct sandbox *sb) __must_check;
/* Find a sandbox by full id, unique id prefix or name: 0, -EINVAL (`ref` cannot be an id or
 * a name), -ENOENT (none), -ENOTUNIQ (a prefix of several), or -errno reading the state. */
int sandbox_find(const char *ref, struct sandbox *sb, const struct lc_report *r) __must_check;
/* The path of a file in the sandbox's directory. */
int sandbox_path(const struct sandbox *sb, const char *file, char *out, size_t len) __must_check;
/* Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot. */
int pid_start_time(pid_t pid, uint64_t *out) __must_check;
/* Is the VMM of pid file alive (and really ours: its command line names this directory)? */
bool sandbox_vmm_alive(const struct sandbox *sb);
/* Call `fn` for every sandbox directory that loads (others are notes through `r`, which may
 * be NULL). Returns the number of sandboxes, or -errno. */
int sandbox_foreach(int (*fn)(const struct sandbox *sb, void *opaque), void *opaque,
		    const struct lc_report *r);
/* True while process `pid` lives and is not a zombie. */
bool pid_running(pid_t pid);
/* $SANDBOX_HOME/images/<name>/<file>; -ENOENT when the image lacks it. */
int image_path(const char *name, const char *file, char *out, size_t len) __must_check;

/* ---- report.c, lifecycle.c: a sandbox's verbs, for every front end (sandboxctl, the daemon) ----
 */

/* A verb's reporter, one a call: what it had to do (a forced stop) goes to `note`, one line
 * without a newline (a NULL reporter, or note, hears nothing); why it failed, when it returns
 * -errno, is left in `error` (one line, or "" when the errno says all). A verb returns -ESRCH
 * when the sandbox is not in a state it can act on (not running, say), so that a front end
 * can tell an unusable sandbox from a failure. */
#define LC_ERROR_MAX 1024 /* errmsg's line */
#define LC_LOG_MAX   (8192 + 4096 + 1024)
struct lc_report {
	void (*note)(void *ctx, const char *line);
	/* Not NULL: show a log's end (lc_log's text) now: a failure the verb goes on after, as the
	 * caller shows a failed verb's r->log. */
	void (*show_log)(void *ctx, const char *text);
	void *ctx;
	/* Not NULL: the caller's flag, set to a signal's number by its handler; the waits give up
	 * (the verb fails, and cleans up) within 500 ms of it. */
	const volatile sig_atomic_t *interrupted;
	char error[LC_ERROR_MAX];
	/* With an error: the caller's options were at fault (lc_bad_option), not the host. */
	bool bad_option;
	/* With an error: the end of a log that says more (a console; lc_log), or "". Its text,
	 * not its path: the log may go with the sandbox that failed. */
	char log[LC_LOG_MAX];
};
/* Say one line through `r` (may be NULL). */
void lc_note(const struct lc_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Leave the message in r->error (r may be NULL) and return `err`, a -errno. */
int lc_fail(struct lc_report *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* lc_fail for an option of the caller's that cannot be served: -EINVAL, r->bad_option. */
int lc_bad_option(struct lc_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Show r->log through r->show_log, when both are there. */
void lc_show_log(const struct lc_report *r);
/* A failure the verb goes on after (it boots instead, another child is waited for): say what
 * r holds as notes (its message, then its log's end) and forget it. */
void lc_demote(struct lc_report *r);
/* Forget the error (a verb that went on after one). */
void lc_clear(struct lc_report *r);
/* Keep the last `lines` lines of `path` as the error's log (r may be NULL). */
void lc_log(struct lc_report *r, const char *path, unsigned lines);
/* The signal that interrupted the caller, or 0. */
int lc_interrupted(const struct lc_report *r);
/* The state: suspended (a `suspended` marker: its snapshot is in snapshots/.suspend-<id>),
 * stopped (a `stopped` marker), dead (no live VMM), else paused or running as the VMM says.
 * `uptime_ms` (may be NULL) gets the VMM's uptime when it answered, else 0. */
enum sandbox_state sandbox_state(const struct sandbox *sb, uint64_t *uptime_ms);
/* Stop the VMM: the API's shutdown, then SIGTERM, then SIGKILL, each with a timeout (what it
 * had to force goes to `r`); then its proxy, network and cgroup, mark it stopped and remove
 * its sockets. 0 or -errno. */
int sandbox_stop_vmm(struct sandbox *sb, bool force, const struct lc_report *r) __must_check;
/* stop: the guest's disks synced (its agent, best effort), then sandbox_stop_vmm. 0 or -errno
 * with r->error. */
int sandbox_stop(struct sandbox *sb, struct lc_report *r) __must_check;
/* start: boot a stopped (or dead) sandbox again from its own disk, waiting up to `timeout_s`
 * for its agent; a failure leaves it stopped. 0, -EBUSY (it runs), -ESRCH (no sandbox boots
 * here, its VMM or agent failed) or -errno, with r->error. */
int sandbox_start(struct sandbox *sb, unsigned timeout_s, struct lc_report *r) __must_check;
/* pause (park its vCPUs) or resume (run them again) a running sandbox: 0, -ESRCH (not
 * running, or its VMM does not answer) or the VMM's -errno, with r->error. */
int sandbox_pause(struct sandbox *sb, bool pause, struct lc_report *r) __must_check;
/* rm: its VMM killed (only with `force` when it runs: else -EBUSY), its proxy, network,
 * cgroup and directory removed, and the hidden snapshots it held (snapshots_gc). */
int sandbox_rm(struct sandbox *sb, bool force, struct lc_report *r) __must_check;

/* ---- cgroup.c: a sandbox's resource limits (docs/hardening.md, "Resource limits") ---- */

/* The memory limit: the guest's RAM, plus the VMM's and the proxy's own memory (measured:
 * docs/hardening.md), plus RAM/CGROUP_OVERHEAD_DIV for what grows with RAM (KVM's page
 * tables, the VMM's dirty bitmaps). */
#define CGROUP_OVERHEAD_BYTES (96ull << 20)
#define CGROUP_OVERHEAD_DIV   64
#define CGROUP_PERIOD_US      100000u	     /* CPU: --cpus periods of this per period */
#define CGROUP_PIDS_BASE      128u	     /* pids: the VMM's share, this plus one per vCPU, */
#define CGROUP_PIDS_PROXY     1048u	     /* plus the proxy's: PROXY_THREADS_MAX (cgroup.c) */
#define CGROUP_IO_BPS	      (256ull << 20) /* I/O on the state's disk: bytes/s each way */
#define CGROUP_IO_IOPS	      8192ull	     /* and requests/s each way */
#define CGROUP_DIR_MAX	      512
/* The memory limit of a sandbox of `memory_mib` of RAM. A fork's child may also be charged
 * the pages of its parent's frozen RAM it is the first to touch (holes), up to its RAM
 * again. */
uint64_t cgroup_memory_limit(uint64_t memory_mib, bool fork_child);
/* Make the cgroup of `sb` (SANDBOX_CGROUP=off|v1|v2|auto, default auto: v2, else v1) with its
 * limits, and record it in sb->dir/cgroup; an existing one (a restart) gets them anew. The
 * memory limit is cgroup_memory_limit's plus `memory_extra`: what the sandbox holds in memory
 * by design besides (its writable disks, when they live on tmpfs).
 * Where neither version is usable (auto) it returns 1 with no cgroup and, the first time in a
 * process, a warning in `err_msg` (else it is empty); a forced version that is not there, or
 * a failure, is -errno with `err_msg` saying what. */
int cgroup_create(const struct sandbox *sb, bool fork_child, uint64_t memory_extra, char *err_msg,
		  size_t err_len) __must_check;
/* Move the calling process into the cgroup of `sb` (between fork and exec: no malloc). 0
 * when `sb` has no cgroup. */
int cgroup_enter(const struct sandbox *sb) __must_check;
/* Remove the cgroup of `sb` once its processes are gone (an rmdir that finds one still
 * leaving is retried for 2 s; then it is a note through `r`, which may be NULL), and its
 * record. */
void cgroup_remove(const struct sandbox *sb, const struct lc_report *r);
/* Around a snapshot of `sb` that leaves memory charged to its cgroup: a fork's (its frozen RAM
 * stays charged to the parent while children map it), or any snapshot whose files land on
 * tmpfs. Begin raises the memory limit by its RAM (the snapshot copies at most that) under a
 * lock; end sets it, and unlocks: with `frozen` (a fork's snapshot was taken) to the base
 * limit plus the shmem charged now (its frozen RAM), never lower than before; else to what
 * it was plus `extra` (the bytes the snapshot left on tmpfs). Without this a fork could get
 * the parent killed. */
struct cgroup_snap {
	int lock_fd;
	uint64_t limit; /* before the snapshot; 0: no cgroup */
};
int cgroup_snap_begin(const struct sandbox *sb, struct cgroup_snap *f) __must_check;
int cgroup_snap_end(const struct sandbox *sb, struct cgroup_snap *f, bool frozen,
		    uint64_t extra) __must_check;
/* What the cgroup of `sb` counted. -ENOENT when it has none. Limits of "max" are
 * UINT64_MAX; memory_peak_bytes is 0 where the kernel does not keep it. */
struct cgroup_stats {
	int version;		  /* 1 or 2 */
	char dir[CGROUP_DIR_MAX]; /* v2: the cgroup; v1: its memory controller's */
	uint64_t cpu_usec;
	uint64_t memory_bytes, memory_peak_bytes, memory_max_bytes, memory_shmem_bytes;
	uint64_t io_read_bytes, io_write_bytes;
	uint64_t pids, pids_max;
};
int cgroup_stats(const struct sandbox *sb, struct cgroup_stats *st) __must_check;

/* ---- net.c: a sandbox's network namespace (docs/network.md) ---- */

/* The same in every sandbox: each has a namespace of its own. */
#define NET_TAP	       "tap0"
#define NET_GATEWAY_IP "10.0.2.1"
#define NET_GATEWAY_MAC_BYTES                                                                      \
	{                                                                                          \
		0x02, 0x53, 0x42, 0x00, 0x00, 0x01                                                 \
	}
#define NET_GUEST_IP	     "10.0.2.2"
#define NET_GUEST_MAC	     "02:53:42:00:00:02"
#define NET_GUEST_CMDLINE    "sandbox.net=" NET_GUEST_IP "/30," NET_GATEWAY_IP
#define NET_PROXY_PORT	     3128u  /* the explicit proxy (HTTPS_PROXY) */
#define NET_TRANSPARENT_PORT 15001u /* every other TCP connection of the guest */

/* /run/netns/sbx-<id>. */
int net_ns_path(const struct sandbox *sb, char *out, size_t len) __must_check;
/* Make the sandbox's namespace afresh (one left over is removed first): loopback, the tap
 * with the gateway's MAC and address, the nftables ruleset. On failure `err_msg` says what
 * (besides what nft printed) and nothing is left. */
/* Make /run/netns (NETNS_DIR) if it is not there. 0 or -errno. */
int net_ns_dir(void) __must_check;
/* A new network namespace bound onto the existing file `path` (as `ip netns add` does), set up
 * inside by `configure` (NULL: left empty). 0, or -errno (-EIO: it failed inside, said on
 * stderr) with `err_msg` saying so. */
int net_ns_make(const char *path, int (*configure)(void), char *err_msg,
		size_t err_len) __must_check;
int net_setup(const struct sandbox *sb, char *err_msg, size_t err_len) __must_check;
/* Remove the namespace (and so its tap, once no process holds it). */
void net_teardown(const struct sandbox *sb);
/* Let the namespace connect to the guest's TCP `port` (sandboxctl port), or stop letting it. */
int net_forward_port(const struct sandbox *sb, unsigned port, bool add) __must_check;
/* Run `nft -f -` in this process's network namespace with `rules` on its stdin, nft's
 * stderr to `err_fd` (-1: ours), within 30 s: 0, -EPROTO (nft refused them or is missing:
 * its message says which), -ETIMEDOUT, -errno. */
int net_nft(const char *rules, int err_fd) __must_check;

/* ---- proxy_client.c: the sandbox's sandbox-proxy (docs/network.md) ---- */

struct agent_conn;
/* $SANDBOX_PROXY, the build tree's, one beside this program, else "sandbox-proxy". */
int proxy_binary(char *out, size_t len) __must_check;
/* `sandbox-proxy prepare DIR --request REQUEST` (a policy request file, netpolicy.h): the
 * policy, the credentials and the CA into the sandbox's directory. The proxy prints its own
 * errors; -EINVAL for a bad policy. */
int proxy_prepare(const struct sandbox *sb, const char *request) __must_check;
/* Start the proxy of `sb` (its namespace exists) and wait until it listens. */
int proxy_start(const struct sandbox *sb) __must_check;
bool proxy_alive(const struct sandbox *sb);
/* Stop the proxy and the port forwarders of `sb` (SIGTERM, then SIGKILL). */
void proxy_stop(const struct sandbox *sb);
/* Forward the host's 127.0.0.1:`host_port` to the guest's `guest_port` until the sandbox
 * stops. -EEXIST when that guest port is forwarded already. */
int proxy_forward(const struct sandbox *sb, unsigned guest_port, unsigned host_port) __must_check;
/* Put the proxy's CA certificate in the guest: /etc/sandbox/ca.pem, /etc/sandbox/bundle.pem
 * (the system's bundle with it), the system bundle itself and
 * /usr/local/share/ca-certificates. */
int proxy_install_ca(const struct sandbox *sb, struct agent_conn *c) __must_check;

/* ---- snapstore.c: $SANDBOX_HOME/snapshots (docs/snapshots.md) ---- */

/* 2: the memory file's page digest and the proxy files' digests are in meta.yaml (under the
 * MAC); format 1 is refused (its MAC covered neither). */
#define SNAP_META_FORMAT   2
#define SNAP_KEY_LEN	   32
#define SNAP_HEX_LEN	   64 /* a SHA-256 in hex */
#define SNAP_LAYERS_MAX	   64
/* A restore of a snapshot with more frozen layers than this makes them one (restore.c). */
#define RESTORE_FLATTEN_AT 8
/* In a sandbox's directory while a lazy restore's pager still fills its disk layers (they hold
 * holes): sandbox_start refuses it. Removed by the pager's owner once they are whole. */
#define SANDBOX_LAZY_MARK  "layers.lazy"
#define SNAP_NET_FILES_MAX 8 /* net.* files a snapshot may hold (snap_net.c has 5) */

/* meta.yaml. */
struct snap_meta {
	unsigned format;
	char name[NAME_MAX_LEN + 2];   /* ".fork-..." for a fork's hidden snapshot */
	char parent[NAME_MAX_LEN + 2]; /* the snapshot the sandbox came from, "" for none */
	char sandbox[ID_LEN + 1];      /* the sandbox it was taken of */
	char image[NAME_MAX_LEN + 1];
	uint64_t created; /* seconds since the epoch */
	unsigned cpus;
	uint64_t memory_mib;
	uint64_t memory_bytes; /* the memory file's size: the guest's RAM */
	uint64_t state_bytes;
	char state_sha256[SNAP_HEX_LEN + 1];
	char root_layer[32]; /* the frozen top of the root disk, a file of the snapshot */
	/* Every layer file of the snapshot (hard links of the sandbox's frozen layers). */
	struct {
		char file[32];
		char sha256[SNAP_HEX_LEN + 1];
	} layers[SNAP_LAYERS_MAX];
	unsigned nlayers;
	char disks[EXTRA_DISKS_MAX][DISK_PATH_MAX]; /* read-only extra disks, in order */
	unsigned ndisks;
	/* The memory file's page digest (wire/api_proto.h), "" when the snapshot has no memory
	 * file (a fork's: its children map the parent's frozen RAM). */
	char memory_sha256[SNAP_HEX_LEN + 1];
	/* The proxy files copied into the snapshot (net.*), each with its SHA-256. */
	struct {
		char file[24];
		char sha256[SNAP_HEX_LEN + 1];
	} net[SNAP_NET_FILES_MAX];
	unsigned nnet;
	bool has_memory; /* snap_open: the memory file is there (a fork's snapshot has none) */
	/* The guest has a NIC behind a proxy; its proxy's files are in the snapshot as net.*
	 * (absent from older snapshots: none). */
	bool network;
};
/* $SANDBOX_HOME/snapshots/<name>. */
int snap_dir(const char *name, char *out, size_t len) __must_check;
/* The host's snapshot key, $SANDBOX_HOME/snapshot.key (0600), made on first use. -EPERM
 * for a key file of another size or that others may read. */
int snap_key(uint8_t key[SNAP_KEY_LEN]) __must_check;
/* SHA-256 of a file's data extents (offset, length, bytes each): holes cost nothing. */
int snap_file_sha256(const char *path, char out[SNAP_HEX_LEN + 1]) __must_check;
/* root.layer or root.<n>.layer. */
bool snap_valid_layer_name(const char *s);
/* snapshot.c: the layer after `top` (root.layer -> root.1.layer -> root.2.layer ...). */
int snap_next_layer(const char *top, char *out, size_t len);
/* Fill m's state and layer digests from the files in `dir`, write meta.yaml and mac. */
int snap_seal(const char *dir, struct snap_meta *m, char *err, size_t err_len) __must_check;
/* snap_seal without proxy files (m->nnet 0 whatever m->network says): a snapshot that leaves
 * its host or comes from another (push, pull), whose sandbox gets the proxy files of where it
 * runs (sandbox_restore_create's options), never those it came with. */
int snap_seal_bare(const char *dir, struct snap_meta *m, char *err, size_t err_len) __must_check;
/* Authenticate `dir` (the MAC, before anything is parsed), then parse meta.yaml and check the
 * state's digest, the memory file's size and every layer's digest. `err` says why not:
 * -ENOENT no snapshot, -EBADMSG changed or another key, -EPROTONOSUPPORT another format. */
int snap_open(const char *dir, struct snap_meta *m, char *err, size_t err_len) __must_check;
/* The same for a lazy restore's snapshot (a pull's, store/snap_remote.c): its memory file may
 * be absent (m->has_memory false), its pages to come from a pager, and its layers hold only
 * their headers and bitmaps yet (their digests not checked): each chunk of both is checked
 * as it comes, against the sealed manifest. */
int snap_open_lazy(const char *dir, struct snap_meta *m, char *err, size_t err_len) __must_check;
/* Make `dir` this host's snapshot: its MAC under this host's key over its meta.yaml and
 * state. Only for files authenticated another way (a snapshot fetched from the fleet's object
 * store, whose manifest is sealed under the workspace's key); snap_open then checks the rest
 * against meta.yaml as for any snapshot. */
int snap_adopt(const char *dir, char *err, size_t err_len) __must_check;
/* Call `fn` for every snapshot directory's name (hidden ones too). Returns how many, or
 * the first negative return of `fn`, or -errno. */
int snap_foreach(int (*fn)(const char *name, void *opaque), void *opaque);
/* What a VMM restoring the snapshot `dir` is given (docs/snapshots.md, "Restore"): the state
 * read once and checked against m's digest, in a sealed memfd; the memory file opened
 * read-only and checked against m's page digest (-1 when `memory` is false: a fork's child
 * maps the parent's frozen RAM). Both close-on-exec. 0, or -errno with `err`. */
struct snap_fds {
	int state_fd, memory_fd;
};
int snap_restore_open(const char *dir, const struct snap_meta *m, bool memory, struct snap_fds *fds,
		      char *err, size_t err_len) __must_check;
void snap_restore_close(struct snap_fds *fds);

/* ---- snap_memory.c: a snapshot's memory file and state for a restore ---- */

/* The memory file's page digest of a VMM's reply, in hex. */
void snap_memory_hex(const uint8_t sha256[32], char out[SNAP_HEX_LEN + 1]);
/* The page digest (wire/api_proto.h, api_snapshot_result) of the `size` bytes of `fd`. */
int snap_memory_digest(int fd, uint64_t size, char out[SNAP_HEX_LEN + 1]) __must_check;
/* At the seal of `dir`: prove no process holds dir/memory open for writing (a read lease),
 * make it root's and read-only, and record it as checked with page digest `sha`
 * (memory.checked). 0, or -errno with `err` (-EAGAIN: a writer holds it). */
int snap_memory_seal(const char *dir, const char *sha, char *err, size_t err_len) __must_check;
/* dir/memory opened read-only, of m's size and page digest: hashed in full unless
 * memory.checked (its MAC good) says this very file was checked and has not changed since
 * (same device, inode, size, mtime and ctime). *fd gets it. 0, or -errno with `err`. */
int snap_memory_open(const char *dir, const struct snap_meta *m, int *fd, char *err,
		     size_t err_len) __must_check;
/* `len` bytes of `state` in a memfd sealed against any change: its fd, or -errno. */
int snap_state_memfd(const void *state, size_t len) __must_check;

/* ---- snap_net.c: a networked snapshot's proxy files ---- */

/* One of the net.* files a snapshot may hold. */
bool snap_valid_net_file(const char *s);
/* The proxy's files (policy, credentials, CA, DNS map) of sandbox `sb` into snapshot
 * directory `dir` as net.<file>. */
int snap_net_save(const struct sandbox *sb, const char *dir) __must_check;
/* At the seal: the SHA-256 of each net.* file of `dir` into m->net (m->network only). */
int snap_net_seal(const char *dir, struct snap_meta *m, char *err, size_t err_len) __must_check;
/* snap_layers.c: each disk layer of the snapshot in `dir` names as its parent one of its layers,
 * this host's file of its image ($SANDBOX_HOME/images/IMAGE/rootfs, resolved) or none: 0, or
 * -EPERM, -EBADMSG, -ENOENT (no such image here) with `err`. For a snapshot made elsewhere,
 * whose layer paths this host would open. */
int snap_layers_check(const char *dir, const struct snap_meta *m, char *err,
		      size_t err_len) __must_check;
/* Point the layers of `dir` whose parent is a raw image at this host's file of m's image (its
 * absolute path; *changed when any moved: the layers' digests change, seal it again). */
int snap_layers_rebase(const char *dir, const struct snap_meta *m, bool *changed, char *err,
		       size_t err_len) __must_check;
/* Each proxy file m lists is in `dir` with the SHA-256 m records: 0, or -EBADMSG (-errno) with
 * `err`. (snap_open leaves them to the restore; a snapshot from elsewhere checks them first.) */
int snap_net_check(const char *dir, const struct snap_meta *m, char *err,
		   size_t err_len) __must_check;
/* At a restore: each net.* file m names, read once, checked, written into sandbox `sb`. */
int snap_net_restore(const char *dir, const struct snap_meta *m, const struct sandbox *sb,
		     char *err, size_t err_len) __must_check;

/* ---- api_client.c: wire/api_proto.h over api.sock ---- */

struct api_status;
/* One request of `type` and its reply; *error gets the reply's error (0 or -errno). `status`
 * (may be NULL) receives a STATUS reply's body in host byte order. Times out after
 * `timeout_ms`. Returns -errno when the socket itself failed. */
int api_call(const struct sandbox *sb, uint16_t type, unsigned timeout_ms, int32_t *error,
	     struct api_status *status) __must_check;
/* One request with a payload; the reply's body after api_result (up to `body_max` bytes) goes
 * to `body`, its length to *body_len (may be NULL). */
int api_request(const struct sandbox *sb, uint16_t type, const void *req, uint32_t req_len,
		unsigned timeout_ms, int32_t *error, void *body, size_t body_max,
		size_t *body_len) __must_check;
/* The same to the VMM whose control socket is `api_path` (a VMM without a sandbox: the
 * benchmarks'). */
int api_request_path(const char *api_path, uint16_t type, const void *req, uint32_t req_len,
		     unsigned timeout_ms, int32_t *error, void *body, size_t body_max,
		     size_t *body_len) __must_check;
/* SNAPSHOT (wire/api_proto.h) into `dir` with the new top layers of the writable disks;
 * with `dir_fd` >= 0, into that directory (sent as SCM_RIGHTS: a jailed VMM cannot open
 * `dir`, which then only names it). The memory paths of a fork are this process's view.
 * Returns 0, the VMM's -errno with its message in `msg`, or -errno of the call itself. */
struct api_snapshot_out {
	uint64_t pause_us, total_us, state_bytes, memory_bytes;
	uint8_t memory_sha256[32]; /* the memory file's page digest (api_proto.h); 0s: none */
	char memory_path[320];	   /* API_SNAPSHOT_LIVE: the parent's frozen RAM, PATH[,PATH...] */
};
int api_snapshot(const struct sandbox *sb, uint32_t flags, const char *dir, int dir_fd,
		 const char *const *tops, unsigned ntops, unsigned timeout_ms,
		 struct api_snapshot_out *out, char *msg, size_t msg_len) __must_check;
/* The same to the VMM whose control socket is `api_path`. */
int api_snapshot_path(const char *api_path, uint32_t flags, const char *dir,
		      const char *const *tops, unsigned ntops, unsigned timeout_ms,
		      struct api_snapshot_out *out, char *msg, size_t msg_len) __must_check;

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
/* Set `c` up to speak the protocol on the connected socket `fd` (agent_close closes it), with
 * no CONNECT line and no HELLO: the start of agent_connect_path, and the entry point of the
 * fuzz target for agent_recv. 0 or -ENOMEM (then `c` holds nothing to close but `fd`). */
int agent_conn_init(struct agent_conn *c, int fd) __must_check;
void agent_close(struct agent_conn *c);
/* Hand c's socket over to a reader of its own (sandboxd's event loop): a close-on-exec copy of
 * it, or -EPROTO when any byte of the agent's waits in c's buffer (it would be lost to the new
 * reader), or -errno; c is closed either way. */
int agent_conn_release(struct agent_conn *c) __must_check;
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
/* An ERROR frame's message, made printable (guest text), else its errno's strerror, in `out`;
 * returns out. */
const char *agent_error_text(const struct proto_frame *f, char *out, size_t len);

/* ---- agent_files.c: small files through the agent, in memory ---- */

/* mkdir -p `path` in the guest. */
int agent_mkdir_p(struct agent_conn *c, const char *path, uint32_t mode) __must_check;
/* Write `len` bytes to the guest's `path` (atomically: the agent renames at the end). */
int agent_file_put(struct agent_conn *c, const char *path, const void *data, size_t len,
		   uint32_t mode) __must_check;
/* Read the guest's `path`, of at most `max` bytes (-EFBIG beyond), NUL-terminated. */
int agent_file_get(struct agent_conn *c, const char *path, size_t max, char **out,
		   size_t *len) __must_check;

/* ---- agent_refresh.c: after a restore or a fork ---- */

/* Make a restored or forked guest its own before any user command runs in it, on the
 * connected `c`: RESEED with 64 bytes of the host's getrandom (the guest's CRNG is reseeded at
 * once, so it no longer repeats its siblings' numbers), then SET_CLOCK to the host's
 * CLOCK_REALTIME (its clock resumed from the snapshot's moment). Both calls within
 * `timeout_ms` in all. Returns 0; the errno of the agent's ERROR (as -errno) when it refused;
 * -ETIMEDOUT; -EPROTO for another answer; or the connection's -errno. */
int agent_refresh(struct agent_conn *c, unsigned timeout_ms) __must_check;

/* ---- image_conf.c: an imported image's exec.conf (docs/images.md) ---- */

/* What an imported OCI or Docker image's config says its commands run with: exec and run
 * take it as their defaults (over the built-in PATH, HOME and LANG, under --env and --cwd). */
#define IMAGE_CONF_MAX (64u << 10)
struct image_conf {
	char **env; /* K=V, in the image's order */
	unsigned nenv;
	const char *workdir; /* absolute; NULL: not set */
	bool has_user;
	uint32_t uid, gid;
	char **entrypoint;
	unsigned nentrypoint;
	char **cmd;
	unsigned ncmd;
	char *text; /* what the pointers above point into (image_conf_parse's) */
};
/* Parse exec.conf's `len` bytes into `c` (its own copy); -EBADMSG when it does not parse (a
 * value image_conf_value_ok refuses too). */
int image_conf_parse(const char *text, size_t len, struct image_conf *c) __must_check;
/* $SANDBOX_HOME/images/<image>/exec.conf into `c`: an image without one gives 0 and nothing
 * set. The one reader exec and run share. */
int image_conf_load(const char *image, struct image_conf *c) __must_check;
/* A uid or gid as exec.conf and --user give it: decimal, at most 0xfffffffe. */
bool image_conf_id(const char *s, uint32_t *out);
/* Can `s` be a value of exec.conf? Valid UTF-8 without C0 controls (tab included), DEL, C1
 * controls, U+2028 or U+2029: no reader (ours split on '\n' only, a Python str.splitlines()
 * on more) can take one value for two lines, and no terminal is driven by one. When not,
 * *at is the byte offset of the first refused character. */
bool image_conf_value_ok(const char *s, size_t *at);
/* Free what image_conf_parse or image_conf_load made. */
void image_conf_free(struct image_conf *c);
/* `c` (any pointers, not freed) as exec.conf's text, malloc'ed: -EINVAL for a value
 * image_conf_value_ok refuses, an env entry without '=', a relative workdir; -E2BIG past
 * IMAGE_CONF_MAX. */
int image_conf_format(const struct image_conf *c, char **out, size_t *len) __must_check;

/* ---- exec.c: one command in a sandbox, a verb (sandboxctl exec, a job's steps) ---- */

struct exec_opts {
	char **argv;
	int argc;
	char **env; /* K=V, after (and overriding) PATH, HOME, LANG, the image's Env, TERM */
	unsigned nenv;
	const char *cwd; /* NULL: the image's workdir, else / */
	/* The image's defaults (exec.conf: Env under env, the workdir, the user), or NULL. */
	const struct image_conf *image;
	bool user_set; /* exec --user: uid and gid over the image's */
	uint32_t uid, gid;
	unsigned timeout_s; /* 0: none */
	bool interactive;   /* forward this process's stdin */
	bool tty;	    /* a pty in the guest; our terminal (stdin) raw when interactive */
	/* The command's output as it comes (stream 1 stdout, 2 stderr); NULL: dropped. */
	void (*on_output)(void *arg, int stream, const void *data, size_t len);
	void *output_arg;
};
/* Run the command in running `sb` through its agent. SIGINT, SIGTERM, SIGHUP, SIGQUIT and
 * SIGWINCH are blocked meanwhile and passed on to it (a second SIGINT, SIGTERM or SIGHUP, or a
 * command that outlives a SIGTERM or SIGHUP by 5 s, ends the wait: a note, and 128+N).
 * Returns the command's exit status (128+N for signal N), or -ETIMEDOUT (its timeout
 * expired), -ENOEXEC (the agent could not start it), -ESRCH (the agent cannot be reached or
 * the connection is lost), -EINVAL with r->bad_option (the command and its environment are too
 * long), each with r->error saying so. Prints nothing. */
int sandbox_exec(const struct sandbox *sb, const struct exec_opts *o,
		 struct lc_report *r) __must_check;

/* ---- copy.c: one file in or out through the agent (sandboxctl cp, a job's files) ---- */

/* One file to the guest's `dst` (into it, when it is a directory) or from its `src` (into
 * `dst`, or a directory of that name; "-" is stdin or stdout), within a time budget
 * (timeout_s, 0: 60 s plus 1 s a MiB of its size) and, out, the size the guest stated (64 MiB
 * when it states none). copy_out takes at most *budget bytes (NULL: no such bound) and takes
 * what it copied off it. 0, or -ESRCH (the connection to the agent is lost), -EINVAL with
 * r->bad_option (a path that cannot be made: r->error may be empty) or -errno, with r->error
 * saying why. Print nothing. */
int copy_in(struct agent_conn *c, const char *src, const char *dst, unsigned timeout_s,
	    struct lc_report *r) __must_check;
int copy_out(struct agent_conn *c, const char *src, const char *dst, unsigned timeout_s,
	     uint64_t *budget, struct lc_report *r) __must_check;

/* ---- snapshot.c: taking a snapshot, a lifecycle verb ---- */

/* What sandbox_snapshot makes: the snapshot's name under snapshots/ and the API's
 * flags in, the VMM's figures, the meta and the final directory out. */
struct snap_take {
	const char *name;
	uint32_t flags; /* API_SNAPSHOT_* */
	struct api_snapshot_out out;
	struct snap_meta meta;
	char dir[4200];
};
/* Snapshot running (or paused) `sb` into snapshots/<t->name> (docs/snapshots.md). 0, or
 * -ESRCH (not running) or -errno with r->error saying why. Whatever fails, no half snapshot
 * is left under that name; once the VMM froze the disk the sandbox simply goes on over its new
 * top. */
int sandbox_snapshot(struct sandbox *sb, struct snap_take *t, struct lc_report *r) __must_check;
/* sb->stray_top, when it is the layer a snapshot of sb->top cut short left (the VMM's top
 * since): checked by its header, taken over, made the top. 0 (also with none), or -EPERM
 * with r->error saying what to do. */
int sandbox_adopt_stray_top(struct sandbox *sb, struct lc_report *r) __must_check;

/* ---- start.c: starting a sandbox's VMM, a lifecycle verb ---- */

/* The kernel command line of every sandbox's guest (and NET_GUEST_CMDLINE when networked). */
#define GUEST_CMDLINE	  "console=ttyS0 reboot=k panic=-1 quiet sandbox.root=/dev/vda sandbox.reboot=0"
#define CREATE_TTL_MAX_S  (7u * 24 * 3600) /* create --ttl, the VMM's --timeout, at most */
/* How long a restored VMM has to answer (its agent refreshed) before it counts as failed. */
#define RESTORE_TIMEOUT_S 60
/* The sandbox-vmm binary: $SANDBOX_VMM, the build tree's, an installed one beside us, else
 * "sandbox-vmm" for execvp's PATH search. */
int find_vmm(char *out, size_t len) __must_check;
/* What a VMM restores instead of booting: a snapshot's directory and, for a fork's child,
 * the parent's frozen RAM (else the directory's memory file). */
struct boot_src {
	const char *dir;
	const char *memory;
	/* The checked state and memory (snap_restore_open): a restore without them is
	 * refused. */
	const struct snap_fds *fds;
	/* > 0: a lazy restore: no memory fd, the RAM filled by a pager on the other end of
	 * this unix socket (the VMM's --restore-memory-pager-fd; fd 0 is never one) */
	int pager_fd;
	/* NULL, or a lazy restore's progress: a count that grows while its memory comes in. The
	 * wait for its agent then counts from the count's last growth (a slow store that goes on
	 * is waited for), up to RESTORE_PROGRESS_MAX_S in all. */
	uint64_t (*progress)(void *arg);
	void *progress_arg;
};
#define RESTORE_PROGRESS_MAX_S 600
/* Start the VMM of `sb` (its directory, config and top layer exist): its cgroup, network and
 * proxy, the detached sandbox-vmm (booting, or restoring `src` when it is not NULL), its pid
 * file; unless `no_wait`, wait up to `timeout_s` for its agent (a restored one reseeded and
 * its clock set). The console goes to `console_opt`, else console.log (appended). 0, or
 * -ESRCH (its lifetime is over, the VMM or its agent failed: r->log names the console) or
 * -errno, with r->error; on failure the caller cleans up. */
int sandbox_start_vmm(struct sandbox *sb, const char *console_opt, const struct boot_src *src,
		      unsigned timeout_s, bool no_wait, struct lc_report *r) __must_check;
/* After sandbox_start_vmm(..., no_wait) of a restore: wait for its agent and refresh it. */
int sandbox_wait_restored(struct sandbox *sb, unsigned timeout_s, struct lc_report *r) __must_check;
/* Put the proxy's CA in the guest of a networked sandbox whose agent answers: 0 or -ESRCH. */
int sandbox_install_ca(const struct sandbox *sb, struct lc_report *r) __must_check;

/* ---- host.c: can sandboxes boot here? ---- */

/* Why a host of KVM `flavour` (enum kvm_flavour) cannot boot a sandbox, or NULL when it can:
 * no usable /dev/kvm, or kvm-pvm. */
const char *host_refusal(int flavour, bool kvm_usable);
/* Before a VMM is started: 0 when this host can boot sandboxes (or SANDBOX_SKIP_HOST_CHECK=1
 * says to try anyway), else -ESRCH with why not and what works here. */
int sandbox_host_check(struct lc_report *r) __must_check;

/* ---- create.c, make.c, restore.c, ready.c: making a sandbox, lifecycle verbs ---- */

/* What a create asks for (sandboxctl create's options, a job spec's sandbox). */
struct create_opts {
	const char *image;
	const char *name; /* NULL: the id is the name */
	const char *console;
	unsigned cpus;
	uint64_t memory_mib;
	uint64_t disk_size_gib; /* 0: the image's */
	unsigned timeout_s;	/* for the agent's first answer */
	bool no_wait;
	bool cold;			    /* boot even when a ready snapshot could be restored */
	const char *disks[EXTRA_DISKS_MAX]; /* --disk PATH[:ro], checked by create */
	bool disks_ro[EXTRA_DISKS_MAX];
	unsigned ndisks;
	bool no_network; /* --network none: no NIC */
	/* The policy options (--allow D, --policy F, ...) as words of netpolicy.h's table, which
	 * sandbox_net_prepare hands the proxy as a request file. */
	char **net_opts;
	unsigned nnet_opts;
	uint64_t ttl_s;	 /* --ttl: the sandbox's lifetime (0: none), up to CREATE_TTL_MAX_S */
	int lifeline_fd; /* > 0: the VMM's --lifeline (sandboxctl run's pipe), sb->lifeline_fd */
};
#define CREATE_OPTS_DEFAULT                                                                        \
	{                                                                                          \
		.image = CREATE_DEFAULT_IMAGE, .cpus = 1, .memory_mib = 512, .timeout_s = 60,      \
	}
/* Create and start a sandbox: warm from the image's ready snapshot for these options when
 * there is one, else booted (and then made that ready snapshot). 0, or -errno with r->error
 * (-EINVAL with r->bad_option: an option cannot be served; -ESRCH: no sandbox boots on this
 * host, or its VMM or agent failed); on failure nothing of the sandbox is left. */
int sandbox_create(const struct create_opts *o, struct sandbox *sb,
		   struct lc_report *r) __must_check;
/* Under the sandboxes' lock: check `name` (NULL: the id is the name) is free, pick an id,
 * make the directory and write sb's config. 0 or -errno, with r->error. */
int sandbox_make_dir(struct sandbox *sb, const char *name, struct lc_report *r) __must_check;
/* Undo a failed make: kill its VMM, remove its cgroup and directory (what it could not do
 * goes to `r`). */
void sandbox_discard(struct sandbox *sb, const struct lc_report *r);
/* Make the proxy's files of a new networked sandbox from `o`: its policy options written as
 * the request file DIR/policy.request (0600; removed once read), then sandbox-proxy prepare
 * run on it: 0, or
 * -EINVAL with r->bad_option (the proxy said on stderr what is wrong with the policy), or
 * -errno. */
int sandbox_net_prepare(const struct sandbox *sb, const struct create_opts *o,
			struct lc_report *r) __must_check;
/* A new sandbox over the snapshot `dir` (meta `m`): its own directory and top layer over the
 * snapshot's frozen root layer; then its VMM restoring `src` (not waiting when `no_wait`),
 * its console to `console` (NULL: console.log). 0 or -errno with r->error, and on failure
 * nothing of it is left. */
int sandbox_restore(const char *dir, const struct snap_meta *m, const char *name,
		    const char *console, const struct boot_src *src, bool no_wait,
		    struct sandbox *sb, struct lc_report *r) __must_check;
/* The same, for a create that restores a ready snapshot: the proxy's policy and CA are made
 * anew from `o` rather than taken from the snapshot. */
int sandbox_restore_create(const char *dir, const struct snap_meta *m, const struct create_opts *o,
			   const struct boot_src *src, struct sandbox *sb,
			   struct lc_report *r) __must_check;
/* snap_open of snapshots/<name>: 0, or -errno with r->error saying why not. */
int sandbox_snapshot_open(const char *name, char *dir, size_t dir_len, struct snap_meta *m,
			  struct lc_report *r) __must_check;
/* The ready snapshot's name for these options and VMM binary (".ready-<image>-<key>"), or
 * -ENOTSUP when the options always boot (--cold, --disk, --no-wait). */
int ready_name(const struct create_opts *o, const char *vmm, char *out, size_t len);
/* Restore the ready snapshot `name` as the new sandbox `sb`: 0, or -errno (a note through `r`
 * when it was there but failed) and nothing of `sb` is left, so the caller boots instead. */
int ready_restore(const struct create_opts *o, const char *name, struct sandbox *sb,
		  struct lc_report *r);
/* After a boot of the options `name` stands for: snapshot `sb` as that ready snapshot,
 * unless another create is making it; a failure is a note through `r`, otherwise ignored. */
void ready_make(struct sandbox *sb, const char *name, struct lc_report *r);
/* Snapshot `sb` as `name` unless it exists or another is making it (a lock): 0 when it is
 * there (made now or before), -EBUSY (r->error empty) while another makes it, else -errno
 * with r->error. */
int snapshot_take_once(struct sandbox *sb, const char *name, struct lc_report *r);

/* ---- policy.c: a running sandbox's egress policy made anew, a lifecycle verb ---- */

/* Its proxy's policy, credentials and CA from `o`'s policy options (as a create makes them),
 * the proxy restarted and the CA installed in the guest. 0, or -errno with r->error. */
int sandbox_net_reconfigure(const struct sandbox *sb, const struct create_opts *o,
			    struct lc_report *r) __must_check;

/* ---- suspend.c: suspend and resume, lifecycle verbs ---- */

/* Snapshot `sb` to disk as .suspend-<id> and end its VMM (t->out: the VMM's figures). 0, or
 * -ESRCH (not running) or -errno with r->error; a failed snapshot leaves it running. */
int sandbox_suspend(struct sandbox *sb, struct snap_take *t, struct lc_report *r) __must_check;
/* Resume a suspended sandbox: a VMM restoring its suspend over its own top layer. 0, or
 * -errno with r->error; a failure leaves it suspended, to be tried again. */
int sandbox_resume_suspended(struct sandbox *sb, struct lc_report *r) __must_check;
/* After rm of a sandbox: remove the hidden snapshots (its suspend, unused forks) it held. */
void snapshots_gc(const struct sandbox *removed, const struct lc_report *r);

/* ---- fork.c: fork, a lifecycle verb ---- */

/* `n` children of running `parent`, each going on from its state now: a live snapshot (t: the
 * VMM's figures, the parent's pause among them), then `n` sandboxes restoring it over the
 * parent's frozen RAM, started together and waited for. *started of them were started, and
 * ok[i] says which of those answered; the others are removed. 0 when all `n` did, else the
 * last failure's -errno with r->error (the earlier ones were notes); a failure before the
 * children (the host check, the snapshot) leaves t->dir empty. */
int sandbox_fork(struct sandbox *parent, unsigned n, struct sandbox *children, bool *ok,
		 unsigned *started, struct snap_take *t, struct lc_report *r) __must_check;

/* ---- session.c: command sessions in the guest agent (docs/agent-protocol.md, "Command
 * sessions"): payload encoders and frame decoders, no I/O; send with agent_send. ---- */

/* A SESSION_EXEC request. */
struct session_req {
	const char *id;		 /* the command id, 1 to PROTO_SESSION_ID_MAX (128) bytes */
	const char *const *argv; /* argc strings, argv[0] the program (PATH of env, else the
				    agent's) */
	int argc;
	const char *const *env; /* envc "NAME=value": the child's whole environment */
	int envc;
	const char *cwd;	 /* NULL or "": / */
	uint32_t uid, gid;	 /* PROTO_ID_KEEP: root */
	uint32_t timeout_ms;	 /* 0: none; else SIGKILL of the group, EXIT timed out */
	int64_t idle_timeout_s;	 /* running with nobody attached this long: killed; -1: never */
	int64_t ttl_s;		 /* an ended session kept this long for replay; -1: until the VM
				    dies */
	bool pty;		 /* on a pty: all output is stdout */
	bool stdin;		 /* STDIN frames feed it; else its stdin is /dev/null */
	bool kill_on_disconnect; /* killed when its last attachment goes without its EXIT */
	bool shell_fallback;	 /* argv[0] missing in the guest: /bin/sh runs in its place */
	uint16_t rows, cols;	 /* the pty's window (0: the kernel's default, 24 x 80) */
};
/* Encode the SESSION_EXEC payload of `q` into out[0, cap). Returns its length, -EINVAL (an id
 * of 0 or more than 128 bytes, no argv, argc or envc over 65535, a timeout out of range) or
 * -EMSGSIZE (over `cap` or PROTO_MAX_PAYLOAD). */
int session_exec_payload(const struct session_req *q, uint8_t *out, size_t cap) __must_check;
/* Encode the SESSION_ATTACH payload for command `id` (NUL-terminated, 1 to 128 bytes), replayed
 * from `off_out` of stdout and `off_err` of stderr. Returns its length, -EINVAL or -EMSGSIZE. */
int session_attach_payload(const char *id, uint64_t off_out, uint64_t off_err, uint8_t *out,
			   size_t cap) __must_check;
/* Decode a SESSION_OUT frame: *stream PROTO_STREAM_STDOUT or _STDERR, *offset the absolute
 * offset of its first byte, data[0, len) its bytes (valid UTF-8, pointing into f). 0, or
 * -EPROTO for a frame of another type, too short, of an unknown stream, with more than
 * PROTO_DATA_CHUNK bytes or an offset that would overflow. */
int session_out_parse(const struct proto_frame *f, int *stream, uint64_t *offset,
		      const uint8_t **data, size_t *len) __must_check;
/* One session of a SESSION_LIST answer (a DATA frame). */
struct session_info {
	char id[129]; /* the command id, NUL-terminated (an id holding a NUL is refused) */
	uint32_t pid;
	bool running, exited, pty;
	uint32_t exit_code, exit_flags;	 /* as EXIT's, once exited */
	uint64_t stdout_len, stderr_len; /* bytes each stream holds so far (the end offsets) */
	uint64_t started_ms;		 /* the guest's CLOCK_REALTIME at its start */
};
/* Decode one DATA frame of a SESSION_LIST call into *out. 0 or -EPROTO. */
int session_info_parse(const struct proto_frame *f, struct session_info *out) __must_check;

#endif
