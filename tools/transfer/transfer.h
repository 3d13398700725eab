/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-transfer (docs/fleet.md, "Push and pull"): a local sandbox sent to a service's fleet
 * through its API, and one fetched back, with the user's key only. sandboxctl push and pull run
 * it (sandboxctl is static: libcurl cannot be linked into it).
 */
#ifndef SANDBOX_TRANSFER_H
#define SANDBOX_TRANSFER_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

/* ---- api.c ---- */

struct svc {
	void *curl;
	char base[1024]; /* the API's root: ...://HOST[:PORT][/prefix]/v2/sandboxes */
	char key_header[600];
};
struct svc_answer {
	long status;
	char *body; /* NUL-terminated, len bytes */
	size_t len;
	char error[600]; /* a failed call or a non-2xx answer, said for a user */
};
/* The service takes TRANSFER_CONNS of a workspace's chunk transfers at once
 * (sandboxd/fleet_xfer.c): a push or a pull keeps that many connections busy. */
#define TRANSFER_CONNS 2
int svc_open(struct svc *a, const char *url, const char *key);
/* Another handle on a's service and key, a connection of its own (one per thread). */
int svc_clone(struct svc *dst, const struct svc *a);
void svc_close(struct svc *a);
/* METHOD base+path with body (ctype), the answer at most max bytes: 0 with out filled (any
 * status: out->error says a non-2xx one), or -errno with out->error. A 429 TooManyRequests (the
 * service busy with this workspace's other transfers, refused before any work) is asked again
 * after a second, for up to SVC_BUSY_TRIES seconds; a quota's 429 is not. */
#define SVC_BUSY_TRIES 30
int svc_call(struct svc *a, const char *method, const char *path, const void *body, size_t blen,
	     const char *ctype, size_t max, struct svc_answer *out);
json_t *svc_json(const struct svc_answer *ans);
void svc_answer_free(struct svc_answer *ans);

/* ---- push.c, pull.c ---- */

struct transfer_opts {
	const char *ref;  /* push: the local sandbox; pull: the service's sandbox */
	const char *name; /* push: its name there; pull: its name here (NULL: ref) */
	bool keep;	  /* keep the source (push: the local sandbox; pull: the service's) */
	unsigned wait_s;  /* for the service's stop and start */
};
int transfer_push(struct svc *a, const struct transfer_opts *o);
int transfer_pull(struct svc *a, const struct transfer_opts *o);
/* Poll ref's status on the service until it is `want` (or failed): 0, or -1 said. */
int transfer_wait_status(struct svc *a, const char *ref, const char *want, unsigned wait_s);

#endif
