/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tools/jobs/job_report.c: secrets masked in a step's output however the output is cut
 * into chunks, JSON strings of any bytes, and the JUnit report.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "jobs.h"

#define SECRET "s3cr3t-token-value"

static char *opts[] = {"--allow", "example.test", "--credential",
		       "api.example.test:Authorization=TEST_SECRET", NULL};
static struct job_step steps[] = {
	{.name = "build <1>", .run = "make"},
	{.name = "test", .run = "make test"},
	{.name = "never", .run = "true"},
};
static struct jobspec js = {.net_opts = opts, .nnet_opts = 4, .steps = steps, .nsteps = 3};

static void quiet(void)
{
	int fd = open("/dev/null", O_WRONLY);

	dup2(fd, STDOUT_FILENO);
	close(fd);
	setenv("TEST_SECRET", SECRET, 1);
}

/* The output `text`, fed in chunks cut at `cut` (and every `cut` bytes after), as step 0's:
 * what the report kept of it. */
static char *feed(const char *text, size_t cut)
{
	struct job_report r;
	size_t len = strlen(text);
	char *out;

	cr_assert(eq(int, report_init(&r, &js, "job.yaml", true, "/nonexistent/x.xml"), 0));
	cr_assert(eq(u32, r.nsecrets, 1));
	report_step_started(&r, 0);
	for (size_t i = 0; i < len; i += cut)
		report_output(&r, 1, text + i, len - i < cut ? len - i : cut);
	report_step_ended(&r, 0, 0, "passed", 0.1);
	out = strndup(r.steps[0].out ? r.steps[0].out : "", r.steps[0].outlen);
	report_free(&r);
	return out;
}

Test(report, secret_masked_at_every_cut, .init = quiet)
{
	const char *text = "Authorization: Bearer " SECRET "\nagain " SECRET SECRET " end "
			   "s3cr3t-token-valu";
	const char *want = "Authorization: Bearer ***\nagain ****** end s3cr3t-token-valu";

	for (size_t cut = 1; cut <= strlen(text); cut++) {
		char *got = feed(text, cut);

		cr_assert(eq(str, got, (char *)want), "cut %zu: %s", cut, got);
		free(got);
	}
}

Test(report, secret_at_the_end_is_masked_when_the_step_ends, .init = quiet)
{
	char *got = feed("tail " SECRET, 7);

	cr_assert(eq(str, got, "tail ***"));
	free(got);
}

Test(report, short_values_are_not_masked, .init = quiet)
{
	struct job_report r;

	setenv("TEST_SECRET", "ab", 1);
	cr_assert(eq(int, report_init(&r, &js, "job.yaml", false, NULL), 0));
	cr_assert(eq(u32, r.nsecrets, 0));
	report_free(&r);
}

Test(report, a_value_that_looks_like_a_flag_hides_no_secret, .init = quiet)
{
	/* "--credential" is a valid domain: as --allow's value it must not be read as a flag,
	 * which would take the real rule's flag for its value and leave its secret unmasked */
	char *words[] = {"--deny-all",
			 "--allow",
			 "--credential",
			 "--credential",
			 "api.example.test:Authorization=TEST_SECRET",
			 NULL};
	struct jobspec tricky = {.net_opts = words, .nnet_opts = 5, .steps = steps, .nsteps = 3};
	struct job_report r;

	cr_assert(eq(int, report_init(&r, &tricky, "job.yaml", false, NULL), 0));
	cr_assert(eq(u32, r.nsecrets, 1));
	cr_assert(eq(str, (char *)r.secrets[0], SECRET));
	report_free(&r);
}

Test(report, json_strings_of_any_bytes)
{
	char buf[256] = "";
	FILE *f = fmemopen(buf, sizeof(buf), "w");
	const char in[] = "a\"b\\c\n\t\x01\x7f\xff\xc3\xa9\xed\xa0\x80z";

	json_str(f, in, sizeof(in) - 1);
	fclose(f);
	cr_assert(eq(str, buf,
		     "\"a\\\"b\\\\c\\n\\t\\u0001\\u007f\\ufffd\xc3\xa9\\ufffd\\ufffd\\ufffdz\""));
}

Test(report, junit_report, .init = quiet)
{
	char path[] = "/tmp/test-junit-XXXXXX", *xml = NULL;
	struct job_report r;
	size_t len;
	int fd = mkstemp(path);

	cr_assert(fd >= 0);
	close(fd);
	cr_assert(eq(int, report_init(&r, &js, "job.yaml", false, path), 0));
	report_step_started(&r, 0);
	report_output(&r, 1, "ok <fine> & \x01 " SECRET "\n",
		      strlen("ok <fine> & \x01 " SECRET "\n"));
	report_step_ended(&r, 0, 0, "passed", 1.5);
	report_step_started(&r, 1);
	report_step_ended(&r, 1, 7, "failed", 0.25);
	cr_assert(eq(int, report_job_ended(&r, 7, 2.0), 0));
	report_free(&r);
	cr_assert(eq(int, read_file(path, 1 << 20, &xml, &len), 0));
	unlink(path);
	cr_assert(strstr(xml, "tests=\"3\" failures=\"1\" skipped=\"1\"") != NULL, "%s", xml);
	cr_assert(strstr(xml, "name=\"1. build &lt;1&gt;\" time=\"1.500\"") != NULL, "%s", xml);
	cr_assert(strstr(xml, "<system-out>ok &lt;fine&gt; &amp;  ***\n</system-out>") != NULL,
		  "%s", xml);
	cr_assert(strstr(xml, "name=\"2. test\" time=\"0.250\">\n      <failure "
			      "message=\"status 7\"/>") != NULL,
		  "%s", xml);
	cr_assert(strstr(xml, "name=\"3. never\" time=\"0.000\">\n      <skipped "
			      "message=\"not run\"/>") != NULL,
		  "%s", xml);
	cr_assert(strstr(xml, SECRET) == NULL);
	free(xml);
}
