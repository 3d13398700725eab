/* SPDX-License-Identifier: Apache-2.0 */
/* guest/cmdline.c: the sandbox.* options sandbox-init reads from the kernel command line. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <criterion/new/assert.h>

#include "cmdline.h"

/*
 * Parse the NUL-terminated s from a heap copy of exactly strlen(s) bytes, with no NUL after
 * it, so ASan catches the parser reading past len. opts starts from the defaults.
 */
static int parse_str(const char *s, struct cmdline_options *opts)
{
	size_t len = strlen(s);
	char *buf = malloc(len ? len : 1);
	int rc;

	cr_assert(not(eq(ptr, buf, NULL)));
	memcpy(buf, s, len);
	cmdline_init_options(opts);
	rc = cmdline_parse(buf, len, opts);
	free(buf);
	return rc;
}

/* Assert that opts holds exactly the given values. */
static void check_opts(const struct cmdline_options *opts, bool panic, bool reboot,
		       unsigned int ignored)
{
	cr_assert(eq(int, opts->panic, panic), "panic");
	cr_assert(eq(int, opts->reboot, reboot), "reboot");
	cr_assert(eq(uint, opts->ignored_count, ignored), "ignored_count");
}

Test(guest_cmdline, init_gives_defaults)
{
	struct cmdline_options opts;

	memset(&opts, 0xa5, sizeof(opts));
	cmdline_init_options(&opts);
	check_opts(&opts, false, true, 0);
}

Test(guest_cmdline, no_sandbox_options_keeps_defaults)
{
	struct cmdline_options opts;

	cr_assert(eq(int,
		     parse_str("console=ttyS0 earlyprintk=serial panic=-1 reboot=t quiet "
			       "init=/sbin/sandbox-init root=/dev/vda rw\n",
			       &opts),
		     0));
	check_opts(&opts, false, true, 0);

	/* Near misses of the prefix belong to the kernel too, and are not warned about. */
	cr_assert(eq(
		int,
		parse_str("sandbox panic=1 SANDBOX.panic=1 sandboxpanic=1 xsandbox.panic", &opts),
		0));
	check_opts(&opts, false, true, 0);
}

Test(guest_cmdline, empty_string)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("", &opts), 0));
	check_opts(&opts, false, true, 0);

	/* len 0 reads nothing, whatever the buffer holds */
	cmdline_init_options(&opts);
	cr_assert(eq(int, cmdline_parse("sandbox.panic", 0, &opts), 0));
	check_opts(&opts, false, true, 0);
}

Test(guest_cmdline, only_spaces)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str(" ", &opts), 0));
	check_opts(&opts, false, true, 0);
	cr_assert(eq(int, parse_str("     \t \n\r  \n", &opts), 0));
	check_opts(&opts, false, true, 0);
}

Test(guest_cmdline, options_are_read)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("console=ttyS0 sandbox.panic=1 quiet", &opts), 0));
	check_opts(&opts, true, true, 0);
	cr_assert(eq(int, parse_str("sandbox.reboot=0", &opts), 0));
	check_opts(&opts, false, false, 0);
	cr_assert(eq(int, parse_str("sandbox.panic=0 sandbox.reboot=1", &opts), 0));
	check_opts(&opts, false, true, 0);
	/* both 1: the parser keeps both; panic winning is init's decision */
	cr_assert(eq(int, parse_str("sandbox.panic=1 sandbox.reboot=1", &opts), 0));
	check_opts(&opts, true, true, 0);
}

Test(guest_cmdline, words_split_at_any_whitespace)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("\tsandbox.panic=1\nsandbox.reboot=0\r\n", &opts), 0));
	check_opts(&opts, true, false, 0);
	cr_assert(eq(int, parse_str("  quiet   sandbox.reboot=0    ", &opts), 0));
	check_opts(&opts, false, false, 0);
}

