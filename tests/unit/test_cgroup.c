/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client/cgroup.c without cgroups: the sandbox's `cgroup` record is hostile input (a bad one
 * is refused, one naming directories that are not cgroups is never acted on), the memory
 * limit's arithmetic, and SANDBOX_CGROUP's values.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"

static char tmp[64];
static struct sandbox sb;

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/test-cgroup-XXXXXX");
	cr_assert(mkdtemp(tmp) != NULL);
	memset(&sb, 0, sizeof(sb));
	snprintf(sb.id, sizeof(sb.id), "0123456789ab");
	snprintf(sb.dir, sizeof(sb.dir), "%s", tmp);
	sb.cpus = 2;
	sb.memory_mib = 512;
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	cr_assert(system(cmd) == 0);
}

static void record(const char *text)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/cgroup", tmp);
	cr_assert(write_file_atomic(path, text, strlen(text), 0600) == 0);
}

TestSuite(cgroup, .init = setup, .fini = teardown);

Test(cgroup, no_record_no_cgroup)
{
	struct cgroup_stats st;
	struct cgroup_snap f;

	cr_assert(eq(int, cgroup_stats(&sb, &st), -ENOENT));
	cr_assert(eq(int, cgroup_enter(&sb), 0));
	cr_assert(eq(int, cgroup_snap_begin(&sb, &f), 0));
	cr_assert(eq(int, cgroup_snap_end(&sb, &f, true, 0), 0));
	cgroup_remove(&sb, NULL); /* nothing to do, nothing said */
}

Test(cgroup, bad_records_are_refused)
{
	static const char *const bad[] = {
		"",
		"version 3\nmemory_base 1\ndir /sys/fs/cgroup/sandbox/0123456789ab\n",
		"version 2\nmemory_base 1\ndir /sys/fs/cgroup/sandbox/ffffffffffff\n",
		"version 2\nmemory_base 1\ndir /sys/fs/cgroup/../sandbox/0123456789ab\n",
		"version 2\nmemory_base 1\ndir sys/fs/cgroup/sandbox/0123456789ab\n",
		"version 2\nmemory_base 0\ndir /sys/fs/cgroup/sandbox/0123456789ab\n",
		"version 2\nmemory_base x\ndir /sys/fs/cgroup/sandbox/0123456789ab\n",
		"version 2\ndir /sys/fs/cgroup/sandbox/0123456789ab\n",
		"version 2\nmemory_base 1\n",
		"version 2\nmemory_base 1\nbogus /sys/fs/cgroup/sandbox/0123456789ab\n",
		"version 2 memory_base 1\n",
		/* v1 without its cpu, cpuacct and pids hierarchies */
		"version 1\nmemory_base 1\nmemory /sys/fs/cgroup/memory/sandbox/0123456789ab\n",
	};
	struct cgroup_stats st;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		record(bad[i]);
		cr_assert(eq(int, cgroup_stats(&sb, &st), -EBADMSG), "record %zu", i);
		cr_assert(eq(int, cgroup_enter(&sb), -EBADMSG), "record %zu", i);
	}
}

Test(cgroup, an_oversized_record_is_refused)
{
	char *big = malloc(20000);

	cr_assert(big != NULL);
	memset(big, 'a', 19999);
	big[19999] = '\0';
	memcpy(big, "version 2\n", 10);
	record(big);
	free(big);
	struct cgroup_stats st;

	cr_assert(eq(int, cgroup_stats(&sb, &st), -EBADMSG));
}

/* A well-formed record whose directory is an ordinary one: never written to, never
 * removed. */
Test(cgroup, directories_that_are_not_cgroups_are_not_touched)
{
	char dir[256], text[512], procs[300];
	struct cgroup_stats st;
	struct stat s;

	snprintf(dir, sizeof(dir), "%s/sandbox", tmp);
	cr_assert(mkdir(dir, 0700) == 0);
	snprintf(dir, sizeof(dir), "%s/sandbox/%s", tmp, sb.id);
	cr_assert(mkdir(dir, 0700) == 0);
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	snprintf(text, sizeof(text), "version 2\nmemory_base 1000000\ndir %s\n", dir);
	record(text);
	cr_assert(eq(int, cgroup_stats(&sb, &st), -ENOENT));
	cr_assert(eq(int, cgroup_enter(&sb), -ENOTDIR));
	cr_assert(stat(procs, &s) < 0 && errno == ENOENT, "cgroup_enter wrote %s", procs);
	cgroup_remove(&sb, NULL);
	cr_assert(stat(dir, &s) == 0, "cgroup_remove removed %s", dir);
}

Test(cgroup, memory_limit)
{
	uint64_t ram = 512ull << 20;

	cr_assert(eq(u64, cgroup_memory_limit(512, false),
		     ram + CGROUP_OVERHEAD_BYTES + ram / CGROUP_OVERHEAD_DIV));
	cr_assert(eq(u64, cgroup_memory_limit(512, true),
		     2 * ram + CGROUP_OVERHEAD_BYTES + ram / CGROUP_OVERHEAD_DIV));
}

Test(cgroup, the_setting)
{
	char msg[256], path[4200];

	setenv("SANDBOX_CGROUP", "v3", 1);
	cr_assert(eq(int, cgroup_create(&sb, false, 0, msg, sizeof(msg)), -EINVAL));
	cr_assert(strstr(msg, "give off, v1, v2 or auto") != NULL, "%s", msg);
	setenv("SANDBOX_CGROUP", "off", 1);
	cr_assert(eq(int, cgroup_create(&sb, false, 0, msg, sizeof(msg)), 0));
	snprintf(path, sizeof(path), "%s/cgroup", tmp);
	cr_assert(access(path, F_OK) < 0, "off made a cgroup record");
	unsetenv("SANDBOX_CGROUP");
}
