/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Warm pools (docs/api.md, "Warm pools"): per image and size (`--pool IMAGE:VCPUS:MEM_MIB=N`),
 * N sandboxes made ahead of time (restored from the image's ready snapshot after the first),
 * networked with the default policy, warmed up and paused. Warm-up is one command session
 * of `true` under the default shell, on an agent connection that the pool then keeps open
 * through the pause: a restored guest faults its pages in on first use, and the first command
 * after a claim would pay for that and for the connect (about 250-450 ms of the first exec in
 * the emulated host, against 35 ms for the next); the claimed box's link adopts it. A create that
 * names no snapshot and asks for that image and size claims one: its box record takes the sandbox,
 * the owner's proxy_config (if any) is applied to it (client/policy.c), its vCPUs run again, and
 * the create answers; the pool refills in the background, one sandbox at a time per pool.
 *
 * Pool sandboxes are named "pool-<hex>"; at start every such sandbox (one a crash left
 * unclaimed) is removed and the pools fill anew.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "client.h"
#include "proto.h"
#include "sandboxd.h"

#define POOLS_MAX      16
#define POOL_SIZE_MAX  64
#define POOL_FAILS_MAX 3 /* fills in a row that fail: the pool stops (logged) until a claim */

struct pool {
	char image[64];
	unsigned cpus;
	uint64_t mem_mib;
	unsigned target;
	struct {
		char id[16]; /* the sandbox, ready and paused */
		int fd;	     /* its agent connection, warmed up, or -1 */
	} members[POOL_SIZE_MAX];
	unsigned n;
	bool filling;
	unsigned fails;
};

static struct pool pools[POOLS_MAX];
static unsigned npools;

int pool_add(const char *spec)
{
	char image[64];
	unsigned cpus, target;
	unsigned long long mem;
	int used = 0;

	if (npools >= POOLS_MAX ||
	    sscanf(spec, "%63[A-Za-z0-9._-]:%u:%llu=%u%n", image, &cpus, &mem, &target, &used) !=
		    4 ||
	    spec[used] || !valid_name(image) || cpus < 1 || cpus > 16 || mem < 128 || mem > 65536 ||
	    target < 1 || target > POOL_SIZE_MAX)
		return -EINVAL;
	struct pool *p = &pools[npools++];

	snprintf(p->image, sizeof(p->image), "%s", image);
	p->cpus = cpus;
	p->mem_mib = mem;
	p->target = target;
	return 0;
}

struct fill_job {
	struct sd_job job;
	unsigned pool;
	struct create_opts o;
	char image[64], name[40];
	char id[16];
	int fd;
	int err;
	char msg[LC_ERROR_MAX];
};

/* One command session through the agent, as a claimed box's first one will be: the agent's
 * session and spawn code, the default shell's fallback and the shell's pages faulted in. The
 * connection stays open for the claim: *fd (-1 when it cannot be kept). 0 or -errno. */
static int pool_warm(const struct sandbox *sb, int *fd, struct lc_report *r)
{
	static const char *const argv[] = {"/bin/bash", "-c", "true"};
	static const char *const env[] = {"PATH=" SD_EXEC_PATH};
	struct session_req q = {
		.id = SD_CMD_ID_RESERVED "pool-warm-up",
		.argv = argv,
		.argc = 3,
		.env = env,
		.envc = 1,
		.uid = PROTO_ID_KEEP,
		.gid = PROTO_ID_KEEP,
		.timeout_ms = 10000,
		.idle_timeout_s = 10,
		.ttl_s = 0,
		.shell_fallback = true,
	};
	uint8_t payload[512];
	struct proto_frame f;
	struct agent_conn c;
	int len = session_exec_payload(&q, payload, sizeof(payload)), err;

	*fd = -1;
	if (len < 0)
		return lc_fail(r, len, "pool: warm-up: cannot encode its command");
	if ((err = agent_connect(sb, 10000, &c)) < 0)
		return lc_fail(r, err, "pool: %s: cannot reach its agent: %s", sb->id,
			       strerror(-err));
	err = agent_call(&c, PROTO_MSG_SESSION_EXEC, payload, (uint32_t)len, 15000, NULL, NULL, &f);
	if (err == 0 && (f.hdr.type != PROTO_MSG_EXIT || proto_get_le32(f.payload) != 0))
		err = -EIO;
	if (err < 0) {
		agent_close(&c);
		return lc_fail(r, err, "pool: %s: the warm-up command failed: %s", sb->id,
			       strerror(-err));
	}
	*fd = agent_conn_release(&c); /* bytes after EXIT (or no fd): connect at the claim */
	return 0;
}

static void fill_run(struct sd_job *sj)
{
	struct fill_job *j = (struct fill_job *)sj;
	struct lc_report r = {0};
	struct sandbox sb;

	j->fd = -1;
	pthread_mutex_lock(&lifecycle_lock);
	j->err = sandbox_create(&j->o, &sb, &r);
	pthread_mutex_unlock(&lifecycle_lock);
	if (j->err == 0) {
		/* its own sandbox, nobody's yet: no lock, so that a guest slow to warm up holds
		 * up no other create */
		j->err = pool_warm(&sb, &j->fd, &r);
		if (j->err == 0)
			j->err = sandbox_pause(&sb, true, &r);
		if (j->err < 0) {
			struct lc_report r2 = {0};

			if (j->fd >= 0)
				close(j->fd);
			j->fd = -1;
			pthread_mutex_lock(&lifecycle_lock);
			if (sandbox_rm(&sb, true, &r2) < 0)
				sd_log("pool: %s cannot be removed: %s", sb.id, r2.error);
			pthread_mutex_unlock(&lifecycle_lock);
		} else {
			snprintf(j->id, sizeof(j->id), "%s", sb.id);
		}
	}
	if (j->err < 0)
		snprintf(j->msg, sizeof(j->msg), "%s", r.error[0] ? r.error : strerror(-j->err));
}

static void pool_fill(unsigned i);

static void fill_done(struct sd_job *sj)
{
	struct fill_job *j = (struct fill_job *)sj;
	unsigned i = j->pool;
	struct pool *p = &pools[i];

	p->filling = false;
	if (j->err == 0 && p->n < POOL_SIZE_MAX) {
		snprintf(p->members[p->n].id, sizeof(p->members[0].id), "%s", j->id);
		p->members[p->n++].fd = j->fd;
		p->fails = 0;
	} else if (j->fd >= 0) {
		close(j->fd);
	}
	if (j->err < 0 && ++p->fails >= POOL_FAILS_MAX) {
		sd_log("pool %s:%u:%llu: %u fills failed in a row, the last: %s; it waits for a "
		       "claim",
		       p->image, p->cpus, (unsigned long long)p->mem_mib, p->fails, j->msg);
	}
	free(j);
	pool_fill(i);
}

static void pool_fill(unsigned i)
{
	struct pool *p = &pools[i];

	if (p->filling || p->n >= p->target || p->fails >= POOL_FAILS_MAX)
		return;
	struct fill_job *j = calloc(1, sizeof(*j));
	uint8_t rnd[6];

	if (!j || getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		free(j);
		return;
	}
	snprintf(j->name, sizeof(j->name), "pool-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4], rnd[5]);
	snprintf(j->image, sizeof(j->image), "%s", p->image);
	j->o = (struct create_opts)CREATE_OPTS_DEFAULT;
	j->o.image = j->image;
	j->o.name = j->name;
	j->o.cpus = p->cpus;
	j->o.memory_mib = p->mem_mib;
	j->o.timeout_s = 120;
	j->pool = i;
	j->job.run = fill_run;
	j->job.done = fill_done;
	p->filling = true;
	work_queue(&j->job);
}

void pools_start(void)
{
	for (unsigned i = 0; i < npools; i++)
		pool_fill(i);
}

/* At start (lifecycle lock held by the caller, no worker busy): a crash's pool sandboxes. */
static int stale_pool_member(const struct sandbox *sb, void *arg)
{
	unsigned *n = arg;

	for (struct box *b = box_first(); b; b = b->next)
		if (strcmp(b->sandbox, sb->id) == 0)
			return 0; /* claimed: a box's now */
	if (strncmp(sb->name, "pool-", 5) == 0 && *n < 256) {
		struct lc_report r = {0};
		struct sandbox copy = *sb;

		if (sandbox_rm(&copy, true, &r) < 0)
			sd_log("pool: stale %s cannot be removed: %s", sb->id, r.error);
		(*n)++;
	}
	return 0;
}

void pools_clean(void)
{
	unsigned n = 0;

	pthread_mutex_lock(&lifecycle_lock);
	if (sandbox_foreach(stale_pool_member, &n, NULL) < 0)
		sd_log("pool: cannot list the sandboxes");
	pthread_mutex_unlock(&lifecycle_lock);
	if (n)
		sd_log("pool: %u sandboxes of a previous run removed", n);
}

bool pool_take(const char *image, unsigned cpus, uint64_t mem_mib, char id[16], int *fd)
{
	for (unsigned i = 0; i < npools; i++) {
		struct pool *p = &pools[i];

		if (strcmp(p->image, image) || p->cpus != cpus || p->mem_mib != mem_mib)
			continue;
		p->fails = 0;
		if (!p->n) {
			pool_fill(i);
			return false;
		}
		p->n--;
		snprintf(id, 16, "%s", p->members[p->n].id);
		*fd = p->members[p->n].fd;
		pool_fill(i);
		return true;
	}
	return false;
}

unsigned pool_sizes(char *out, size_t len)
{
	size_t off = 0;

	for (unsigned i = 0; i < npools && off < len; i++)
		off += (size_t)snprintf(
			out + off, len - off,
			"sandboxd_pool_ready{image=\"%s\",vcpus=\"%u\",memory_mib=\"%llu\"} "
			"%u\n",
			pools[i].image, pools[i].cpus, (unsigned long long)pools[i].mem_mib,
			pools[i].n);
	return npools;
}