Test(guest_cmdline, later_options_win)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("sandbox.panic=1 sandbox.panic=0", &opts), 0));
	check_opts(&opts, false, true, 0);
	cr_assert(eq(int, parse_str("sandbox.panic=0 quiet sandbox.panic=1", &opts), 0));
	check_opts(&opts, true, true, 0);
	cr_assert(
		eq(int, parse_str("sandbox.reboot=0 sandbox.reboot=1 sandbox.reboot=0", &opts), 0));
	check_opts(&opts, false, false, 0);
	cr_assert(eq(int, parse_str("sandbox.panic sandbox.panic=0", &opts), 0));
	check_opts(&opts, false, true, 0);
	cr_assert(eq(int, parse_str("sandbox.panic=0 sandbox.panic", &opts), 0));
	check_opts(&opts, true, true, 0);
}

Test(guest_cmdline, bad_value_does_not_override_earlier_word)
{
	struct cmdline_options opts;

	/* a later bad value is ignored, so the earlier good one stands */
	cr_assert(eq(int, parse_str("sandbox.panic=1 sandbox.panic=2", &opts), 0));
	check_opts(&opts, true, true, 1);
	cr_assert(eq(int, parse_str("sandbox.reboot=0 sandbox.reboot=yes", &opts), 0));
	check_opts(&opts, false, false, 1);
}

Test(guest_cmdline, parse_updates_and_does_not_reset)
{
	struct cmdline_options opts;

	cmdline_init_options(&opts);
	opts.panic = true;
	opts.reboot = false;
	opts.ignored_count = 5;
	cr_assert(eq(int, cmdline_parse("quiet", 5, &opts), 0));
	check_opts(&opts, true, false, 5);
	cr_assert(eq(int, cmdline_parse("sandbox.nope", 12, &opts), 0));
	check_opts(&opts, true, false, 6);
}

Test(guest_cmdline, bare_panic_means_1)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("sandbox.panic", &opts), 0));
	check_opts(&opts, true, true, 0);
	cr_assert(eq(int, parse_str("quiet sandbox.panic console=ttyS0", &opts), 0));
	check_opts(&opts, true, true, 0);
	/* same rule for the other boolean */
	cr_assert(eq(int, parse_str("sandbox.reboot=0 sandbox.reboot", &opts), 0));
	check_opts(&opts, false, true, 0);
}

Test(guest_cmdline, empty_value_is_bad)
{
	struct cmdline_options opts;

	/* "name=" has a value, an empty one: not 0 or 1, unlike the bare word */
	cr_assert(eq(int, parse_str("sandbox.panic=", &opts), 0));
	check_opts(&opts, false, true, 1);
	cr_assert(eq(int, parse_str("sandbox.panic=\"\"", &opts), 0));
	check_opts(&opts, false, true, 1);
}

Test(guest_cmdline, quoted_value)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("sandbox.panic=\"1\"", &opts), 0));
	check_opts(&opts, true, true, 0);
	cr_assert(eq(int, parse_str("sandbox.panic=1 sandbox.panic=\"0\"", &opts), 0));
	check_opts(&opts, false, true, 0);
	cr_assert(eq(int, parse_str("sandbox.reboot=\"0\" quiet", &opts), 0));
	check_opts(&opts, false, false, 0);
	/* only one pair of quotes comes off */
	cr_assert(eq(int, parse_str("sandbox.panic=\"\"1\"\"", &opts), 0));
	check_opts(&opts, false, true, 1);
}

Test(guest_cmdline, quoted_value_with_spaces_is_one_word)
{
	struct cmdline_options opts;

	/* the space is inside the quotes: one word, value "1 sandbox.reboot=0", which is bad */
	cr_assert(eq(int, parse_str("sandbox.panic=\"1 sandbox.reboot=0\"", &opts), 0));
	check_opts(&opts, false, true, 1);
}

Test(guest_cmdline, options_inside_quotes_are_not_options)
{
	struct cmdline_options opts;

	/* inside another word's quoted value: part of that (kernel) word */
	cr_assert(
		eq(int,
		   parse_str("init.args=\"sandbox.panic=1 sandbox.reboot=0\" console=ttyS0", &opts),
		   0));
	check_opts(&opts, false, true, 0);
	cr_assert(eq(int, parse_str("foo=\"a sandbox.panic b\" sandbox.reboot=0", &opts), 0));
	check_opts(&opts, false, false, 0);
	/* quotes in the middle of a word group too */
	cr_assert(eq(int, parse_str("foo\"bar sandbox.panic=1\"baz", &opts), 0));
	check_opts(&opts, false, true, 0);
	/* inside an unknown sandbox.* word's value: one unknown word, nothing else */
	cr_assert(eq(int, parse_str("sandbox.x=\"y sandbox.panic=1\" sandbox.reboot=0", &opts), 0));
	check_opts(&opts, false, false, 1);
}

