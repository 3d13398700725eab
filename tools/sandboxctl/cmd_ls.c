/* SPDX-License-Identifier: Apache-2.0 */
/* sandboxctl ls [--json]: every sandbox with its state, as a table or a JSON array. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sandboxctl.h"

/* Seconds as 42s, 3m07s or 5h02m. */
static void fmt_secs(uint64_t s, char *out, size_t len)
{
	if (s < 60)
		snprintf(out, len, "%llus", (unsigned long long)s);
	else if (s < 3600)
		snprintf(out, len, "%llum%02llus", (unsigned long long)s / 60,
			 (unsigned long long)s % 60);
	else
		snprintf(out, len, "%lluh%02llum", (unsigned long long)s / 3600,
			 (unsigned long long)s / 60 % 60);
}

static void fmt_uptime(uint64_t ms, enum sandbox_state st, char *out, size_t len)
{
	if (st != SB_RUNNING && st != SB_PAUSED)
		snprintf(out, len, "-");
	else
		fmt_secs(ms / 1000, out, len);
}

/* What is left of the --ttl: "-" without one, "ended" past it. */
static void fmt_ttl(const struct sandbox *sb, char *out, size_t len)
{
	uint64_t now = (uint64_t)time(NULL);

	if (!sb->deadline)
		snprintf(out, len, "-");
	else if (now >= sb->deadline)
		snprintf(out, len, "ended");
	else
		fmt_secs(sb->deadline - now, out, len);
}

static int ls_one(const struct sandbox *sb, void *opaque)
{
	int *json = opaque;
	uint64_t up;
	enum sandbox_state st = sandbox_state(sb, &up);
	char upbuf[32], ttlbuf[32], cpu[32] = "-", mem[32] = "-";
	struct cgroup_stats cs;
	bool have = cgroup_stats(sb, &cs) == 0;

	if (*json) {
		/* names and images are [A-Za-z0-9._-]: nothing to escape */
		printf("%s\n  {\"id\": \"%s\", \"name\": \"%s\", \"state\": \"%s\", \"image\": "
		       "\"%s\", \"cpus\": %u, \"memory_mib\": %llu, \"uptime_ms\": %llu, "
		       "\"pid\": %d, \"created\": %llu, \"deadline\": %llu, \"cpu_usec\": %llu, "
		       "\"memory_bytes\": %llu}",
		       *json == 1 ? "" : ",", sb->id, sb->name, sandbox_state_name(st), sb->image,
		       sb->cpus, (unsigned long long)sb->memory_mib, (unsigned long long)up,
		       st == SB_RUNNING || st == SB_PAUSED ? (int)sb->pid : 0,
		       (unsigned long long)sb->created, (unsigned long long)sb->deadline,
		       have ? (unsigned long long)cs.cpu_usec : 0ull,
		       have ? (unsigned long long)cs.memory_bytes : 0ull);
		*json = 2;
		return 0;
	}
	fmt_uptime(up, st, upbuf, sizeof(upbuf));
	fmt_ttl(sb, ttlbuf, sizeof(ttlbuf));
	if (have) {
		snprintf(cpu, sizeof(cpu), "%.1fs", (double)cs.cpu_usec / 1e6);
		stats_fmt_bytes(cs.memory_bytes, mem, sizeof(mem));
	}
	printf("%-12s  %-20s  %-8s  %-12s  %4u  %7lluM  %-8s  %8s  %10s  %s\n", sb->id, sb->name,
	       sandbox_state_name(st), sb->image, sb->cpus, (unsigned long long)sb->memory_mib,
	       upbuf, cpu, mem, ttlbuf);
	return 0;
}

int cmd_ls(int argc, char **argv)
{
	int json = 0, n;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			return ctl_help("ls");
		} else {
			errmsg("ls: unexpected argument '%s'", argv[i]);
			return ctl_usage("ls");
		}
	}
	if (json)
		printf("[");
	else
		printf("%-12s  %-20s  %-8s  %-12s  %4s  %8s  %-8s  %8s  %10s  %s\n", "ID", "NAME",
		       "STATE", "IMAGE", "CPUS", "MEMORY", "UPTIME", "CPU-USED", "MEM-USED", "TTL");
	n = sandbox_foreach(ls_one, &json, &ctl_report);
	if (json)
		printf("%s]\n", json == 2 ? "\n" : "");
	if (n < 0) {
		errmsg("cannot list %s/sandboxes: %s", state_home(), strerror(-n));
		return EXIT_ERR;
	}
	return EXIT_OK;
}
