/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The VMM's control protocol on `api.sock` (a unix stream socket, one per sandbox), defined
 * once here for the VMM (vmm/api.c) and its clients (tools/sandboxctl). Self-contained: no
 * other header of ours, fixed-width little-endian fields only.
 *
 * A client sends requests; the VMM answers each with one reply, in order. A message is a
 * struct api_hdr followed by `len` bytes of payload (at most API_PAYLOAD_MAX). A reply's
 * type is the request's with API_REPLY set, its `id` the request's, and its payload starts
 * with struct api_result; a status reply then carries struct api_status. The VMM closes a
 * connection that sends a bad magic, an unknown version, a length over the maximum or a
 * payload shorter than its type's minimum. An unknown type gets -EOPNOTSUPP, not a close,
 * so that a newer client can probe an older VMM.
 */
#ifndef SANDBOX_API_PROTO_H
#define SANDBOX_API_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define API_MAGIC	0x41584253u /* "SBXA" in little-endian byte order */
#define API_VERSION	3	    /* changes with any change to this file's formats */
/* 1 also covered SNAPSHOT: it was reserved (-EOPNOTSUPP) before it was defined. 2: the
 * memory file's digest in api_snapshot_result. The VMM still serves version 1 requests,
 * answered in version 1 (a SNAPSHOT result then ends before memory_sha256): the SDK's and the
 * tests' clients that only ask for STATUS, PAUSE, RESUME or SHUTDOWN need no change. 3:
 * TOUCH_MARK. */
#define API_VERSION_MIN 1
#define API_PAYLOAD_MAX 4096
#define API_REPLY	0x8000u

/* X(name, value, minimum request payload): the request types. */
#define API_REQUESTS(X)                                                                            \
	X(STATUS, 1, 0)	  /* -> api_status */                                                      \
	X(PAUSE, 2, 0)	  /* park every vCPU; 0 also when already paused */                        \
	X(RESUME, 3, 0)	  /* run them again; 0 also when running */                                \
	X(SHUTDOWN, 4, 0) /* stop the VM now, exit status 0 (no guest cooperation) */              \
	X(TOUCH_MARK, 5,                                                                           \
	  0) /* the next snapshot's touched-pages count from now (docs/snapshots.md) */            \
	X(SNAPSHOT, 16, 8) /* api_snapshot_req -> api_snapshot_result */

enum api_type {
#define API_ENUM(name, value, min) API_##name = value,
	API_REQUESTS(API_ENUM)
#undef API_ENUM
};

struct api_hdr {
	uint32_t magic;	  /* API_MAGIC */
	uint16_t version; /* API_VERSION */
	uint16_t type;	  /* enum api_type, | API_REPLY in replies */
	uint32_t id;	  /* chosen by the client, echoed in the reply */
	uint32_t len;	  /* payload bytes that follow, <= API_PAYLOAD_MAX */
};
_Static_assert(sizeof(struct api_hdr) == 16, "api_hdr is 16 bytes");

/* The first bytes of every reply's payload. */
struct api_result {
	int32_t error; /* 0 or -errno (Linux values) */
	uint32_t reserved;
};
_Static_assert(sizeof(struct api_result) == 8, "api_result is 8 bytes");

enum api_vm_state {
	API_STATE_RUNNING = 1,
	API_STATE_PAUSED = 2,
	API_STATE_STOPPING = 3,
};

/* After api_result in a STATUS reply. */
struct api_status {
	uint32_t state; /* enum api_vm_state */
	uint32_t ncpus;
	uint64_t memory_mib;
	uint64_t uptime_ms; /* since the VMM started its guest */
	uint32_t pid;	    /* of the VMM */
	uint32_t reserved;
};
_Static_assert(sizeof(struct api_status) == 32, "api_status is 32 bytes");
_Static_assert(offsetof(struct api_status, uptime_ms) == 16, "no padding");

/*
 * SNAPSHOT: write the VM's state and memory into `dir` (an existing empty directory), freeze
 * every writable disk's top layer and go on over a new empty one. The payload is this header
 * followed by `nstrings` NUL-terminated strings: `dir`, then for the n-th writable disk the
 * path of its new top layer (which must not exist). The VM is paused meanwhile and runs again
 * after (unless it was paused before, or API_SNAPSHOT_STOP: then it stays paused; the
 * client ends it with SHUTDOWN). On failure the reply's error is -errno and a message follows
 * api_result as a NUL-terminated string.
 *
 * The directory may come as a file descriptor instead (SCM_RIGHTS with the request, or with
 * any earlier bytes of it): `dir` then only names it in messages. A jailed VMM (--jail) needs
 * that for a directory outside its jail; paths it is given must lie inside it.
 *
 * API_SNAPSHOT_LIVE is a fork's snapshot: RAM is not written while the VM is paused; the VMM
 * freezes it in place and goes on over private copies of its pages, and the reply names the
 * frozen RAM file after api_snapshot_result (a NUL-terminated path, /proc/<pid>/fd/<n>, valid
 * while this VMM runs), which `sandbox-vmm --restore DIR --restore-memory PATH` maps. <pid>
 * is the VMM's own: a client in another pid namespace (a jailed VMM is 1 in its own) puts the
 * peer's pid (SO_PEERCRED) there. STATUS's pid is the VMM's own view too. With
 * API_SNAPSHOT_DURABLE too, the memory file is also written into `dir`, after the VM runs
 * again and before the reply.
 */
#define API_SNAPSHOT_STOP    0x1u
#define API_SNAPSHOT_LIVE    0x2u
#define API_SNAPSHOT_DURABLE 0x4u
#define API_SNAPSHOT_FLAGS   0x7u
struct api_snapshot_req {
	uint32_t flags; /* API_SNAPSHOT_* */
	uint32_t nstrings;
};
_Static_assert(sizeof(struct api_snapshot_req) == 8, "api_snapshot_req is 8 bytes");

/* After api_result in a successful SNAPSHOT reply. */
struct api_snapshot_result {
	uint64_t pause_us;     /* the vCPUs' paused time, as the VMM measured it */
	uint64_t total_us;     /* the whole request */
	uint64_t state_bytes;  /* state.fdt */
	uint64_t memory_bytes; /* RAM bytes written; the rest of the memory file is holes */
	/*
	 * The memory file's page digest, computed from the bytes as they were written (all
	 * zeros when no memory file was written: a fork's LIVE snapshot without DURABLE): the
	 * SHA-256 of, for each 4 KiB page of the file that is not all zeros, in order, its
	 * offset (8 bytes, little-endian) then its 4096 bytes. Zero pages count for nothing,
	 * whether holes or written, so the digest is the content's, not the file system's.
	 * The VMM has closed every fd it had to the file before it answers.
	 */
	uint8_t memory_sha256[32];
};
_Static_assert(sizeof(struct api_snapshot_result) == 64, "api_snapshot_result is 64 bytes");

/* The longest message a failed reply carries (with its NUL). */
#define API_ERROR_MSG_MAX 512

#endif
