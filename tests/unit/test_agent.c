/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of guest/agent*.c: the agent loop runs in a forked child on an abstract unix socket
 * and the test drives it as sandboxctl would (test_agent_client.h), with real programs from the
 * host (echo, sh, cat, tty, sleep, head).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test_agent_client.h"

TestSuite(agent, .init = tc_agent_start, .fini = tc_agent_stop, .timeout = 60);

Test(agent, ping)
{
	struct tc_conn c;
	struct tc_frame f;

	tc_connect(&c);
	tc_send(&c, PROTO_MSG_PING, 7, NULL, 0);
	cr_assert(tc_recv(&c, &f) == 1);
	cr_assert_eq(f.hdr.type, PROTO_MSG_PONG);
	cr_assert_eq(f.hdr.id, 7);
	cr_assert(proto_get_le64(f.payload) > 0);
	free(f.payload);
	tc_close(&c);
}

Test(agent, echo_hi)
{
	static const char *const argv[] = {"echo", "hi", NULL};
	struct tc_conn c;
	struct tc_exec r;

	tc_connect(&c);
	tc_exec(&c, 1, 0, 0, "", argv, &r);
	cr_assert(r.started);
	cr_assert(r.exited);
	cr_assert_str_eq(r.out, "hi\n");
	cr_assert_eq(r.err_len, 0);
	cr_assert_eq(r.code, 0);
	cr_assert_eq(r.flags, 0);
	tc_exec_free(&r);
	tc_close(&c);
}

Test(agent, exit_code_and_stderr)
{
	static const char *const argv[] = {"sh", "-c", "echo oops >&2; exit 7", NULL};
	struct tc_conn c;
	struct tc_exec r;

	tc_connect(&c);
	tc_exec(&c, 1, 0, 0, "/", argv, &r);
	cr_assert(r.exited);
	cr_assert_eq(r.code, 7);
	cr_assert_str_eq(r.err, "oops\n");
	cr_assert_eq(r.out_len, 0);
	tc_exec_free(&r);
	tc_close(&c);
}

Test(agent, missing_binary_is_127)
{
	static const char *const argv[] = {"no-such-program-here", NULL};
	struct tc_conn c;
	struct tc_exec r;

	tc_connect(&c);
	tc_exec(&c, 1, 0, 0, "", argv, &r);
	cr_assert(r.exited);
	cr_assert_eq(r.code, 127);
	cr_assert_not_null(r.err);
	cr_assert(strstr(r.err, "no-such-program-here: No such file or directory") != NULL,
		  "stderr: %s", r.err);
	tc_exec_free(&r);
	tc_close(&c);
}

Test(agent, missing_cwd_is_an_error)
{
	static const char *const argv[] = {"true", NULL};
	struct tc_conn c;
	struct tc_exec r;

	tc_connect(&c);
	tc_exec(&c, 1, 0, 0, "/no/such/dir", argv, &r);
	cr_assert(r.failed);
	cr_assert_eq(r.errnum, ENOENT);
	cr_assert(strstr(r.msg, "chdir /no/such/dir") != NULL, "message: %s", r.msg);
	/* the connection goes on */
	tc_exec(&c, 2, 0, 0, "/tmp", argv, &r);
	cr_assert(r.exited);
	cr_assert_eq(r.code, 0);
	tc_exec_free(&r);
	tc_close(&c);
}

Test(agent, stdin_round_trip)
{
	static const char *const argv[] = {"cat", NULL};
	struct tc_conn c;
	struct tc_exec r;

	tc_connect(&c);
	memset(&r, 0, sizeof(r));
	tc_exec_send(&c, 3, PROTO_EXEC_STDIN, 0, "", argv);
	tc_send(&c, PROTO_MSG_STDIN, 3, "hello ", 6);
	tc_send(&c, PROTO_MSG_STDIN, 3, "world\n", 6);
	tc_send(&c, PROTO_MSG_STDIN_CLOSE, 3, NULL, 0);
	tc_exec_wait(&c, 3, &r);
	cr_assert(r.exited);
	cr_assert_eq(r.code, 0);
	cr_assert_str_eq(r.out, "hello world\n");
	tc_exec_free(&r);
	tc_close(&c);
}

