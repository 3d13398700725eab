/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of client/util.c's helpers for hostile text and durations: printable (what every host
 * tool prints guest- and file-controlled text through) and parse_duration (create --ttl).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "client.h"

/* printable() of `in` (len bytes), compared with `want`. */
static void check(const char *in, size_t len, bool keep_lines, const char *want)
{
	char buf[256];

	cr_assert_lt(len, sizeof(buf));
	memcpy(buf, in, len);
	buf[len] = '\0';
	printable(buf, len, keep_lines);
	cr_assert_str_eq(buf, want, "printable(%zu bytes) gave '%s'", len, buf);
}

Test(printable, ascii_stays)
{
	check("hello, world ~!", 15, false, "hello, world ~!");
}

Test(printable, control_bytes_become_question_marks)
{
	/* an OSC that retitles the terminal, a CSI that clears it, a bell, DEL */
	check("\033]0;owned\007\033[2J\x7f", 15, false, "?]0;owned??[2J?");
	check("a\tb\nc\r", 6, false, "a?b?c?");
}

Test(printable, lines_keep_tab_and_newline)
{
	check("a\tb\nc\r", 6, true, "a\tb\nc?");
}

Test(printable, utf8_stays_c1_and_bad_sequences_do_not)
{
	check("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, false,
	      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	check("\xc2\x9b"
	      "2J",
	      4, false, "??2J"); /* C1 CSI, encoded */
	check("\x9b"
	      "2J",
	      3, false, "?2J");			     /* C1 CSI, raw */
	check("\xc0\xaf", 2, false, "??");	     /* overlong '/' */
	check("\xed\xa0\x80", 3, false, "???");	     /* a surrogate */
	check("\xf4\x90\x80\x80", 4, false, "????"); /* beyond U+10FFFF */
	check("ab\xe2\x82", 4, false, "ab??");	     /* cut at the end */
	check("\xe2(\xa1", 3, false, "?(?");	     /* a bad continuation */
}

Test(printable, copy_cuts_and_terminates)
{
	char out[6];

	cr_assert_str_eq(printable_copy("ab\033cdefgh", out, sizeof(out)), "ab?cd");
	cr_assert_str_eq(printable_copy("", out, sizeof(out)), "");
}

Test(parse_duration, units)
{
	uint64_t s;

	cr_assert(parse_duration("90", 604800, &s) && s == 90);
	cr_assert(parse_duration("90s", 604800, &s) && s == 90);
	cr_assert(parse_duration("10m", 604800, &s) && s == 600);
	cr_assert(parse_duration("2h", 604800, &s) && s == 7200);
	cr_assert(parse_duration("7d", 604800, &s) && s == 604800);
}

Test(parse_duration, refusals)
{
	uint64_t s = 1234;

	cr_assert_not(parse_duration("8d", 604800, &s));
	cr_assert_not(parse_duration("0s", 604800, &s));
	cr_assert_not(parse_duration("", 604800, &s));
	cr_assert_not(parse_duration("s", 604800, &s));
	cr_assert_not(parse_duration("-5m", 604800, &s));
	cr_assert_not(parse_duration("5x", 604800, &s));
	cr_assert_not(parse_duration("5 m", 604800, &s));
	cr_assert_not(parse_duration("99999999999999999999h", 604800, &s));
	cr_assert_not(parse_duration(NULL, 604800, &s));
	cr_assert_eq(s, 1234, "a refusal leaves the output alone");
}