Test(guest_cmdline, unbalanced_quote_runs_to_the_end)
{
	struct cmdline_options opts;

	/* as in the kernel, an open quote swallows the rest of the line into one word */
	cr_assert(eq(int, parse_str("foo=\"bar sandbox.panic=1 sandbox.reboot=0", &opts), 0));
	check_opts(&opts, false, true, 0);
	cr_assert(eq(int, parse_str("sandbox.reboot=0 \" sandbox.panic=1", &opts), 0));
	check_opts(&opts, false, false, 0);
	/* a lone closing-less quote in a value is not stripped: bad value */
	cr_assert(eq(int, parse_str("sandbox.panic=\"1", &opts), 0));
	check_opts(&opts, false, true, 1);
	/* a balanced pair closes the quote, and the next word is read again */
	cr_assert(eq(int, parse_str("foo=\"a b\" sandbox.panic=1", &opts), 0));
	check_opts(&opts, true, true, 0);
}

Test(guest_cmdline, unknown_options_are_warnings)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("sandbox.nope=1", &opts), 0));
	check_opts(&opts, false, true, 1);
	cr_assert(eq(int, parse_str("sandbox. sandbox.= sandbox.=1", &opts), 0));
	check_opts(&opts, false, true, 3);
	/* names match exactly: no prefixes, suffixes or other case */
	cr_assert(eq(int,
		     parse_str("sandbox.pani=1 sandbox.panicky=1 sandbox.Panic=1 sandbox.panic.x=1 "
			       "sandbox.rebootx",
			       &opts),
		     0));
	check_opts(&opts, false, true, 5);
	/* known ones around the unknown ones are still read */
	cr_assert(eq(
		int,
		parse_str("sandbox.a sandbox.panic=1 sandbox.b sandbox.reboot=0 sandbox.c", &opts),
		0));
	check_opts(&opts, true, false, 3);
}

Test(guest_cmdline, bad_values_are_warnings)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("sandbox.panic=2", &opts), 0));
	check_opts(&opts, false, true, 1);
	cr_assert(
		eq(int,
		   parse_str("sandbox.panic=yes sandbox.panic=true sandbox.panic=01 "
			     "sandbox.panic=10 sandbox.panic=-1 sandbox.panic=1x sandbox.panic==1",
			     &opts),
		   0));
	check_opts(&opts, false, true, 7);
	cr_assert(eq(int, parse_str("sandbox.reboot=no sandbox.reboot=00 sandbox.reboot= ", &opts),
		     0));
	check_opts(&opts, false, true, 3);
}

Test(guest_cmdline, warning_is_logged, .init = cr_redirect_stderr)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("quiet sandbox.nope=1 sandbox.panic=7", &opts), 0));
	check_opts(&opts, false, true, 2);
	fflush(stderr);
	cr_assert(cr_stderr_match_str(
		"sandbox-init: warning: ignoring unknown kernel option 'sandbox.nope=1'\n"
		"sandbox-init: warning: ignoring bad value in kernel option 'sandbox.panic=7'\n"));
}

Test(guest_cmdline, warning_quotes_at_most_80_bytes, .init = cr_redirect_stderr)
{
	struct cmdline_options opts;
	char word[201];
	char expected[256];

	memset(word, 'x', sizeof(word) - 1);
	memcpy(word, "sandbox.", 8);
	word[sizeof(word) - 1] = '\0';
	cr_assert(eq(int, parse_str(word, &opts), 0));
	check_opts(&opts, false, true, 1);
	snprintf(expected, sizeof(expected),
		 "sandbox-init: warning: ignoring unknown kernel option '%.80s'\n", word);
	fflush(stderr);
	cr_assert(cr_stderr_match_str(expected));
}