Test(agent, pty)
{
	static const char *const argv[] = {"sh", "-c", "tty && stty size", NULL};
	struct tc_conn c;
	struct tc_exec r;

	tc_connect(&c);
	tc_exec(&c, 1, PROTO_EXEC_PTY, 0, "", argv, &r);
	cr_assert(r.exited);
	cr_assert_eq(r.code, 0, "output: %s", r.out);
	cr_assert(strstr(r.out, "/dev/pts/") != NULL, "output: %s", r.out);
	cr_assert(strstr(r.out, "24 80") != NULL, "output: %s", r.out);
	tc_exec_free(&r);
	tc_close(&c);
}

Test(agent, timeout_kills)
{
	static const char *const argv[] = {"sleep", "30", NULL};
	struct tc_conn c;
	struct tc_exec r;

	tc_connect(&c);
	tc_exec(&c, 1, 0, 200, "", argv, &r);
	cr_assert(r.exited);
	cr_assert_eq(r.sig, 9);
	cr_assert_eq(r.code, 137);
	cr_assert(r.flags & PROTO_EXIT_TIMED_OUT);
	cr_assert(r.flags & PROTO_EXIT_SIGNALED);
	tc_exec_free(&r);
	tc_close(&c);
}

static bool tc_is_zombie(pid_t pid)
{
	char path[64], buf[512], *p;
	bool z = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return false;
	if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL)
		z = p[2] == 'Z';
	fclose(f);
	return z;
}

static uint64_t tc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

Test(agent, timeout_kills_a_background_child_holding_the_output)
{
	/* The shell exits at once; its `sleep` keeps stdout open, so the exec goes on until the
	 * timeout kills the whole group. */
	static const char *const argv[] = {"sh", "-c", "sleep 30 & echo $!; exit 0", NULL};
	struct tc_conn c;
	struct tc_exec r;
	uint64_t t0 = tc_now_ms();
	pid_t bg;

	tc_connect(&c);
	tc_exec(&c, 1, 0, 300, "", argv, &r);
	cr_assert(tc_now_ms() - t0 < 10000, "EXIT took %llu ms",
		  (unsigned long long)(tc_now_ms() - t0));
	cr_assert(r.exited);
	cr_assert_eq(r.code, 0, "the shell's own status");
	cr_assert(r.flags & PROTO_EXIT_TIMED_OUT);
	bg = (pid_t)atoi(r.out);
	cr_assert(bg > 0, "output: %s", r.out);
	/* Dead: gone, or a zombie waiting for whoever reaps orphans on this host. */
	for (int i = 0; i < 200 && kill(bg, 0) == 0 && !tc_is_zombie(bg); i++)
		usleep(10 * 1000);
	cr_assert(kill(bg, 0) < 0 || tc_is_zombie(bg), "the background sleep %d survived", (int)bg);
	tc_exec_free(&r);
	tc_close(&c);
}

