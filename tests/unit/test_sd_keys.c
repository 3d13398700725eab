/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxd's keys (sandboxd/keys.c): what the tick's keys_refresh reads again. A key file
 * renamed into the directory whose change the directory's time does not show (a rename seen
 * half done, two within one tick of the kernel's coarse file clock) is still found while the
 * change is recent; an unreadable key file leaves the keys as they were.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandboxd.h"

void sd_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static char home[] = "/tmp/test-sd-keys.XXXXXX";
static char kdir[256];

static void setup(void)
{
	cr_assert_not_null(mkdtemp(home));
	setenv("SANDBOX_HOME", home, 1);
	cr_assert_eq(sd_dir_init(), 0);
	snprintf(kdir, sizeof(kdir), "%s/service/keys", home);
	cr_assert_eq(keys_load(), 0);
}

static void teardown(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", home);
	cr_assert_eq(system(cmd), 0);
}

static struct timespec dir_time(void)
{
	struct stat st;

	cr_assert_eq(stat(kdir, &st), 0);
	return st.st_mtim;
}

static void set_dir_time(struct timespec t)
{
	struct timespec ts[2] = {t, t};

	cr_assert_eq(utimensat(AT_FDCWD, kdir, ts, 0), 0);
}

TestSuite(sd_keys, .init = setup, .fini = teardown);

Test(sd_keys, a_key_whose_rename_left_the_time_as_read_is_found)
{
	char a[SD_KEY_TEXT_LEN + 1], b[SD_KEY_TEXT_LEN + 1], id[SD_KEY_ID_LEN + 1];

	cr_assert_eq(keys_create("w1", a, id), 0);
	cr_assert(keys_refresh());
	cr_assert_not_null(keys_check(a));
	struct timespec t = dir_time();

	/* a second key comes, and the directory's time stays what the last read saw */
	cr_assert_eq(keys_create("w2", b, id), 0);
	set_dir_time(t);
	cr_assert(keys_refresh(), "a change under two seconds old is read again");
	cr_assert_not_null(keys_check(b), "the key renamed in after the read is known");
	cr_assert_not_null(keys_check(a));
}

Test(sd_keys, a_settled_change_is_read_once)
{
	char a[SD_KEY_TEXT_LEN + 1], id[SD_KEY_ID_LEN + 1];
	/* a time ahead of the clock (set back since): read for two seconds of this host's
	 * own clock, then no more */
	struct timespec ahead = {.tv_sec = time(NULL) + 3600};

	cr_assert_eq(keys_create("w1", a, id), 0);
	set_dir_time(ahead);
	cr_assert(keys_refresh());
	cr_assert_not_null(keys_check(a));
	usleep(2100 * 1000);
	cr_assert(keys_refresh(), "read once more, settled");
	cr_assert_not(keys_refresh(), "a settled change read is not read again");
}

Test(sd_keys, an_unreadable_key_file_keeps_the_keys)
{
	char a[SD_KEY_TEXT_LEN + 1], b[SD_KEY_TEXT_LEN + 1], id[SD_KEY_ID_LEN + 1], bad[512];

	cr_assert_eq(keys_create("w1", a, id), 0);
	cr_assert(keys_refresh());
	cr_assert_not_null(keys_check(a));
	/* key a's file turned into something that cannot be read, and a new key b: a is kept
	 * as it was, b is read */
	snprintf(bad, sizeof(bad), "%s/%s", kdir, id);
	cr_assert_eq(unlink(bad), 0);
	cr_assert_eq(mkdir(bad, 0700), 0);
	cr_assert_eq(keys_create("w2", b, id), 0);
	cr_assert(keys_refresh());
	cr_assert_not_null(keys_check(a), "the key whose file cannot be read is kept");
	cr_assert_not_null(keys_check(b), "the others are read");
	/* and one whose file is gone is gone */
	cr_assert_eq(rmdir(bad), 0);
	cr_assert(keys_refresh());
	cr_assert_null(keys_check(a));
	cr_assert_not_null(keys_check(b));
}
