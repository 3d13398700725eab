/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Quotas and usage per workspace (docs/api.md, "Quotas"). A quota refused is a 429 whose
 * message names the quota, which the clients map to their quota error and its type
 * ("sandbox count", "cpu", "memory", "storage"). Usage: usage.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sandboxd.h"

static bool refuse(struct sd_req *q, const char *what, uint64_t limit)
{
	req_reply_error(q, 429, "QuotaExceeded", "%s limit reached: the workspace's quota is %llu",
			what, (unsigned long long)limit);
	return true;
}

bool quota_refuse_box(struct sd_req *q, unsigned vcpus, uint64_t mem_bytes, uint64_t fs_bytes)
{
	struct sd_quota quota;
	unsigned cpus;
	uint64_t mem_mib, disk_gib;

	if (quota_load(q->workspace, &quota) < 0) {
		req_reply_error(q, 500, "InternalError", "the workspace's quota cannot be read");
		return true;
	}
	unsigned n = box_count(q->workspace, &cpus, &mem_mib, &disk_gib);

	if (quota.sandboxes && n + 1 > quota.sandboxes)
		return refuse(q, "sandbox count", quota.sandboxes);
	if (quota.vcpus && cpus + vcpus > quota.vcpus)
		return refuse(q, "cpu", quota.vcpus);
	if (quota.memory_mib && mem_mib + (mem_bytes >> 20) > quota.memory_mib)
		return refuse(q, "memory", quota.memory_mib);
	if (quota.disk_gib && disk_gib + ((fs_bytes + (1ull << 30) - 1) >> 30) > quota.disk_gib)
		return refuse(q, "storage", quota.disk_gib);
	return false;
}

bool quota_refuse_snapshot(struct sd_req *q)
{
	struct sd_quota quota;

	if (quota_load(q->workspace, &quota) < 0) {
		req_reply_error(q, 500, "InternalError", "the workspace's quota cannot be read");
		return true;
	}
	if (quota.snapshots && snap_count(q->workspace) + 1 > quota.snapshots)
		return refuse(q, "snapshot count", quota.snapshots);
	return false;
}