Test(agent, signal_reaches_the_child)
{
	static const char *const argv[] = {"sleep", "30", NULL};
	uint8_t sig[sizeof(struct proto_signal)] = {0};
	struct tc_conn c;
	struct tc_frame f;
	struct tc_exec r;
	bool got_ok = false;

	tc_connect(&c);
	memset(&r, 0, sizeof(r));
	tc_exec_send(&c, 1, 0, 0, "", argv);
	cr_assert(tc_recv(&c, &f) == 1);
	cr_assert_eq(f.hdr.type, PROTO_MSG_STARTED);
	free(f.payload);
	proto_put_le64(sig + offsetof(struct proto_signal, target_id), 1);
	proto_put_le32(sig + offsetof(struct proto_signal, signal), 15);
	tc_send(&c, PROTO_MSG_SIGNAL, 2, sig, sizeof(sig));
	while (!r.exited) {
		cr_assert(tc_recv(&c, &f) == 1);
		if (f.hdr.id == 2) {
			cr_assert_eq(f.hdr.type, PROTO_MSG_OK);
			got_ok = true;
		} else {
			tc_exec_take(&r, &f);
		}
		free(f.payload);
	}
	cr_assert(got_ok);
	cr_assert_eq(r.sig, 15);
	cr_assert_eq(r.flags, PROTO_EXIT_SIGNALED);
	/* a signal for an exec that is gone */
	tc_send(&c, PROTO_MSG_SIGNAL, 3, sig, sizeof(sig));
	cr_assert(tc_recv(&c, &f) == 1);
	cr_assert_eq(f.hdr.type, PROTO_MSG_ERROR);
	cr_assert_eq(proto_get_le32(f.payload), ESRCH);
	free(f.payload);
	tc_close(&c);
}

Test(agent, sixteen_parallel_execs)
{
	struct tc_exec r[16];
	char words[16][16];
	struct tc_conn c;
	int ended = 0, i;

	tc_connect(&c);
	memset(r, 0, sizeof(r));
	for (i = 0; i < 16; i++) {
		const char *argv[] = {"sh", "-c", "sleep 0.2; echo $0", words[i], NULL};

		snprintf(words[i], sizeof(words[i]), "w%d", i);
		tc_exec_send(&c, (uint64_t)i + 100, 0, 0, "", argv);
	}
	while (ended < 16) {
		struct tc_frame f;

		cr_assert(tc_recv(&c, &f) == 1);
		cr_assert(f.hdr.id >= 100 && f.hdr.id < 116);
		if (tc_exec_take(&r[f.hdr.id - 100], &f))
			ended++;
		free(f.payload);
	}
	for (i = 0; i < 16; i++) {
		char want[20];

		snprintf(want, sizeof(want), "w%d\n", i);
		cr_assert(r[i].exited);
		cr_assert_eq(r[i].code, 0);
		cr_assert_str_eq(r[i].out, want);
		tc_exec_free(&r[i]);
	}
	tc_close(&c);
}

/* The VmRSS of pid in KiB. */
static long tc_rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	}
	fclose(f);
	return kib;
}

Test(agent, big_output_is_flow_controlled)
{
	static const char *const argv[] = {"head", "-c", "67108864", "/dev/zero", NULL};
	struct tc_conn c;
	struct tc_frame f;
	uint64_t total = 0;
	long before, after;
	bool done = false;

	tc_connect(&c);
	before = tc_rss_kib(tc_agent_pid);
	tc_exec_send(&c, 1, 0, 0, "", argv);
	usleep(500 * 1000); /* a slow reader: the agent must stop reading the pipe */
	after = tc_rss_kib(tc_agent_pid);
	cr_assert(after - before < 8 * 1024, "the agent grew from %ld to %ld KiB", before, after);
	while (!done) {
		cr_assert(tc_recv(&c, &f) == 1);
		if (f.hdr.type == PROTO_MSG_STDOUT)
			total += f.hdr.len;
		if (f.hdr.type == PROTO_MSG_EXIT) {
			cr_assert_eq(proto_get_le32(f.payload), 0);
			done = true;
		}
		free(f.payload);
	}
	cr_assert_eq(total, 67108864);
	tc_close(&c);
}

/* Expect one frame of type for id; returns its payload (free it). */
static uint8_t *tc_expect(struct tc_conn *c, uint16_t type, uint64_t id)
{
	struct tc_frame f;

	cr_assert(tc_recv(c, &f) == 1);
	cr_assert_eq(f.hdr.id, id);
	cr_assert_eq(f.hdr.type, type, "got %s: %s", proto_type_name(f.hdr.type),
		     f.hdr.type == PROTO_MSG_ERROR ? (char *)f.payload + 8 : "");
	return f.payload;
}