Test(guest_cmdline, stops_at_nul)
{
	static const char buf[] = "sandbox.reboot=0\0sandbox.panic=1 sandbox.nope";
	struct cmdline_options opts;

	cmdline_init_options(&opts);
	cr_assert(eq(int, cmdline_parse(buf, sizeof(buf) - 1, &opts), 0));
	check_opts(&opts, false, false, 0);

	/* a NUL in the middle of a word ends that word */
	cmdline_init_options(&opts);
	cr_assert(eq(int,
		     cmdline_parse("sandbox.panic=1\0"
				   "0",
				   17, &opts),
		     0));
	check_opts(&opts, true, true, 0);

	/* a NUL first: nothing */
	cmdline_init_options(&opts);
	cr_assert(eq(int, cmdline_parse("\0sandbox.panic", 14, &opts), 0));
	check_opts(&opts, false, true, 0);
}

Test(guest_cmdline, stops_after_len)
{
	struct cmdline_options opts;

	/* the word is cut at len: "sandbox.panic" (bare, so 1), not "sandbox.panic=0" */
	cmdline_init_options(&opts);
	cr_assert(eq(int, cmdline_parse("sandbox.panic=0", 13, &opts), 0));
	check_opts(&opts, true, true, 0);

	/* cut inside the name: an unknown option */
	cmdline_init_options(&opts);
	cr_assert(eq(int, cmdline_parse("sandbox.panic=1", 11, &opts), 0));
	check_opts(&opts, false, true, 1);
}

Test(guest_cmdline, too_long_is_refused)
{
	size_t len = CMDLINE_MAX_LEN + 1;
	char *buf = malloc(len);
	struct cmdline_options opts;

	cr_assert(not(eq(ptr, buf, NULL)));
	memset(buf, ' ', len);
	memcpy(buf, "sandbox.panic=1", 15);
	memcpy(buf + len - 16, "sandbox.reboot=0", 16);

	/* refused, and opts untouched */
	opts.panic = false;
	opts.reboot = true;
	opts.ignored_count = 42;
	cr_assert(eq(int, cmdline_parse(buf, len, &opts), -E2BIG));
	check_opts(&opts, false, true, 42);

	/* the check is on len, as documented, even when a NUL comes well before it */
	buf[15] = '\0';
	cr_assert(eq(int, cmdline_parse(buf, len, &opts), -E2BIG));
	check_opts(&opts, false, true, 42);
	cr_assert(eq(int, cmdline_parse(buf, SIZE_MAX, &opts), -E2BIG));
	check_opts(&opts, false, true, 42);
	free(buf);
}

Test(guest_cmdline, max_len_is_accepted)
{
	size_t len = CMDLINE_MAX_LEN;
	char *buf = malloc(len); /* no NUL: the last byte read must be buf[len - 1] */
	struct cmdline_options opts;

	cr_assert(not(eq(ptr, buf, NULL)));
	memset(buf, ' ', len);
	memcpy(buf, "sandbox.panic=1", 15);
	memcpy(buf + len - 16, "sandbox.reboot=0", 16);
	cmdline_init_options(&opts);
	cr_assert(eq(int, cmdline_parse(buf, len, &opts), 0));
	check_opts(&opts, true, false, 0);

	/* a bare word ending exactly at the last byte */
	memset(buf, ' ', len);
	memcpy(buf + len - 13, "sandbox.panic", 13);
	cmdline_init_options(&opts);
	cr_assert(eq(int, cmdline_parse(buf, len, &opts), 0));
	check_opts(&opts, true, true, 0);
	free(buf);
}

