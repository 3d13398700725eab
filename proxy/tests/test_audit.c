/* SPDX-License-Identifier: Apache-2.0 */
/* proxy/audit.c: JSON lines, escaping of hostile names, one line per event. */
#include <criterion/criterion.h>
#include <stdbool.h>
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

/* Start at the beginning of a second, so what follows falls in one second. */
static void second_start(void)
{
	struct timespec ts, now;

	clock_gettime(CLOCK_REALTIME, &ts);
	do {
		usleep(1000);
		clock_gettime(CLOCK_REALTIME, &now);
	} while (now.tv_sec == ts.tv_sec);
}

static unsigned long long count_after(const char *text, const char *key)
{
	const char *p = strstr(text, key);

	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* A guest's flood of denials does not push a connection's line out (issue 29): 10,000 denied
 * queries in the second a connection ends, and its allow line with its bytes is there; at most
 * 20 denials are written whole, and the summary's count says how many others there were. */
Test(audit, denials_flood_keeps_allow_line)
{
	char path[] = "/tmp/test_audit_XXXXXX", *text;
	int fd = mkstemp(path);
	struct audit_event deny = {
		.proto = "dns", .name = "x.test", .decision = "deny", .rule = "r"};
	struct audit_event allow = {.proto = "tls",
				    .name = "ok.test",
				    .decision = "allow",
				    .rule = "allow ok.test",
				    .bytes_up = 123456,
				    .bytes_down = 654321,
				    .has_bytes = true};
	unsigned whole = 0, lines = 0;
	unsigned long long summarised = 0;

	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(audit_open(path), 0);
	second_start();
	for (int i = 0; i < 10000; i++) {
		audit_log(&deny);
		if (i == 5000)
			audit_log(&allow);
	}
	sleep(1);
	audit_tick(); /* the next second: the summary, with nothing else logged */
	audit_close();
	cr_assert_eq(read_file_follow(path, 1 << 22, &text, NULL), 0);
	cr_assert(strstr(text, "\"name\":\"ok.test\"") &&
			  strstr(text, "\"bytes_up\":123456,\"bytes_down\":654321"),
		  "the allow line is lost:\n%.2000s", text);
	cr_assert(
		strstr(text, "{\"proto\":\"dns\",\"decision\":\"deny\",\"rule\":\"r\",\"count\":"),
		"%.2000s", text);
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		lines++;
		if (strstr(line, "\"decision\":\"summary\""))
			summarised += count_after(line, "\"count\":");
		else if (strstr(line, "\"decision\":\"deny\""))
			whole++;
	}
	/* (the flood may straddle a second: twice the rate at most) */
	cr_assert_leq(whole, 2 * 20, "%u deny lines written whole", whole);
	cr_assert_eq(whole + summarised, 10000, "%u whole + %llu summarised", whole, summarised);
	cr_assert_leq(lines, 2 * 20 + 1 + 2, "%u lines", lines);
	free(text);
	unlink(path);
}

/* Allow and error lines are never dropped, however many. */
Test(audit, allow_lines_all_written)
{
	char path[] = "/tmp/test_audit_XXXXXX", *text, *p;
	int fd = mkstemp(path);
	struct audit_event allow = {.proto = "tcp",
				    .addr = "203.0.113.9",
				    .port = 22,
				    .decision = "allow",
				    .rule = "allow-cidr"};
	struct audit_event error = {.proto = "tls",
				    .name = "e.test",
				    .decision = "error",
				    .rule = "r",
				    .error = "upstream refused"};
	unsigned lines = 0;

	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(audit_open(path), 0);
	second_start();
	for (int i = 0; i < 1000; i++) {
		audit_log(&allow);
		audit_log(&error);
	}
	audit_close();
	cr_assert_eq(read_file_follow(path, 1 << 22, &text, NULL), 0);
	for (p = text; (p = strchr(p, '\n')); p++)
		lines++;
	cr_assert_eq(lines, 2000);
	free(text);
	unlink(path);
}

/* Rotation keeps generations: two rotations in a row lose no line, and past eight the oldest
 * goes, never the newest. */
Test(audit, rotations_keep_recent_history)
{
	char dir[] = "/tmp/test_audit_XXXXXX", path[256], gen[300], name[32], *text;
	struct audit_event allow = {.proto = "tls", .name = name, .decision = "allow", .rule = "r"};
	unsigned found = 0;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit.log", dir);
	cr_assert_eq(audit_open(path), 0);
	audit_set_file_max(2048);
	/* ~100-byte lines, 2 KiB files: a rotation every ~20 lines, checked a second apart */
	for (unsigned i = 0; i < 3; i++) {
		for (unsigned j = 0; j < 25; j++) {
			snprintf(name, sizeof(name), "n%u-%u.test", i, j);
			audit_log(&allow);
		}
		second_start();
	}
	audit_log(&allow); /* a new second: the last rotation */
	audit_close();
	/* every line of the three rounds, in audit.log, .1 or .2 */
	for (unsigned i = 0; i < 3; i++)
		for (unsigned j = 0; j < 25; j++) {
			char want[48];
			bool seen = false;

			snprintf(want, sizeof(want), "\"n%u-%u.test\"", i, j);
			for (unsigned g = 0; g <= 3 && !seen; g++) {
				if (g)
					snprintf(gen, sizeof(gen), "%s.%u", path, g);
				else
					snprintf(gen, sizeof(gen), "%s", path);
				if (read_file_follow(gen, 1 << 20, &text, NULL) == 0) {
					seen = strstr(text, want) != NULL;
					free(text);
				}
			}
			found += seen;
		}
	cr_assert_eq(found, 75, "%u of 75 lines kept over the rotations", found);
	snprintf(gen, sizeof(gen), "%s.2", path);
	cr_assert_eq(access(gen, F_OK), 0, "two rotations made no audit.log.2");
	/* ten more rotations: no generation past .8 */
	cr_assert_eq(audit_open(path), 0);
	for (unsigned i = 0; i < 10; i++) {
		for (unsigned j = 0; j < 25; j++) {
			snprintf(name, sizeof(name), "m%u-%u.test", i, j);
			audit_log(&allow);
		}
		second_start();
	}
	audit_log(&allow);
	audit_close();
	audit_set_file_max(0);
	snprintf(gen, sizeof(gen), "%s.8", path);
	cr_assert_eq(access(gen, F_OK), 0);
	snprintf(gen, sizeof(gen), "%s.9", path);
	cr_assert_neq(access(gen, F_OK), 0, "a ninth generation");
	cr_assert_eq(read_file_follow(path, 1 << 20, &text, NULL), 0);
	free(text);
	for (unsigned g = 0; g <= 8; g++) {
		if (g)
			snprintf(gen, sizeof(gen), "%s.%u", path, g);
		else
			snprintf(gen, sizeof(gen), "%s", path);
		unlink(gen);
	}
	rmdir(dir);
}