/* Send a call whose payload is a head struct then a NUL-terminated path. */
static void tc_send_path(struct tc_conn *c, uint16_t type, uint64_t id, const void *head,
			 size_t head_len, const char *path)
{
	uint8_t buf[4096];
	size_t n = strlen(path) + 1;

	if (head_len > 0)
		memcpy(buf, head, head_len);
	memcpy(buf + head_len, path, n);
	tc_send(c, type, id, buf, (uint32_t)(head_len + n));
}

Test(agent, file_write_read_stat)
{
	const size_t len = 3u << 20, chunk = 200000;
	uint8_t head[sizeof(struct proto_file_write)] = {0};
	char dir[] = "/tmp/agent-test-XXXXXX", path[128];
	uint8_t *data = malloc(len), *back = malloc(len), *p;
	size_t off, got = 0;
	struct tc_conn c;
	struct tc_frame f;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/file.bin", dir);
	for (off = 0; off < len; off++)
		data[off] = (uint8_t)(off * 2654435761u >> 13);
	tc_connect(&c);
	proto_put_le32(head + offsetof(struct proto_file_write, mode), 0640);
	proto_put_le32(head + offsetof(struct proto_file_write, uid), PROTO_ID_KEEP);
	proto_put_le32(head + offsetof(struct proto_file_write, gid), PROTO_ID_KEEP);
	tc_send_path(&c, PROTO_MSG_FILE_WRITE, 5, head, sizeof(head), path);
	for (off = 0; off < len; off += chunk)
		tc_send(&c, PROTO_MSG_DATA, 5, data + off,
			(uint32_t)(len - off < chunk ? len - off : chunk));
	tc_send(&c, PROTO_MSG_END, 5, NULL, 0);
	free(tc_expect(&c, PROTO_MSG_OK, 5));

	tc_send_path(&c, PROTO_MSG_STAT, 6, NULL, 0, path);
	p = tc_expect(&c, PROTO_MSG_STAT_REPLY, 6);
	cr_assert_eq(proto_get_le64(p + offsetof(struct proto_stat, size)), len);
	cr_assert_eq(proto_get_le32(p + offsetof(struct proto_stat, mode)), S_IFREG | 0640);
	free(p);

	tc_send_path(&c, PROTO_MSG_FILE_READ, 7, NULL, 0, path);
	for (;;) {
		cr_assert(tc_recv(&c, &f) == 1);
		cr_assert_eq(f.hdr.id, 7);
		if (f.hdr.type == PROTO_MSG_END) {
			free(f.payload);
			break;
		}
		cr_assert_eq(f.hdr.type, PROTO_MSG_DATA);
		cr_assert(got + f.hdr.len <= len);
		memcpy(back + got, f.payload, f.hdr.len);
		got += f.hdr.len;
		free(f.payload);
	}
	cr_assert_eq(got, len);
	cr_assert(memcmp(data, back, len) == 0);

	/* reading what does not exist, writing where it cannot */
	tc_send_path(&c, PROTO_MSG_FILE_READ, 8, NULL, 0, "/no/such/file");
	p = tc_expect(&c, PROTO_MSG_ERROR, 8);
	cr_assert_eq(proto_get_le32(p), ENOENT);
	free(p);
	tc_send_path(&c, PROTO_MSG_FILE_WRITE, 9, head, sizeof(head), "/no/such/dir/file");
	tc_send(&c, PROTO_MSG_DATA, 9, "x", 1);
	tc_send(&c, PROTO_MSG_END, 9, NULL, 0);
	p = tc_expect(&c, PROTO_MSG_ERROR, 9);
	cr_assert_eq(proto_get_le32(p), ENOENT);
	free(p);
	/* the DATA and END after the error were ignored: the connection still answers */
	tc_send(&c, PROTO_MSG_PING, 10, NULL, 0);
	free(tc_expect(&c, PROTO_MSG_PONG, 10));

	unlink(path);
	rmdir(dir);
	free(data);
	free(back);
	tc_close(&c);
}