Test(guest_cmdline, one_long_word_of_max_len)
{
	size_t len = CMDLINE_MAX_LEN;
	char *buf = malloc(len);
	struct cmdline_options opts;

	cr_assert(not(eq(ptr, buf, NULL)));

	/* a kernel word: skipped silently */
	memset(buf, 'a', len);
	cmdline_init_options(&opts);
	cr_assert(eq(int, cmdline_parse(buf, len, &opts), 0));
	check_opts(&opts, false, true, 0);

	/* a sandbox.* word with a 4082-byte name: one unknown option */
	memcpy(buf, "sandbox.", 8);
	cmdline_init_options(&opts);
	cr_assert(eq(int, cmdline_parse(buf, len, &opts), 0));
	check_opts(&opts, false, true, 1);

	/* sandbox.panic with a 4082-byte value: one bad value */
	memcpy(buf, "sandbox.panic=", 14);
	cmdline_init_options(&opts);
	cr_assert(eq(int, cmdline_parse(buf, len, &opts), 0));
	check_opts(&opts, false, true, 1);

	/* a word made one by an opening quote that never closes */
	memset(buf, ' ', len);
	buf[0] = '"';
	memcpy(buf + len - 15, "sandbox.panic=1", 15);
	cmdline_init_options(&opts);
	cr_assert(eq(int, cmdline_parse(buf, len, &opts), 0));
	check_opts(&opts, false, true, 0);
	free(buf);
}

/* Assert the root options: device (NULL for none), filesystem type and rw. */
static void check_root(const struct cmdline_options *opts, const char *root, const char *fstype,
		       bool rw)
{
	cr_assert(eq(str, (char *)opts->root, (char *)(root ? root : "")), "root");
	cr_assert(eq(str, (char *)opts->rootfstype, (char *)fstype), "rootfstype");
	cr_assert(eq(int, opts->root_rw, rw), "rw");
}

Test(guest_cmdline, root_defaults)
{
	struct cmdline_options opts;

	memset(&opts, 0xa5, sizeof(opts));
	cmdline_init_options(&opts);
	check_root(&opts, NULL, "ext4", true);
	/* the kernel's own root= is the kernel's, not ours */
	cr_assert(eq(int, parse_str("root=/dev/vda rootfstype=ext4 ro rw", &opts), 0));
	check_root(&opts, NULL, "ext4", true);
	check_opts(&opts, false, true, 0);
}

Test(guest_cmdline, root_options_are_read)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("console=ttyS0 quiet sandbox.root=/dev/vda", &opts), 0));
	check_root(&opts, "/dev/vda", "ext4", true);
	check_opts(&opts, false, true, 0);
	cr_assert(eq(int,
		     parse_str("sandbox.root=/dev/vdb sandbox.rootfstype=ext2 sandbox.rw=0 "
			       "sandbox.reboot=0",
			       &opts),
		     0));
	check_root(&opts, "/dev/vdb", "ext2", false);
	check_opts(&opts, false, false, 0);
	cr_assert(eq(int, parse_str("sandbox.rw=1 sandbox.root=\"/dev/disk/by-id/x-1_2\"", &opts),
		     0));
	check_root(&opts, "/dev/disk/by-id/x-1_2", "ext4", true);
	/* rw is a boolean like the others: bare means 1 */
	cr_assert(eq(int, parse_str("sandbox.rw=0 sandbox.rw", &opts), 0));
	check_root(&opts, NULL, "ext4", true);
	check_opts(&opts, false, true, 0);
}

Test(guest_cmdline, root_later_options_win)
{
	struct cmdline_options opts;

	cr_assert(eq(int,
		     parse_str("sandbox.root=/dev/vda sandbox.root=/dev/vdb sandbox.rootfstype=xfs "
			       "sandbox.rootfstype=btrfs",
			       &opts),
		     0));
	check_root(&opts, "/dev/vdb", "btrfs", true);
	/* a shorter value after a longer one leaves nothing of the longer one behind */
	cr_assert(eq(int, parse_str("sandbox.root=/dev/vdaaaaa sandbox.root=/dev/v", &opts), 0));
	check_root(&opts, "/dev/v", "ext4", true);
}

