/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Warm pools (docs/api.md, "Warm pools"): per image and size (`--pool IMAGE:VCPUS:MEM_MIB=N`),
 * N sandboxes made ahead of time (restored from the image's ready snapshot after the first),
 * networked with the default policy and paused. A create that names no snapshot and asks for
 * that image and size claims one: its box record takes the sandbox, the owner's proxy_config
 * (if any) is applied to it (client/policy.c), its vCPUs run again, and the create answers;
 * the pool refills in the background, one sandbox at a time per pool.
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
#include "sandboxd.h"

#define POOLS_MAX      16
#define POOL_SIZE_MAX  64
#define POOL_FAILS_MAX 3 /* fills in a row that fail: the pool stops (logged) until a claim */

struct pool {
	char image[64];
	unsigned cpus;
	uint64_t mem_mib;
	unsigned target;
	char members[POOL_SIZE_MAX][16]; /* sandbox ids, ready and paused */
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
	int err;
	char msg[LC_ERROR_MAX];
};

static void fill_run(struct sd_job *sj)
{
	struct fill_job *j = (struct fill_job *)sj;
	struct lc_report r = {0};
	struct sandbox sb;

	pthread_mutex_lock(&lifecycle_lock);
	j->err = sandbox_create(&j->o, &sb, &r);
	if (j->err == 0) {
		j->err = sandbox_pause(&sb, true, &r);
		if (j->err < 0) {
			struct lc_report r2 = {0};

			if (sandbox_rm(&sb, true, &r2) < 0)
				sd_log("pool: %s cannot be removed: %s", sb.id, r2.error);
		} else {
			snprintf(j->id, sizeof(j->id), "%s", sb.id);
		}
	}
	pthread_mutex_unlock(&lifecycle_lock);
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
		snprintf(p->members[p->n++], sizeof(p->members[0]), "%s", j->id);
		p->fails = 0;
	} else if (j->err < 0 && ++p->fails >= POOL_FAILS_MAX) {
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

bool pool_take(const char *image, unsigned cpus, uint64_t mem_mib, char id[16])
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
		snprintf(id, 16, "%s", p->members[--p->n]);
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