Test(agent, mkdir_list_remove)
{
	uint8_t mk[sizeof(struct proto_mkdir)] = {0}, rm[sizeof(struct proto_remove)] = {0};
	char dir[] = "/tmp/agent-test-XXXXXX", path[128];
	struct tc_conn c;
	struct tc_frame f;
	int entries = 0;
	uint8_t *p;

	cr_assert_not_null(mkdtemp(dir));
	tc_connect(&c);
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	proto_put_le32(mk + offsetof(struct proto_mkdir, mode), 0755);
	tc_send_path(&c, PROTO_MSG_MKDIR, 1, mk, sizeof(mk), path);
	p = tc_expect(&c, PROTO_MSG_ERROR, 1); /* no parents without PARENTS */
	cr_assert_eq(proto_get_le32(p), ENOENT);
	free(p);
	proto_put_le32(mk + offsetof(struct proto_mkdir, flags), PROTO_MKDIR_PARENTS);
	tc_send_path(&c, PROTO_MSG_MKDIR, 2, mk, sizeof(mk), path);
	free(tc_expect(&c, PROTO_MSG_OK, 2));
	tc_send_path(&c, PROTO_MSG_MKDIR, 3, mk, sizeof(mk), path); /* -p: exists is fine */
	free(tc_expect(&c, PROTO_MSG_OK, 3));
	snprintf(path, sizeof(path), "%s/a/f", dir);
	close(open(path, O_CREAT | O_WRONLY, 0644));

	snprintf(path, sizeof(path), "%s/a", dir);
	tc_send_path(&c, PROTO_MSG_LIST, 4, NULL, 0, path);
	for (;;) {
		cr_assert(tc_recv(&c, &f) == 1);
		cr_assert_eq(f.hdr.id, 4);
		if (f.hdr.type == PROTO_MSG_END) {
			free(f.payload);
			break;
		}
		cr_assert_eq(f.hdr.type, PROTO_MSG_DIRENT);
		const char *name = (const char *)f.payload + sizeof(struct proto_stat);
		uint32_t mode = proto_get_le32(f.payload + offsetof(struct proto_stat, mode));

		if (strcmp(name, "b") == 0)
			cr_assert(S_ISDIR(mode));
		else if (strcmp(name, "f") == 0)
			cr_assert(S_ISREG(mode));
		else
			cr_assert_fail("unexpected entry %s", name);
		entries++;
		free(f.payload);
	}
	cr_assert_eq(entries, 2);

	tc_send_path(&c, PROTO_MSG_REMOVE, 5, rm, sizeof(rm), path);
	p = tc_expect(&c, PROTO_MSG_ERROR, 5); /* not empty, not recursive */
	cr_assert_eq(proto_get_le32(p), ENOTEMPTY);
	free(p);
	proto_put_le32(rm + offsetof(struct proto_remove, flags), PROTO_REMOVE_RECURSIVE);
	tc_send_path(&c, PROTO_MSG_REMOVE, 6, rm, sizeof(rm), path);
	free(tc_expect(&c, PROTO_MSG_OK, 6));
	tc_send_path(&c, PROTO_MSG_STAT, 7, NULL, 0, path);
	p = tc_expect(&c, PROTO_MSG_ERROR, 7);
	cr_assert_eq(proto_get_le32(p), ENOENT);
	free(p);
	tc_send(&c, PROTO_MSG_SYNC, 8, NULL, 0);
	free(tc_expect(&c, PROTO_MSG_OK, 8));
	rmdir(dir);
	tc_close(&c);
}

/* Expect the agent to answer a protocol error with ERROR on id 0, then close. */
static void tc_expect_protocol_error(struct tc_conn *c)
{
	struct tc_frame f;

	cr_assert(tc_recv(c, &f) == 1);
	cr_assert_eq(f.hdr.type, PROTO_MSG_ERROR);
	cr_assert_eq(f.hdr.id, 0);
	free(f.payload);
	cr_assert(tc_recv(c, &f) == 0, "the connection stayed open");
}