Test(guest_cmdline, root_bad_values_are_ignored)
{
	struct cmdline_options opts;

	/* each is bad, and the earlier good value stands */
	cr_assert(eq(int,
		     parse_str("sandbox.root=/dev/vda sandbox.root sandbox.root= sandbox.root=\"\" "
			       "sandbox.root=vda sandbox.root=/dev/ sandbox.root=/dev "
			       "sandbox.root=/tmp/vda sandbox.root=/dev/../etc/x "
			       "sandbox.root=//dev/vda sandbox.root=/DEV/vda",
			       &opts),
		     0));
	check_root(&opts, "/dev/vda", "ext4", true);
	check_opts(&opts, false, true, 10);
	/* a space (quoted), a quote left in the middle, a backslash, a control byte */
	cr_assert(eq(int,
		     parse_str("sandbox.root=\"/dev/v da\" sandbox.root=/dev/v\"d\"a "
			       "sandbox.root=/dev/v\\da sandbox.root=/dev/v\x01"
			       "da",
			       &opts),
		     0));
	check_root(&opts, NULL, "ext4", true);
	check_opts(&opts, false, true, 4);

	cr_assert(eq(int,
		     parse_str("sandbox.rootfstype=ext3 sandbox.rootfstype sandbox.rootfstype= "
			       "sandbox.rootfstype=Ext4 sandbox.rootfstype=ext-4 "
			       "sandbox.rootfstype=ext4,ro sandbox.rootfstype=/ext4",
			       &opts),
		     0));
	check_root(&opts, NULL, "ext3", true);
	check_opts(&opts, false, true, 6);

	cr_assert(eq(int, parse_str("sandbox.rw=0 sandbox.rw=2 sandbox.rw=yes sandbox.rw=", &opts),
		     0));
	check_root(&opts, NULL, "ext4", false);
	check_opts(&opts, false, true, 3);
}

Test(guest_cmdline, root_length_limits)
{
	struct cmdline_options opts;
	char word[256];
	char root[CMDLINE_ROOT_MAX + 2];
	char fstype[CMDLINE_FSTYPE_MAX + 2];

	/* exactly CMDLINE_ROOT_MAX bytes fit */
	memset(root, 'a', sizeof(root));
	memcpy(root, "/dev/", 5);
	root[CMDLINE_ROOT_MAX] = '\0';
	snprintf(word, sizeof(word), "sandbox.root=%s", root);
	cr_assert(eq(int, parse_str(word, &opts), 0));
	check_root(&opts, root, "ext4", true);
	check_opts(&opts, false, true, 0);
	/* one more does not, and is not cut to fit */
	root[CMDLINE_ROOT_MAX] = 'a';
	root[CMDLINE_ROOT_MAX + 1] = '\0';
	snprintf(word, sizeof(word), "sandbox.root=/dev/vda sandbox.root=%s", root);
	cr_assert(eq(int, parse_str(word, &opts), 0));
	check_root(&opts, "/dev/vda", "ext4", true);
	check_opts(&opts, false, true, 1);

	memset(fstype, 'x', sizeof(fstype));
	fstype[CMDLINE_FSTYPE_MAX] = '\0';
	snprintf(word, sizeof(word), "sandbox.rootfstype=%s", fstype);
	cr_assert(eq(int, parse_str(word, &opts), 0));
	check_root(&opts, NULL, fstype, true);
	check_opts(&opts, false, true, 0);
	fstype[CMDLINE_FSTYPE_MAX] = 'x';
	fstype[CMDLINE_FSTYPE_MAX + 1] = '\0';
	snprintf(word, sizeof(word), "sandbox.rootfstype=%s", fstype);
	cr_assert(eq(int, parse_str(word, &opts), 0));
	check_root(&opts, NULL, "ext4", true);
	check_opts(&opts, false, true, 1);
}

Test(guest_cmdline, root_value_cut_at_len)
{
	struct cmdline_options opts;

	/* the value ends at len: "/dev/vd", not "/dev/vda", and it is NUL-terminated */
	memset(&opts, 0xa5, sizeof(opts));
	cmdline_init_options(&opts);
	cr_assert(eq(int, cmdline_parse("sandbox.root=/dev/vda", 20, &opts), 0));
	check_root(&opts, "/dev/vd", "ext4", true);
	check_opts(&opts, false, true, 0);
}

Test(guest_cmdline, root_names_match_exactly)
{
	struct cmdline_options opts;

	cr_assert(eq(int,
		     parse_str("sandbox.roo=/dev/vda sandbox.roots=/dev/vda sandbox.Root=/dev/vda "
			       "sandbox.rootfs=ext4 sandbox.rootfstypes=ext4 sandbox.r=0 "
			       "sandbox.rwx=0",
			       &opts),
		     0));
	check_root(&opts, NULL, "ext4", true);
	check_opts(&opts, false, true, 7);
}

