/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl stats ID [--json]: what the sandbox's cgroup counted (its VMM, proxy and port
 * forwarders together): CPU time, memory now, at its peak and its limit, I/O bytes, pids.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sandboxctl.h"

/* "12.3 MiB", or "max" for an unlimited limit. */
void stats_fmt_bytes(uint64_t v, char *out, size_t len)
{
	if (v == UINT64_MAX)
		snprintf(out, len, "max");
	else if (v < (1u << 20))
		snprintf(out, len, "%llu KiB", (unsigned long long)(v >> 10));
	else
		snprintf(out, len, "%.1f MiB", (double)v / (1 << 20));
}

/* A JSON string of `s`, which came from the sandbox's record of its cgroup. */
static void stats_json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void stats_json(const struct sandbox *sb, const struct cgroup_stats *st)
{
	printf("{\"id\": \"%s\", \"cgroup\": \"v%d\", \"dir\": ", sb->id, st->version);
	stats_json_str(st->dir);
	printf(", \"cpu_usec\": %llu, \"cpus\": %u, \"memory_bytes\": %llu, "
	       "\"memory_peak_bytes\": %llu, \"memory_max_bytes\": %llu, "
	       "\"memory_shmem_bytes\": %llu, \"io_read_bytes\": %llu, \"io_write_bytes\": %llu, "
	       "\"pids\": %llu, \"pids_max\": %llu}\n",
	       (unsigned long long)st->cpu_usec, sb->cpus, (unsigned long long)st->memory_bytes,
	       (unsigned long long)st->memory_peak_bytes,
	       st->memory_max_bytes == UINT64_MAX ? 0ull : (unsigned long long)st->memory_max_bytes,
	       (unsigned long long)st->memory_shmem_bytes, (unsigned long long)st->io_read_bytes,
	       (unsigned long long)st->io_write_bytes, (unsigned long long)st->pids,
	       st->pids_max == UINT64_MAX ? 0ull : (unsigned long long)st->pids_max);
}

int cmd_stats(int argc, char **argv)
{
	char now[32], peak[32], max[32], rd[32], wr[32];
	const char *ref = NULL;
	struct cgroup_stats st;
	struct sandbox sb;
	bool json = false;
	int status, err;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = true;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			return ctl_help("stats");
		} else if (!ref && argv[i][0] != '-') {
			ref = argv[i];
		} else {
			errmsg("stats: unexpected argument '%.64s'", argv[i]);
			return ctl_usage("stats");
		}
	}
	if (!ref) {
		return ctl_usage("stats");
	}
	if ((status = sandbox_resolve(ref, &sb)))
		return status;
	if ((err = cgroup_stats(&sb, &st)) < 0) {
		if (err == -ENOENT)
			errmsg("%s has no cgroup (%s; see docs/hardening.md)", sb.id,
			       sandbox_vmm_alive(&sb) ? "made without one" : "not running");
		else
			errmsg("%s: cannot read its cgroup: %s", sb.id, strerror(-err));
		return EXIT_ERR;
	}
	if (json) {
		stats_json(&sb, &st);
		return EXIT_OK;
	}
	stats_fmt_bytes(st.memory_bytes, now, sizeof(now));
	stats_fmt_bytes(st.memory_max_bytes, max, sizeof(max));
	if (st.memory_peak_bytes)
		stats_fmt_bytes(st.memory_peak_bytes, peak, sizeof(peak));
	else
		snprintf(peak, sizeof(peak), "-");
	stats_fmt_bytes(st.io_read_bytes, rd, sizeof(rd));
	stats_fmt_bytes(st.io_write_bytes, wr, sizeof(wr));
	printf("id      %s\n", sb.id);
	printf("cgroup  v%d %s\n", st.version, st.dir);
	printf("cpu     %.3f s used, limit %u CPUs\n", (double)st.cpu_usec / 1e6, sb.cpus);
	printf("memory  %s now, %s at its peak, limit %s\n", now, peak, max);
	printf("io      %s read, %s written\n", rd, wr);
	if (st.pids_max == UINT64_MAX)
		printf("pids    %llu, limit max\n", (unsigned long long)st.pids);
	else
		printf("pids    %llu, limit %llu\n", (unsigned long long)st.pids,
		       (unsigned long long)st.pids_max);
	return EXIT_OK;
}