/* The agent still serves a new connection. */
static void tc_expect_alive(void)
{
	struct tc_conn c;

	tc_connect(&c);
	tc_send(&c, PROTO_MSG_PING, 1, NULL, 0);
	free(tc_expect(&c, PROTO_MSG_PONG, 1));
	tc_close(&c);
}

Test(agent, oversized_frame_closes_the_connection)
{
	struct tc_conn c;

	tc_connect(&c);
	tc_send_raw(&c, PROTO_MSG_STDIN, 1, PROTO_MAX_PAYLOAD + 1, NULL, 0);
	tc_expect_protocol_error(&c);
	tc_close(&c);
	tc_expect_alive();
}

Test(agent, unknown_and_short_frames_close_the_connection)
{
	struct tc_conn c;

	tc_connect(&c);
	tc_send(&c, 999, 1, NULL, 0);
	tc_expect_protocol_error(&c);
	tc_close(&c);

	tc_connect(&c);
	tc_send(&c, PROTO_MSG_EXEC, 1, "short", 5);
	tc_expect_protocol_error(&c);
	tc_close(&c);

	tc_connect(&c);
	tc_send(&c, PROTO_MSG_PONG, 1, "12345678", 8); /* agent-to-client type */
	tc_expect_protocol_error(&c);
	tc_close(&c);

	tc_connect_raw(&c); /* no HELLO */
	tc_send(&c, PROTO_MSG_PING, 1, NULL, 0);
	tc_expect_protocol_error(&c);
	tc_close(&c);
	tc_expect_alive();
}

/* Encode a SET_CLOCK payload. */
static void tc_set_clock(uint8_t out[sizeof(struct proto_set_clock)], uint64_t sec, uint32_t nsec,
			 uint32_t reserved)
{
	proto_put_le64(out + offsetof(struct proto_set_clock, sec), sec);
	proto_put_le32(out + offsetof(struct proto_set_clock, nsec), nsec);
	proto_put_le32(out + offsetof(struct proto_set_clock, reserved), reserved);
}

/* Expect ERROR err for id. */
static void tc_expect_error(struct tc_conn *c, uint64_t id, uint32_t err)
{
	uint8_t *p = tc_expect(c, PROTO_MSG_ERROR, id);

	cr_assert_eq(proto_get_le32(p), err, "errno %u: %s", proto_get_le32(p), (char *)p + 8);
	free(p);
}

Test(agent, set_clock_refuses_a_bad_time)
{
	uint8_t when[sizeof(struct proto_set_clock)];
	struct timespec now;
	struct tc_conn c;

	/* Every refused time but the one being tested is the current time: were the check
	 * missing, the host's clock (the tests run as root) would not move. */
	cr_assert(clock_gettime(CLOCK_REALTIME, &now) == 0);
	tc_connect(&c);
	tc_set_clock(when, (uint64_t)now.tv_sec, 1000000000u, 0);
	tc_send(&c, PROTO_MSG_SET_CLOCK, 1, when, sizeof(when));
	tc_expect_error(&c, 1, EINVAL);
	tc_set_clock(when, (uint64_t)now.tv_sec, UINT32_MAX, 0);
	tc_send(&c, PROTO_MSG_SET_CLOCK, 2, when, sizeof(when));
	tc_expect_error(&c, 2, EINVAL);
	tc_set_clock(when, (uint64_t)now.tv_sec, (uint32_t)now.tv_nsec, 1);
	tc_send(&c, PROTO_MSG_SET_CLOCK, 3, when, sizeof(when));
	tc_expect_error(&c, 3, EINVAL);
	tc_set_clock(when, UINT64_MAX, 0, 0); /* beyond time_t */
	tc_send(&c, PROTO_MSG_SET_CLOCK, 4, when, sizeof(when));
	tc_expect_error(&c, 4, EINVAL);
	/* a refused call is not a protocol error: the connection goes on */
	tc_send(&c, PROTO_MSG_PING, 5, NULL, 0);
	free(tc_expect(&c, PROTO_MSG_PONG, 5));
	tc_close(&c);
}

