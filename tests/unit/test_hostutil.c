/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of hostutil/ (hostutil.h): bounded reads of hostile files (links, FIFOs, files longer
 * than their bound, /proc files that report no size), atomic writes, decimal numbers.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostutil.h"

static char dir[] = "/tmp/test_hostutil.XXXXXX";
static char path[256];

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

static const char *at(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

static void put(const char *name, const char *text)
{
	cr_assert_eq(write_file_atomic(at(name), text, strlen(text), 0640), 0);
}

TestSuite(hostutil, .init = setup, .fini = teardown);

Test(hostutil, write_then_read)
{
	struct stat st;
	char *text;
	size_t len;

	put("f", "hello\n");
	cr_assert_eq(stat(at("f"), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0640);
	cr_assert_eq(read_file(at("f"), 6, &text, &len), 0);
	cr_assert_eq(len, 6);
	cr_assert_str_eq(text, "hello\n");
	free(text);
	/* overwritten whole; no temporary file left beside it */
	put("f", "x");
	cr_assert_eq(read_file(at("f"), 64, &text, NULL), 0);
	cr_assert_str_eq(text, "x");
	free(text);
	snprintf(path, sizeof(path), "test $(ls %s | wc -l) = 1", dir);
	cr_assert_eq(system(path), 0, "a temporary file was left in %s", dir);
}

Test(hostutil, longer_than_its_bound)
{
	char *text = NULL;

	put("f", "12345");
	cr_assert_eq(read_file(at("f"), 4, &text, NULL), -EFBIG);
	cr_assert_null(text);
	cr_assert_eq(read_file_follow(at("f"), 4, &text, NULL), -EFBIG);
	cr_assert_eq(read_file(at("f"), 5, &text, NULL), 0);
	free(text);
}

Test(hostutil, links_only_when_asked)
{
	char target[256], *text;

	put("real", "data");
	snprintf(target, sizeof(target), "%s/real", dir);
	cr_assert_eq(symlink(target, at("link")), 0);
	cr_assert_eq(read_file(at("link"), 64, &text, NULL), -ELOOP);
	cr_assert_eq(read_file_follow(at("link"), 64, &text, NULL), 0);
	cr_assert_str_eq(text, "data");
	free(text);
}

Test(hostutil, not_a_regular_file)
{
	char *text;

	/* a FIFO with no writer: refused at once, not waited on */
	cr_assert_eq(mkfifo(at("fifo"), 0600), 0);
	cr_assert_eq(read_file(at("fifo"), 64, &text, NULL), -EINVAL);
	cr_assert_eq(read_file_follow(dir, 64, &text, NULL), -EINVAL);
	cr_assert_eq(read_file(at("missing"), 64, &text, NULL), -ENOENT);
}

Test(hostutil, proc_files_report_no_size)
{
	char *text;
	size_t len;

	/* /proc/self/maps: size 0 in stat, several KiB to read; grown past the first 4 KiB */
	cr_assert_eq(read_file_follow("/proc/self/maps", 1 << 20, &text, &len), 0);
	cr_assert_gt(len, 0);
	cr_assert_eq(strlen(text), len);
	free(text);
	/* and bounded all the same */
	cr_assert_eq(read_file_follow("/proc/self/maps", 16, &text, &len), -EFBIG);
}

Test(hostutil, parse_u64_takes_only_digits)
{
	uint64_t v;

	cr_assert(parse_u64("42", 1, 100, &v) && v == 42);
	cr_assert_not(parse_u64("0", 1, 100, &v));
	cr_assert_not(parse_u64("101", 1, 100, &v));
	cr_assert_not(parse_u64("-1", 0, 100, &v));
	cr_assert_not(parse_u64(" 1", 0, 100, &v));
	cr_assert_not(parse_u64("1x", 0, 100, &v));
	cr_assert_not(parse_u64("", 0, 100, &v));
	cr_assert_not(parse_u64("99999999999999999999999", 0, UINT64_MAX, &v));
	cr_assert(parse_u64("18446744073709551615", 0, UINT64_MAX, &v) && v == UINT64_MAX);
}
