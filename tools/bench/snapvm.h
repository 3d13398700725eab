/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The VMMs bench-snapshot starts and how it talks to them. Each runs payload-snap
 * (tests/guests/snap.c) in a directory of its own, DIR/<name>: its vsock and api sockets
 * (v.sock, api.sock), its console (console.log) and its stdout and stderr (vmm.log), with
 * --timeout 600. It is asked for PAUSE, RESUME and SNAPSHOT on its control socket
 * (wire/api_proto.h, one connection per request), and its guest for `ping` over vsock.
 *
 * Messages go to stderr as "bench-snapshot: <phase>: ...", the phase being what
 * snapvm_set_phase last named; functions that fail print what failed and return -errno
 * (a VMM's refusal: -EIO). Every wait ends after SNAPVM_WAIT_MS; a wait for a guest ends
 * with -EINTR once snapvm_signal is set. Requests to the control socket go through the
 * client library's api_request_path (client/client.h), whose answer the VMM gives at once.
 */
#ifndef SANDBOX_TOOLS_BENCH_SNAPVM_H
#define SANDBOX_TOOLS_BENCH_SNAPVM_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "api_proto.h"

#define SNAPVM_WAIT_MS	60000 /* the deadline of every wait */
#define SNAPVM_PATH_MAX 108   /* sizeof(sockaddr_un.sun_path): every path of a VMM fits one */
#define SNAPVM_LINE_MAX 256   /* the longest line a guest or the VMM's vsock sends us */
#define SNAPVM_SEED_MAX 32    /* a seed in hex, with its NUL */
#define SNAPVM_PING_MAX 64    /* guests one snapvm_ping_all asks at once */

/* Where asking a guest for its ping answer stands (snapvm_ping_all). */
enum snapvm_probe_state {
	SNAPVM_PROBE_IDLE, /* not connected: connect at retry_ns */
	SNAPVM_PROBE_OK,   /* "CONNECT 1234" sent: waiting for the VMM's "OK <n>" */
	SNAPVM_PROBE_PONG, /* "ping" sent: waiting for the guest's answer */
	SNAPVM_PROBE_DONE, /* answered: seed and answer_ns hold it */
};

/* One VMM we started, where it keeps its files, and the probe of its guest. */
struct snapvm {
	pid_t pid;		   /* 0: not running (never started, or reaped) */
	char dir[SNAPVM_PATH_MAX]; /* "": none (its files removed) */
	char vsock[SNAPVM_PATH_MAX], api[SNAPVM_PATH_MAX];
	/* The probe: its socket is open only inside snapvm_ping_all. */
	enum snapvm_probe_state state;
	int fd;			     /* to vsock, or -1 */
	int64_t retry_ns, answer_ns; /* the next connect; the answer's arrival (CLOCK_MONOTONIC) */
	size_t have;		     /* bytes in line */
	char line[SNAPVM_LINE_MAX];  /* what came since the last newline */
	char seed[SNAPVM_SEED_MAX];  /* the answer's seed= */
};

/* What a SNAPSHOT reply says. */
struct snapvm_snap {
	uint64_t pause_us, total_us, memory_bytes;
	char memory[API_PAYLOAD_MAX]; /* API_SNAPSHOT_LIVE: the frozen RAM, PATH[,PATH...] */
};

/* The signal that asked us to stop, else 0; set by the program's handler. */
extern volatile sig_atomic_t snapvm_signal;

/* Names what runs now, for messages ("fork16 run 3/10", say). */
void snapvm_set_phase(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "bench-snapshot: <phase>: " + the message + "\n" on stderr: a failure, or a run's figures. */
void snapvm_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Removes path and everything under it (rm -rf); failures are reported, not returned. */
void snapvm_rmtree(const char *path);

/*
 * Makes dir (which must not exist) and starts `VMM ARGS... --vsock --api --console (all in
 * dir) --timeout 600` in the free slot vm, its stdout and stderr in dir/vmm.log.
 */
int snapvm_start(struct snapvm *vm, const char *vmm, const char *dir, const char *const *args)
	__attribute__((warn_unused_result));

/* SIGKILLs vm's VMM if it runs, reaps it and removes its directory. */
void snapvm_kill(struct snapvm *vm);

/*
 * Waits until the guest of each of vms[0..n) has answered a ping, asking them all at once
 * (one poll over their sockets) and connecting again 1 ms after a connect that is refused
 * or closed before the answer (a restored guest resets its device, and the VMM drops what
 * came before). Each answer's time and seed go into its vm; want_seed (NULL: any) is the seed
 * every answer must carry. A VMM that ends, or a guest that does not answer by deadline_ns,
 * fails it, with the end of that VMM's log and console on stderr.
 */
int snapvm_ping_all(struct snapvm *vms, int n, int64_t deadline_ns, const char *want_seed)
	__attribute__((warn_unused_result));

/* A request without payload (API_PAUSE, API_RESUME) to the VMM at api_path; `what` names it. */
int snapvm_api_simple(const char *api_path, uint16_t type, const char *what)
	__attribute__((warn_unused_result));

/* SNAPSHOT with `flags` into dir (an existing empty directory; no disks), the reply in *out. */
int snapvm_snapshot(const char *api_path, uint32_t flags, const char *dir, struct snapvm_snap *out)
	__attribute__((warn_unused_result));

#endif /* SANDBOX_TOOLS_BENCH_SNAPVM_H */