Test(agent, set_clock_too_short_is_a_protocol_error)
{
	uint8_t when[sizeof(struct proto_set_clock)] = {0};
	struct tc_conn c;

	tc_connect(&c);
	tc_send(&c, PROTO_MSG_SET_CLOCK, 1, when, sizeof(when) - 1);
	tc_expect_protocol_error(&c);
	tc_close(&c);
	tc_expect_alive();
}

Test(agent, set_clock_to_now_as_root)
{
	uint8_t when[sizeof(struct proto_set_clock)];
	struct timespec now, after;
	struct tc_conn c;

	if (geteuid() != 0)
		cr_skip_test("clock_settime needs CAP_SYS_TIME");
	/* The current time (as the host reads it just before sending): the machine's clock
	 * steps back by the frame's trip at most. */
	tc_connect(&c);
	cr_assert(clock_gettime(CLOCK_REALTIME, &now) == 0);
	tc_set_clock(when, (uint64_t)now.tv_sec, (uint32_t)now.tv_nsec, 0);
	tc_send(&c, PROTO_MSG_SET_CLOCK, 1, when, sizeof(when));
	free(tc_expect(&c, PROTO_MSG_OK, 1));
	cr_assert(clock_gettime(CLOCK_REALTIME, &after) == 0);
	cr_assert(after.tv_sec >= now.tv_sec && after.tv_sec - now.tv_sec < 5,
		  "the clock moved from %lld to %lld", (long long)now.tv_sec,
		  (long long)after.tv_sec);
	tc_close(&c);
}

Test(agent, reseed_as_root)
{
	uint8_t seed[64], big[PROTO_RESEED_MAX + 1] = {0};
	struct tc_conn c;

	if (geteuid() != 0)
		cr_skip_test("RNDADDENTROPY and RNDRESEEDCRNG need CAP_SYS_ADMIN");
	cr_assert(getrandom(seed, sizeof(seed), 0) == (ssize_t)sizeof(seed));
	tc_connect(&c);
	/* credits the host's pool and reseeds its CRNG: both harmless */
	tc_send(&c, PROTO_MSG_RESEED, 1, seed, sizeof(seed));
	free(tc_expect(&c, PROTO_MSG_OK, 1));
	tc_send(&c, PROTO_MSG_RESEED, 2, big, sizeof(big));
	tc_expect_error(&c, 2, EINVAL);
	tc_close(&c);
}

Test(agent, exec_killed_when_the_client_goes_away)
{
	static const char *const argv[] = {"sleep", "30", NULL};
	struct tc_conn c;
	uint8_t *p;
	pid_t pid;
	int i;

	tc_connect(&c);
	tc_exec_send(&c, 1, 0, 0, "", argv);
	p = tc_expect(&c, PROTO_MSG_STARTED, 1);
	pid = (pid_t)proto_get_le32(p);
	free(p);
	tc_close(&c);
	for (i = 0; i < 200 && kill(pid, 0) == 0; i++)
		usleep(10 * 1000);
	cr_assert(kill(pid, 0) < 0, "child %d still alive", (int)pid);
	tc_expect_alive();
}

