/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A workspace's quotas across a fleet (docs/api.md, "Quotas"; docs/fleet.md): the quotas set
 * with `sandboxd quota set ... --fleet` are a bucket every host mirrors into its quota files,
 * and what a workspace holds fleet-wide (sandboxes, vCPUs, memory, disk) is one record per
 * workspace in the bucket sandbox_usage, changed only by an update on the revision read. The
 * placing host reserves a create's share there before it places it, so two hosts placing at
 * once cannot both pass a quota one of them fills; a create not made, and a box deleted, gives
 * its share back.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

#include "fleetd.h"

#define USAGE_TRIES 50 /* updates lost to another host's: read again */

static struct fleet_kv usage_kv, quotas_kv;
static struct fleet_watch *w_quotas;

struct usage {
	uint64_t n, vcpus, mem_mib, disk_gib;
};

static void usage_key(const char *workspace, char key[96])
{
	snprintf(key, 96, "u.%s", workspace);
}

/* Apply delta (sign +1: reserve, -1: give back) to the workspace's record; a reserve checks q
 * first. 0, -EDQUOT (*what the quota's name, *limit its value), -EIO. */
static int usage_change(const char *workspace, const struct usage *d, int sign,
			const struct sd_quota *q, const char **what, uint64_t *limit)
{
	char key[96], val[128];

	usage_key(workspace, key);
	for (int i = 0; i < USAGE_TRIES; i++) {
		struct usage u = {0};
		uint64_t rev = 0;
		int err = fleet_kv_get(&fleetd, usage_kv.kv, key, val, sizeof(val), &rev);

		if (err == 0 && sscanf(val, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &u.n,
				       &u.vcpus, &u.mem_mib, &u.disk_gib) != 4)
			memset(&u, 0, sizeof(u)); /* not a record of ours: counted afresh */
		else if (err < 0 && err != -ENOENT)
			return -EIO;
		if (sign > 0) {
			*limit = 0;
			if (q->sandboxes && u.n + d->n > q->sandboxes)
				*what = "sandbox count", *limit = q->sandboxes;
			else if (q->vcpus && u.vcpus + d->vcpus > q->vcpus)
				*what = "cpu", *limit = q->vcpus;
			else if (q->memory_mib && u.mem_mib + d->mem_mib > q->memory_mib)
				*what = "memory", *limit = q->memory_mib;
			else if (q->disk_gib && u.disk_gib + d->disk_gib > q->disk_gib)
				*what = "storage", *limit = q->disk_gib;
			if (*limit)
				return -EDQUOT;
			u.n += d->n, u.vcpus += d->vcpus, u.mem_mib += d->mem_mib;
			u.disk_gib += d->disk_gib;
		} else { /* (never below zero: a record lost and counted afresh) */
			u.n -= u.n < d->n ? u.n : d->n;
			u.vcpus -= u.vcpus < d->vcpus ? u.vcpus : d->vcpus;
			u.mem_mib -= u.mem_mib < d->mem_mib ? u.mem_mib : d->mem_mib;
			u.disk_gib -= u.disk_gib < d->disk_gib ? u.disk_gib : d->disk_gib;
		}
		snprintf(val, sizeof(val), "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64, u.n,
			 u.vcpus, u.mem_mib, u.disk_gib);
		err = err == -ENOENT ? fleet_kv_create(&fleetd, usage_kv.kv, key, val, NULL)
				     : fleet_kv_update(&fleetd, usage_kv.kv, key, val, rev);
		if (err == 0)
			return 0;
		if (err != -EEXIST && err != -ESTALE)
			return -EIO;
		/* another host changed it first: read again */
	}
	return -EIO;
}

static void share_of(int64_t vcpus, int64_t mem_bytes, int64_t fs_bytes, struct usage *d)
{
	d->n = 1;
	d->vcpus = vcpus > 0 ? (uint64_t)vcpus : sd_conf.default_vcpus;
	d->mem_mib =
		(uint64_t)(mem_bytes > 0 ? mem_bytes : (int64_t)sd_conf.default_mem_bytes) >> 20;
	d->disk_gib = fs_bytes > 0 ? ((uint64_t)fs_bytes + (1ull << 30) - 1) >> 30 : 0;
}

/* The share of a create's body (its fields, or the defaults). */
static void share_of_body(json_t *o, struct usage *d)
{
	share_of(json_integer_value(json_object_get(o, "vcpus")),
		 json_integer_value(json_object_get(o, "mem_bytes")),
		 json_integer_value(json_object_get(o, "fs_capacity_bytes")), d);
}

int fleetd_quota_reserve(const char *workspace, json_t *body, char *msg, size_t len)
{
	struct sd_quota q;
	struct usage d;
	const char *what = "";
	uint64_t limit = 0;
	int err;

	if (quota_load(workspace, &q) < 0) {
		snprintf(msg, len, "the workspace's quota cannot be read");
		return -EIO;
	}
	share_of_body(body, &d);
	err = usage_change(workspace, &d, +1, &q, &what, &limit);
	if (err == -EDQUOT)
		snprintf(msg, len, "%s limit reached: the workspace's quota is %" PRIu64, what,
			 limit);
	else if (err < 0)
		snprintf(msg, len, "the fleet's usage records did not answer");
	return err;
}

void fleetd_quota_release_body(const char *workspace, json_t *body)
{
	struct usage d;
	struct sd_quota none = {0};
	const char *what;
	uint64_t limit;

	share_of_body(body, &d);
	if (usage_change(workspace, &d, -1, &none, &what, &limit) < 0)
		sd_log("fleet: workspace %s's usage is not given back: %s", workspace, fleetd.err);
}

void fleetd_quota_release_box(const char *workspace, unsigned vcpus, uint64_t mem_bytes,
			      uint64_t fs_bytes)
{
	struct usage d;
	struct sd_quota none = {0};
	const char *what;
	uint64_t limit;

	share_of(vcpus, (int64_t)mem_bytes, (int64_t)fs_bytes, &d);
	if (usage_change(workspace, &d, -1, &none, &what, &limit) < 0)
		sd_log("fleet: workspace %s's usage is not given back: %s", workspace, fleetd.err);
}

/* ---- the quotas' bucket, mirrored into the quota files ---- */

static void on_quota(void *arg, const char *key, const char *val, size_t len)
{
	char text[256];
	struct sd_quota q;

	(void)arg;
	if (!key || !val || strncmp(key, "q.", 2) != 0 || !valid_workspace(key + 2) ||
	    len >= sizeof(text))
		return;
	memcpy(text, val, len);
	text[len] = 0;
	if (quota_parse(text, &q) < 0) {
		sd_log("fleet: quota record %.80s is not a quota: ignored", key);
		return;
	}
	if (quota_save(key + 2, &q) < 0)
		sd_log("fleet: workspace %s's quota cannot be saved here", key + 2);
}

int fleet_quota_start(void)
{
	int err = fleet_kv_open(&fleetd, "sandbox_usage", 256, &usage_kv);

	if (err == 0)
		err = fleet_kv_open(&fleetd, "sandbox_quotas", 512, &quotas_kv);
	if (err == 0)
		err = fleet_watch_start(&fleetd, quotas_kv.kv, on_quota, NULL, &w_quotas);
	return err;
}

void fleet_quota_stop(void)
{
	fleet_watch_stop(w_quotas);
	w_quotas = NULL;
	fleet_kv_close(&quotas_kv);
	fleet_kv_close(&usage_kv);
}
