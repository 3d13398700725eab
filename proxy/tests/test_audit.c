/* SPDX-License-Identifier: Apache-2.0 */
/* proxy/audit.c: JSON lines, escaping of hostile names, one line per event. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proxy.h"

Test(audit, escape)
{
	char out[64];

	audit_json_escape("a\"b\\c\n\x01\xff", out, sizeof(out));
	cr_assert_str_eq(out, "a\\\"b\\\\c\\n\\u0001\\u00ff");
	/* Cut at a whole escape. */
	audit_json_escape("\"\"\"\"", out, 6);
	cr_assert_str_eq(out, "\\\"\\\"");
	audit_json_escape("abc", out, 1);
	cr_assert_str_eq(out, "");
}

Test(audit, format)
{
	struct audit_event ev = {.proto = "tls",
				 .name = "a.example.test",
				 .addr = "203.0.113.10",
				 .port = 443,
				 .decision = "allow",
				 .rule = "allow *.example.test",
				 .bytes_up = 517,
				 .bytes_down = 4096,
				 .has_bytes = true};
	char line[1024];
	size_t n = audit_format(line, sizeof(line), &ev, 1796126400123ull);

	cr_assert_str_eq(line, "{\"time\":\"2026-12-01T12:00:00.123Z\",\"proto\":\"tls\","
			       "\"name\":\"a.example.test\",\"addr\":\"203.0.113.10\",\"port\":443,"
			       "\"decision\":\"allow\",\"rule\":\"allow *.example.test\","
			       "\"bytes_up\":517,\"bytes_down\":4096}\n");
	cr_assert_eq(n, strlen(line));
}

Test(audit, hostile_and_long)
{
	char name[1500], line[256];
	struct audit_event ev = {.proto = "http", .name = name, .decision = "deny", .rule = "x"};

	memset(name, '"', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	audit_format(line, sizeof(line), &ev, 0);
	cr_assert(strstr(line, "too long"), "%s", line);
	cr_assert_eq(line[strlen(line) - 1], '\n');
	ev.name = "evil\"},{\"decision\":\"allow";
	audit_format(line, sizeof(line), &ev, 0);
	cr_assert(strstr(line, "\"name\":\"evil\\\"},{\\\"decision\\\":\\\"allow\""), "%s", line);
}

Test(audit, file)
{
	char path[] = "/tmp/test_audit_XXXXXX", *text;
	int fd = mkstemp(path);
	struct audit_event ev = {.proto = "dns", .name = "x.test", .decision = "deny", .rule = "r"};

	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(audit_open(path), 0);
	audit_log(&ev);
	audit_log(&ev);
	audit_close();
	cr_assert_eq(read_file_follow(path, 1 << 20, &text, NULL), 0);
	cr_assert_eq(strchr(strchr(text, '\n') + 1, '\n')[1], 0);
	free(text);
	unlink(path);
}

/* A guest's flood does not become a flood of lines: at most 200 a second, then one line saying
 * how many were left out. */
Test(audit, rate_limited)
{
	char path[] = "/tmp/test_audit_XXXXXX", *text, *p;
	int fd = mkstemp(path);
	struct audit_event ev = {.proto = "dns", .name = "x.test", .decision = "deny", .rule = "r"};
	unsigned lines = 0;
	struct timespec ts;

	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(audit_open(path), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	/* start at the beginning of a second, so the flood falls in one or two seconds */
	do {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		if (now.tv_sec != ts.tv_sec)
			break;
		usleep(1000);
	} while (1);
	for (int i = 0; i < 5000; i++)
		audit_log(&ev);
	sleep(1);
	audit_log(&ev); /* a new second: the summary comes first */
	audit_close();
	cr_assert_eq(read_file_follow(path, 1 << 22, &text, NULL), 0);
	for (p = text; (p = strchr(p, '\n')); p++)
		lines++;
	cr_assert_leq(lines, 2 * 200 + 2, "%u lines", lines);
	cr_assert(strstr(text, "\"decision\":\"suppressed\""), "no summary line");
	free(text);
	unlink(path);
}