Test(agent, list_is_flow_controlled)
{
	const int nfiles = 60000;
	char dir[] = "/tmp/agent-test-XXXXXX", path[512], name[256];
	struct tc_conn c;
	struct tc_frame f;
	long before, after;
	int i, entries = 0;

	/* 60000 entries of 200-byte names: about 15 MiB of DIRENT frames */
	cr_assert_not_null(mkdtemp(dir));
	memset(name, 'n', 200);
	name[200] = '\0';
	for (i = 0; i < nfiles; i++) {
		snprintf(path, sizeof(path), "%s/%.190s%08d", dir, name, i);
		close(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
	}
	tc_connect(&c);
	before = tc_rss_kib(tc_agent_pid);
	tc_send_path(&c, PROTO_MSG_LIST, 1, NULL, 0, dir);
	usleep(500 * 1000); /* a slow reader: the agent must not queue the whole listing */
	after = tc_rss_kib(tc_agent_pid);
	cr_assert(after - before < 8 * 1024, "the agent grew from %ld to %ld KiB", before, after);
	for (;;) {
		cr_assert(tc_recv(&c, &f) == 1);
		cr_assert_eq(f.hdr.id, 1);
		if (f.hdr.type == PROTO_MSG_END) {
			free(f.payload);
			break;
		}
		cr_assert_eq(f.hdr.type, PROTO_MSG_DIRENT);
		entries++;
		free(f.payload);
	}
	cr_assert_eq(entries, nfiles);
	/* the connection goes on */
	tc_send(&c, PROTO_MSG_PING, 2, NULL, 0);
	free(tc_expect(&c, PROTO_MSG_PONG, 2));
	tc_close(&c);
	for (i = 0; i < nfiles; i++) {
		snprintf(path, sizeof(path), "%s/%.190s%08d", dir, name, i);
		unlink(path);
	}
	rmdir(dir);
}

Test(agent, file_write_keeps_setuid_with_an_owner)
{
	uint8_t head[sizeof(struct proto_file_write)] = {0};
	char dir[] = "/tmp/agent-test-XXXXXX", path[128];
	struct tc_conn c;
	struct stat st;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/suid", dir);
	tc_connect(&c);
	proto_put_le32(head + offsetof(struct proto_file_write, mode), 06755);
	proto_put_le32(head + offsetof(struct proto_file_write, uid), (uint32_t)getuid());
	proto_put_le32(head + offsetof(struct proto_file_write, gid), (uint32_t)getgid());
	tc_send_path(&c, PROTO_MSG_FILE_WRITE, 1, head, sizeof(head), path);
	tc_send(&c, PROTO_MSG_DATA, 1, "x", 1);
	tc_send(&c, PROTO_MSG_END, 1, NULL, 0);
	free(tc_expect(&c, PROTO_MSG_OK, 1));
	cr_assert(stat(path, &st) == 0);
	/* a chown after the chmod would have cleared the set-id bits */
	cr_assert_eq(st.st_mode & 07777, 06755, "mode %o", st.st_mode & 07777);
	tc_close(&c);
	unlink(path);
	rmdir(dir);
}

static long tc_agent_cpu_ticks(void)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tc_agent_pid);
	f = fopen(path, "r");
	cr_assert(f != NULL);
	cr_assert(fgets(buf, sizeof(buf), f) != NULL);
	fclose(f);
	p = strrchr(buf, ')');
	cr_assert(p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			      &st) == 2);
	return (long)(ut + st);
}

static int tc_agent_fds(void)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)tc_agent_pid);
	d = opendir(path);
	cr_assert(d != NULL);
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

Test(agent, too_many_connections_pause_accepting_without_spinning)
{
	enum { extra = 30, n = AGENT_CONNS_MAX + extra };
	static int fds[n];
	long t0;

	for (int i = 0; i < n; i++) {
		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		cr_assert(fds[i] >= 0);
		cr_assert(connect(fds[i], (struct sockaddr *)&tc_addr, tc_addr_len) == 0,
			  "connect %d: %s", i, strerror(errno));
	}
	usleep(200000);
	cr_assert(tc_agent_fds() <= (int)AGENT_CONNS_MAX + 16, "the agent holds %d fds",
		  tc_agent_fds());
	/* The extra ones wait in the backlog; the agent must sleep, not retry accept. */
	t0 = tc_agent_cpu_ticks();
	usleep(500000);
	cr_assert(tc_agent_cpu_ticks() - t0 <= 5, "the agent spun: %ld ticks in 0.5 s",
		  tc_agent_cpu_ticks() - t0);
	for (int i = 0; i < 50; i++)
		close(fds[i]);
	tc_expect_alive();
	for (int i = 50; i < n; i++)
		close(fds[i]);
	tc_expect_alive();
}