Test(guest_cmdline, root_warning_is_logged, .init = cr_redirect_stderr)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("sandbox.root=vda sandbox.rootfstype=EXT4", &opts), 0));
	check_root(&opts, NULL, "ext4", true);
	fflush(stderr);
	cr_assert(cr_stderr_match_str(
		"sandbox-init: warning: ignoring bad value in kernel option 'sandbox.root=vda'\n"
		"sandbox-init: warning: ignoring bad value in kernel option "
		"'sandbox.rootfstype=EXT4'\n"));
}

Test(guest_cmdline, net_defaults_to_none)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("console=ttyS0 sandbox.reboot=0", &opts), 0));
	cr_assert(not(opts.net));
}

Test(guest_cmdline, net_is_read)
{
	struct cmdline_options opts;

	cr_assert(eq(int, parse_str("quiet sandbox.net=10.0.2.2/30,10.0.2.1 panic=-1", &opts), 0));
	check_opts(&opts, false, true, 0);
	cr_assert(opts.net);
	cr_assert(eq(u32, opts.net_addr, 0x0a000202u));
	cr_assert(eq(uint, opts.net_prefix, 30));
	cr_assert(eq(u32, opts.net_gateway, 0x0a000201u));
	cr_assert(eq(int, parse_str("sandbox.net=\"192.168.100.7/24,192.168.100.254\"", &opts), 0));
	cr_assert(opts.net);
	cr_assert(eq(u32, opts.net_addr, 0xc0a86407u));
	cr_assert(eq(uint, opts.net_prefix, 24));
	cr_assert(eq(u32, opts.net_gateway, 0xc0a864feu));
}

Test(guest_cmdline, net_bad_values_are_ignored)
{
	static const char *const bad[] = {
		"sandbox.net",
		"sandbox.net=",
		"sandbox.net=10.0.2.2",
		"sandbox.net=10.0.2.2/30",
		"sandbox.net=10.0.2.2/30,",
		"sandbox.net=10.0.2.2,10.0.2.1",
		"sandbox.net=10.0.2.2/0,10.0.2.1",
		"sandbox.net=10.0.2.2/31,10.0.2.3",
		"sandbox.net=10.0.2.2/33,10.0.2.1",
		"sandbox.net=10.0.2.2/030,10.0.2.1",
		"sandbox.net=10.0.2.2/30,10.0.2.2", /* the gateway is the address */
		"sandbox.net=10.0.2.2/30,10.0.3.1", /* not on the subnet */
		"sandbox.net=10.0.2.2/30,10.0.2.3", /* the broadcast address */
		"sandbox.net=10.0.2.0/30,10.0.2.1", /* the network address */
		"sandbox.net=10.0.2.256/24,10.0.2.1",
		"sandbox.net=10.0.2.02/24,10.0.2.1",
		"sandbox.net=10.0.2/24,10.0.2.1",
		"sandbox.net=10.0.2.2.5/24,10.0.2.1",
		"sandbox.net=10.0.2.2/24,10.0.2.1x",
		"sandbox.net=10.0.2.2/24,10.0.2.1,",
		"sandbox.net=-10.0.2.2/24,10.0.2.1",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cmdline_options opts;

		cr_assert(eq(int, parse_str(bad[i], &opts), 0));
		cr_assert(not(opts.net), "%s was taken", bad[i]);
		cr_assert(eq(uint, opts.ignored_count, 1), "%s", bad[i]);
	}
}

Test(guest_cmdline, net_later_word_wins_and_bad_keeps_earlier)
{
	struct cmdline_options opts;

	cr_assert(eq(int,
		     parse_str("sandbox.net=10.0.2.2/30,10.0.2.1 sandbox.net=10.9.0.5/16,10.9.0.1 "
			       "sandbox.net=bad",
			       &opts),
		     0));
	cr_assert(opts.net);
	cr_assert(eq(u32, opts.net_addr, 0x0a090005u));
	cr_assert(eq(uint, opts.net_prefix, 16));
	cr_assert(eq(uint, opts.ignored_count, 1));
}
