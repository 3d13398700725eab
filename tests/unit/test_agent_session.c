/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of guest/agent_session.c, the agent's command sessions: the agent runs in a forked
 * child on an abstract unix socket (test_agent_client.h) and the tests drive SESSION_EXEC,
 * SESSION_ATTACH, SESSION_DETACH, SESSION_LIST as sandboxd does, over several connections,
 * with real programs from the host (sh, seq, cat, sleep, tty).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_agent_client.h"
#include "test_session_client.h"

TestSuite(agent_session, .init = tc_agent_start, .fini = tc_agent_stop, .timeout = 60);

Test(agent_session, get_or_create_runs_one_process)
{
	char dir[] = "/tmp/agent-session-XXXXXX", script[256];
	const char *argv[] = {"sh", "-c", script, NULL};
	struct ts_call r1, r2;
	struct tc_conn c1, c2;
	char path[128], buf[64];
	int fd;
	ssize_t n;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/runs", dir);
	snprintf(script, sizeof(script), "echo run >> %s; echo hello; sleep 0.5; echo bye >&2",
		 path);
	tc_connect(&c1);
	tc_connect(&c2);
	ts_call_init(&r1);
	ts_call_init(&r2);
	ts_exec_send(&c1, 1, "cmd-1", 0, 0, 300, 600, argv);
	ts_wait_for(&c1, 1, &r1, "hello");
	/* the same id again, another connection, another program: an attach, not a process */
	argv[2] = "echo second >> /dev/null; exit 3";
	ts_exec_send(&c2, 7, "cmd-1", 0, 0, 300, 600, argv);
	ts_wait(&c2, 7, &r2);
	ts_wait(&c1, 1, &r1);
	cr_assert(r1.started && r2.started);
	cr_assert_eq(r1.pid, r2.pid, "a second process: %u and %u", r1.pid, r2.pid);
	cr_assert(r1.exited && r2.exited);
	cr_assert_eq(r1.code, 0);
	cr_assert_eq(r2.code, 0);
	cr_assert_str_eq(r2.out[0], "hello\n"); /* replayed from 0 */
	cr_assert_str_eq(r2.out[1], "bye\n");
	cr_assert_str_eq(r1.out[0], "hello\n");
	cr_assert_str_eq(r1.out[1], "bye\n");
	fd = open(path, O_RDONLY);
	cr_assert(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	cr_assert_eq(n, 4, "the command ran %zd/4 times", n);
	unlink(path);
	rmdir(dir);
	ts_call_free(&r1);
	ts_call_free(&r2);
	tc_close(&c1);
	tc_close(&c2);
}

Test(agent_session, attach_after_the_connection_dropped)
{
	static const char *const argv[] = {
		"sh", "-c",
		"i=0; while [ $i -lt 60 ]; do echo out$i; echo err$i >&2; i=$((i+1)); "
		"sleep 0.01; done",
		NULL};
	char want_out[2048] = "", want_err[2048] = "", line[32];
	struct ts_call r1, r2;
	struct tc_conn c1, c2;
	uint64_t off_out, off_err;
	int i;

	for (i = 0; i < 60; i++) {
		snprintf(line, sizeof(line), "out%d\n", i);
		strcat(want_out, line);
		snprintf(line, sizeof(line), "err%d\n", i);
		strcat(want_err, line);
	}
	tc_connect(&c1);
	ts_call_init(&r1);
	ts_exec_send(&c1, 1, "cmd-2", 0, 0, 300, 600, argv);
	ts_wait_for(&c1, 1, &r1, "out5\n");
	off_out = r1.len[0];
	off_err = r1.len[1];
	tc_close(&c1); /* mid-stream: the command goes on */

	tc_connect(&c2);
	ts_call_init(&r2);
	ts_attach_send(&c2, 3, "cmd-2", off_out, off_err);
	ts_wait(&c2, 3, &r2);
	cr_assert(r2.exited, "%s", r2.msg);
	cr_assert_eq(r2.code, 0);
	cr_assert_eq(r2.pid, r1.pid);
	if (r2.seen[0])
		cr_assert_eq(r2.first[0], off_out);
	if (r2.seen[1])
		cr_assert_eq(r2.first[1], off_err);
	/* what the first connection got, then what the second got: the whole, once */
	tc_append(&r1.out[0], &r1.len[0], (const uint8_t *)(r2.out[0] ? r2.out[0] : ""), r2.len[0]);
	tc_append(&r1.out[1], &r1.len[1], (const uint8_t *)(r2.out[1] ? r2.out[1] : ""), r2.len[1]);
	cr_assert_str_eq(r1.out[0], want_out);
	cr_assert_str_eq(r1.out[1], want_err);
	ts_call_free(&r1);
	ts_call_free(&r2);
	tc_close(&c2);
}

Test(agent_session, ring_keeps_the_last_mib_with_absolute_offsets)
{
	/* about 2 MB of output while nobody is attached: the command must not block on it */
	static const char *const argv[] = {"seq", "1", "300000", NULL};
	struct ts_call r1, r2;
	struct tc_conn c1, c2;
	struct ts_info info;
	char *want = NULL;
	size_t want_len = 0, i;

	want = malloc(8 * 300000);
	cr_assert_not_null(want);
	for (i = 1; i <= 300000; i++)
		want_len += (size_t)sprintf(want + want_len, "%zu\n", i);
	cr_assert(want_len > AGENT_SESSION_RING + 100000);
	tc_connect(&c1);
	ts_call_init(&r1);
	ts_exec_send(&c1, 1, "cmd-ring", 0, 0, 300, 600, argv);
	/* detach at once: nobody reads while it writes */
	tc_send(&c1, PROTO_MSG_SESSION_DETACH, 1, NULL, 0);
	ts_wait(&c1, 1, &r1);
	cr_assert(r1.ok || r1.exited);

	tc_connect(&c2);
	ts_wait_exited(&c2, "cmd-ring", 20000, &info);
	cr_assert_eq(info.code, 0);
	cr_assert_eq(info.out_len, want_len);
	cr_assert_eq(info.err_len, 0);
	ts_call_init(&r2);
	ts_attach_send(&c2, 2, "cmd-ring", 0, 0);
	ts_wait(&c2, 2, &r2);
	cr_assert(r2.exited);
	cr_assert(r2.seen[0]);
	cr_assert_eq(r2.first[0], want_len - AGENT_SESSION_RING, "first offset %llu",
		     (unsigned long long)r2.first[0]);
	cr_assert_eq(r2.len[0], AGENT_SESSION_RING);
	cr_assert(memcmp(r2.out[0], want + want_len - AGENT_SESSION_RING, AGENT_SESSION_RING) == 0);
	/* an attach from the middle of what is held */
	ts_call_free(&r2);
	ts_call_init(&r2);
	ts_attach_send(&c2, 3, "cmd-ring", want_len - 10, 0);
	ts_wait(&c2, 3, &r2);
	cr_assert_eq(r2.first[0], want_len - 10);
	cr_assert_str_eq(r2.out[0], want + want_len - 10);
	free(want);
	ts_call_free(&r1);
	ts_call_free(&r2);
	tc_close(&c1);
	tc_close(&c2);
}

Test(agent_session, invalid_utf8_becomes_fffd_and_characters_are_never_split)
{
	/* a, an invalid byte, b, the euro sign cut across two writes, c, a lone lead byte at the
	 * end; then 70000 euro signs (3 bytes each: 64 KiB frames must back off to a boundary) */
	static const char *const argv[] = {
		"sh", "-c",
		"printf 'a\\377b\\342\\202'; sleep 0.2; printf '\\254c\\355\\240\\200d' >&2; "
		"printf '\\254c'; i=0; while [ $i -lt 7000 ]; do "
		"printf "
		"'\\342\\202\\254\\342\\202\\254\\342\\202\\254\\342\\202\\254\\342\\202\\254"
		"\\342\\202\\254\\342\\202\\254\\342\\202\\254\\342\\202\\254\\342\\202\\254'; "
		"i=$((i+1)); done; printf '\\342'",
		NULL};
	static const char head[] = "a\xef\xbf\xbd"
				   "b\xe2\x82\xac"
				   "c";
	struct ts_call r;
	struct tc_conn c;
	struct tc_frame f;
	size_t i;

	tc_connect(&c);
	ts_call_init(&r);
	ts_exec_send(&c, 1, "cmd-utf8", 0, 0, 300, 600, argv);
	for (;;) {
		bool done;

		cr_assert(tc_recv(&c, &f) == 1);
		if (f.hdr.type == PROTO_MSG_SESSION_OUT)
			cr_assert(ts_valid_utf8(f.payload + sizeof(struct proto_session_out),
						f.hdr.len - sizeof(struct proto_session_out)),
				  "a frame of %u bytes is not valid UTF-8 by itself", f.hdr.len);
		done = ts_take(&r, &f);
		free(f.payload);
		if (done)
			break;
	}
	cr_assert(r.exited);
	cr_assert_eq(r.code, 0);
	cr_assert_eq(r.len[0], strlen(head) + 70000 * 3 + 3, "stdout %zu bytes", r.len[0]);
	cr_assert(memcmp(r.out[0], head, strlen(head)) == 0);
	for (i = 0; i < 70000; i++)
		cr_assert(memcmp(r.out[0] + strlen(head) + 3 * i, "\xe2\x82\xac", 3) == 0);
	cr_assert(memcmp(r.out[0] + r.len[0] - 3, "\xef\xbf\xbd", 3) == 0, "the lone lead at EOF");
	/* stderr: a lone continuation byte, c, a surrogate (ED A0 80: three maximal subparts) */
	cr_assert_str_eq(r.out[1], "\xef\xbf\xbd"
				   "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
				   "d");
	ts_call_free(&r);
	tc_close(&c);
}

Test(agent_session, utf8_sanitiser_cases)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{"plain", "plain"},
		{"\xc3\xa9", "\xc3\xa9"},
		{"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"}, /* overlong: C0 is never valid */
		{"\xe0\x80\xaf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
		{"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
		{"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
		{"\xf0\x9f\x98x", "\xef\xbf\xbdx"}, /* a cut sequence is one U+FFFD */
		{"\xe2\x82", "\xef\xbf\xbd"},	    /* at eof */
	};
	uint8_t out[64], tail[4], tail_len;
	size_t i, n;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n = agent_utf8_sanitize((const uint8_t *)cases[i].in, strlen(cases[i].in), true,
					out, tail, &tail_len);
		cr_assert_eq(n, strlen(cases[i].want), "case %zu", i);
		cr_assert(memcmp(out, cases[i].want, n) == 0, "case %zu", i);
		cr_assert_eq(tail_len, 0);
	}
	/* not at eof: the cut character is held back whole */
	n = agent_utf8_sanitize((const uint8_t *)"ab\xf0\x9f\x98", 5, false, out, tail, &tail_len);
	cr_assert_eq(n, 2);
	cr_assert_eq(tail_len, 3);
	cr_assert(memcmp(tail, "\xf0\x9f\x98", 3) == 0);
}

Test(agent_session, kill_on_disconnect_kills_at_the_last_detach)
{
	static const char *const argv[] = {"sleep", "30", NULL};
	struct ts_call r1, r2, k1;
	struct tc_conn c1, c2;

	tc_connect(&c1);
	tc_connect(&c2);
	ts_call_init(&r1);
	ts_call_init(&r2);
	ts_call_init(&k1);
	/* without the flag a disconnect leaves it running */
	ts_exec_send(&c1, 1, "cmd-keep", 0, 0, PROTO_SESSION_NEVER, 600, argv);
	ts_exec_send(&c1, 2, "cmd-kod", PROTO_SESSION_KILL_ON_DISCONNECT, 0, PROTO_SESSION_NEVER,
		     600, argv);
	ts_wait_started(&c1, 1, &r1);
	ts_wait_started(&c1, 2, &k1);
	cr_assert(r1.started && k1.started);
	/* a second attachment of the KILL_ON_DISCONNECT one: the first going is not the last */
	ts_attach_send(&c2, 5, "cmd-kod", 0, 0);
	ts_wait_started(&c2, 5, &r2);
	cr_assert(r2.started);
	tc_close(&c1);
	usleep(300 * 1000);
	cr_assert(!ts_dead((pid_t)k1.pid), "killed while an attachment remained");
	cr_assert(!ts_dead((pid_t)r1.pid), "a session without the flag was killed");
	tc_close(&c2);
	cr_assert(ts_wait_dead((pid_t)k1.pid, 5000), "the last detach did not kill it");
	cr_assert(!ts_dead((pid_t)r1.pid));
	kill((pid_t)r1.pid, SIGKILL);
	ts_call_free(&r1);
	ts_call_free(&r2);
	ts_call_free(&k1);
}

Test(agent_session, idle_timeout_kills_a_detached_command)
{
	static const char *const argv[] = {"sleep", "30", NULL};
	struct ts_call r1, r2;
	struct tc_conn c1;
	struct ts_info info;
	uint64_t t0;

	tc_connect(&c1);
	ts_call_init(&r1);
	ts_exec_send(&c1, 1, "cmd-idle", 0, 0, 1, 600, argv);
	ts_wait_started(&c1, 1, &r1);
	/* attached for longer than the idle timeout: not idle */
	usleep(1500 * 1000);
	ts_list(&c1, 2, "cmd-idle", &info);
	cr_assert(info.flags & PROTO_SESSION_RUNNING, "killed while attached");
	t0 = ts_now_ms();
	tc_send(&c1, PROTO_MSG_SESSION_DETACH, 1, NULL, 0);
	ts_wait(&c1, 1, &r1);
	cr_assert(r1.ok);
	ts_wait_exited(&c1, "cmd-idle", 5000, &info);
	cr_assert(ts_now_ms() - t0 >= 900, "killed after %llu ms",
		  (unsigned long long)(ts_now_ms() - t0));
	cr_assert_eq(info.code, 137);
	ts_call_init(&r2);
	ts_attach_send(&c1, 3, "cmd-idle", 0, 0);
	ts_wait(&c1, 3, &r2);
	cr_assert(r2.exited);
	cr_assert_eq(r2.code, 137);
	cr_assert_eq(r2.sig, 9);
	ts_call_free(&r1);
	ts_call_free(&r2);
	tc_close(&c1);
}

Test(agent_session, timeout_kills_the_group)
{
	static const char *const argv[] = {"sleep", "30", NULL};
	struct ts_call r;
	struct tc_conn c;

	tc_connect(&c);
	ts_call_init(&r);
	ts_exec_send(&c, 1, "cmd-timeout", 0, 200, PROTO_SESSION_NEVER, 600, argv);
	ts_wait(&c, 1, &r);
	cr_assert(r.exited);
	cr_assert_eq(r.code, 137);
	cr_assert(r.flags & PROTO_EXIT_TIMED_OUT);
	ts_call_free(&r);
	tc_close(&c);
}

Test(agent_session, ttl_expiry_gives_session_expired)
{
	static const char *const argv[] = {"echo", "hi", NULL};
	struct ts_call r;
	struct tc_conn c;

	tc_connect(&c);
	ts_call_init(&r);
	ts_exec_send(&c, 1, "cmd-ttl", 0, 0, 300, 1, argv);
	ts_wait(&c, 1, &r);
	cr_assert(r.exited);
	/* kept: a replay */
	ts_call_free(&r);
	ts_call_init(&r);
	ts_attach_send(&c, 2, "cmd-ttl", 0, 0);
	ts_wait(&c, 2, &r);
	cr_assert(r.exited);
	cr_assert_str_eq(r.out[0], "hi\n");
	usleep(1600 * 1000);
	ts_call_free(&r);
	ts_call_init(&r);
	ts_attach_send(&c, 3, "cmd-ttl", 0, 0);
	ts_wait(&c, 3, &r);
	cr_assert(r.failed);
	cr_assert_eq(r.errnum, ESTALE);
	cr_assert_str_eq(r.msg, "SessionExpired");
	/* an exec with that id starts nothing */
	ts_call_free(&r);
	ts_call_init(&r);
	ts_exec_send(&c, 4, "cmd-ttl", 0, 0, 300, 1, argv);
	ts_wait(&c, 4, &r);
	cr_assert(r.failed && r.errnum == ESTALE);
	/* an id never seen */
	ts_call_free(&r);
	ts_call_init(&r);
	ts_attach_send(&c, 5, "no-such-command", 0, 0);
	ts_wait(&c, 5, &r);
	cr_assert(r.failed);
	cr_assert_eq(r.errnum, ENOENT);
	cr_assert_str_eq(r.msg, "CommandNotFound");
	ts_call_free(&r);
	tc_close(&c);
}

Test(agent_session, two_attachments_get_the_same_live_output)
{
	static const char *const argv[] = {
		"sh", "-c", "read go; for i in 1 2 3 4 5 6 7 8; do echo tick$i; sleep 0.05; done",
		NULL};
	struct ts_call r1, r2;
	struct tc_conn c1, c2;

	tc_connect(&c1);
	tc_connect(&c2);
	ts_call_init(&r1);
	ts_call_init(&r2);
	ts_exec_send(&c1, 1, "cmd-two", PROTO_EXEC_STDIN, 0, 300, 600, argv);
	ts_wait_started(&c1, 1, &r1);
	ts_attach_send(&c2, 1, "cmd-two", 0, 0);
	ts_wait_started(&c2, 1, &r2);
	cr_assert(r1.started && r2.started);
	/* both attached before it writes anything: all they get is live */
	tc_send(&c2, PROTO_MSG_STDIN, 1, "go\n", 3);
	ts_wait(&c1, 1, &r1);
	ts_wait(&c2, 1, &r2);
	cr_assert(r1.exited && r2.exited);
	cr_assert_str_eq(r1.out[0], "tick1\ntick2\ntick3\ntick4\ntick5\ntick6\ntick7\ntick8\n");
	cr_assert_str_eq(r2.out[0], r1.out[0]);
	ts_call_free(&r1);
	ts_call_free(&r2);
	tc_close(&c1);
	tc_close(&c2);
}

Test(agent_session, stdin_from_two_attachments_and_close)
{
	static const char *const argv[] = {"cat", NULL};
	struct ts_call r1, r2;
	struct tc_conn c1, c2;

	tc_connect(&c1);
	tc_connect(&c2);
	ts_call_init(&r1);
	ts_call_init(&r2);
	ts_exec_send(&c1, 1, "cmd-cat", PROTO_EXEC_STDIN, 0, 300, 600, argv);
	ts_wait_started(&c1, 1, &r1);
	ts_attach_send(&c2, 9, "cmd-cat", 0, 0);
	tc_send(&c2, PROTO_MSG_STDIN, 9, "hello ", 6);
	ts_wait_for(&c1, 1, &r1, "hello ");
	tc_send(&c1, PROTO_MSG_STDIN, 1, "world\n", 6);
	ts_wait_for(&c1, 1, &r1, "world\n");
	tc_send(&c1, PROTO_MSG_STDIN_CLOSE, 1, NULL, 0);
	ts_wait(&c1, 1, &r1);
	ts_wait(&c2, 9, &r2);
	cr_assert(r1.exited && r2.exited);
	cr_assert_eq(r1.code, 0);
	cr_assert_str_eq(r1.out[0], "hello world\n");
	cr_assert_str_eq(r2.out[0], "hello world\n");
	ts_call_free(&r1);
	ts_call_free(&r2);
	tc_close(&c1);
	tc_close(&c2);
}

Test(agent_session, pty_output)
{
	static const char *const argv[] = {"sh", "-c", "tty && stty size && echo err >&2", NULL};
	struct ts_call r;
	struct tc_conn c;

	tc_connect(&c);
	ts_call_init(&r);
	ts_exec_send(&c, 1, "cmd-pty", PROTO_EXEC_PTY, 0, 300, 600, argv);
	ts_wait(&c, 1, &r);
	cr_assert(r.exited);
	cr_assert_eq(r.code, 0, "output: %s", r.out[0]);
	cr_assert(strstr(r.out[0], "/dev/pts/") != NULL, "output: %s", r.out[0]);
	cr_assert(strstr(r.out[0], "24 80") != NULL, "output: %s", r.out[0]);
	cr_assert(strstr(r.out[0], "err") != NULL, "stderr merged: %s", r.out[0]);
	cr_assert(!r.seen[1]);
	ts_call_free(&r);
	tc_close(&c);
}

Test(agent_session, signal_kills_the_whole_group)
{
	static const char *const argv[] = {"sh", "-c", "sleep 30 & echo $!; wait", NULL};
	uint8_t sig[sizeof(struct proto_signal)] = {0};
	struct ts_call r, s;
	struct tc_conn c1, c2;
	pid_t bg;

	tc_connect(&c1);
	tc_connect(&c2);
	ts_call_init(&r);
	ts_exec_send(&c1, 1, "cmd-sig", 0, 0, 300, 600, argv);
	ts_wait_for(&c1, 1, &r, "\n");
	bg = (pid_t)atoi(r.out[0]);
	cr_assert(bg > 0);
	/* from another connection's attachment */
	ts_call_init(&s);
	ts_attach_send(&c2, 4, "cmd-sig", 0, 0);
	ts_wait_for(&c2, 4, &s, "\n");
	proto_put_le64(sig + offsetof(struct proto_signal, target_id), 4);
	proto_put_le32(sig + offsetof(struct proto_signal, signal), SIGKILL);
	tc_send(&c2, PROTO_MSG_SIGNAL, 5, sig, sizeof(sig));
	{
		struct tc_frame f;

		cr_assert(tc_recv(&c2, &f) == 1);
		cr_assert_eq(f.hdr.id, 5);
		cr_assert_eq(f.hdr.type, PROTO_MSG_OK);
		free(f.payload);
	}
	ts_wait(&c1, 1, &r);
	cr_assert(r.exited);
	cr_assert_eq(r.code, 137);
	cr_assert(r.flags & PROTO_EXIT_SIGNALED);
	cr_assert(ts_wait_dead(bg, 5000), "the background sleep %d survived", (int)bg);
	ts_call_free(&r);
	ts_call_free(&s);
	tc_close(&c1);
	tc_close(&c2);
}

Test(agent_session, sixty_five_sessions_are_bounded)
{
	static const char *const argv[] = {"sleep", "30", NULL};
	static const char *const quick[] = {"true", NULL};
	uint8_t sig[sizeof(struct proto_signal)] = {0};
	struct ts_call r;
	struct tc_conn c;
	struct ts_info info;
	char id[32];
	int i;

	tc_connect(&c);
	for (i = 0; i < (int)AGENT_SESSIONS_MAX; i++) {
		snprintf(id, sizeof(id), "many-%d", i);
		ts_call_init(&r);
		ts_exec_send(&c, (uint64_t)i + 1, id, PROTO_SESSION_KILL_ON_DISCONNECT, 0,
			     PROTO_SESSION_NEVER, PROTO_SESSION_NEVER, argv);
		ts_wait_started(&c, (uint64_t)i + 1, &r);
		cr_assert(r.started, "session %d: %s", i, r.msg);
		ts_call_free(&r);
	}
	cr_assert_eq(ts_list(&c, 500, "many-0", &info), AGENT_SESSIONS_MAX);
	ts_call_init(&r);
	ts_exec_send(&c, 600, "many-64", 0, 0, PROTO_SESSION_NEVER, PROTO_SESSION_NEVER, quick);
	ts_wait(&c, 600, &r);
	cr_assert(r.failed, "a 65th session started");
	cr_assert_eq(r.errnum, EAGAIN);
	ts_call_free(&r);
	/* one ends: it is the oldest ended, evicted for the next */
	proto_put_le64(sig + offsetof(struct proto_signal, target_id), 1);
	proto_put_le32(sig + offsetof(struct proto_signal, signal), SIGKILL);
	tc_send(&c, PROTO_MSG_SIGNAL, 601, sig, sizeof(sig));
	ts_call_init(&r);
	for (;;) {
		struct tc_frame f;

		cr_assert(tc_recv(&c, &f) == 1);
		if (f.hdr.id == 1 && f.hdr.type == PROTO_MSG_EXIT) {
			free(f.payload);
			break;
		}
		free(f.payload);
	}
	ts_exec_send(&c, 602, "many-64", 0, 0, PROTO_SESSION_NEVER, PROTO_SESSION_NEVER, quick);
	ts_wait(&c, 602, &r);
	cr_assert(r.exited, "%s", r.msg);
	ts_call_free(&r);
	cr_assert_eq(ts_list(&c, 603, "many-0", &info), AGENT_SESSIONS_MAX);
	cr_assert(!info.found, "the ended session was not evicted");
	ts_call_init(&r);
	ts_attach_send(&c, 604, "many-0", 0, 0);
	ts_wait(&c, 604, &r);
	cr_assert(r.failed && r.errnum == ESTALE, "%s", r.msg);
	ts_call_free(&r);
	tc_close(&c); /* kills the 63 sleeps (KILL_ON_DISCONNECT) */
}

Test(agent_session, bad_ids_and_frames)
{
	static const char *const argv[] = {"true", NULL};
	char big[PROTO_SESSION_ID_MAX + 2];
	struct ts_call r;
	struct tc_conn c;
	struct tc_frame f;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	tc_connect(&c);
	ts_call_init(&r);
	ts_exec_send(&c, 1, big, 0, 0, 300, 600, argv);
	ts_wait(&c, 1, &r);
	cr_assert(r.failed && r.errnum == EINVAL, "%s", r.msg);
	/* a DETACH of nothing is ignored; the connection still answers */
	tc_send(&c, PROTO_MSG_SESSION_DETACH, 77, NULL, 0);
	tc_send(&c, PROTO_MSG_PING, 2, NULL, 0);
	cr_assert(tc_recv(&c, &f) == 1);
	cr_assert_eq(f.hdr.type, PROTO_MSG_PONG);
	free(f.payload);
	/* an id longer than the payload: a protocol error */
	{
		uint8_t buf[sizeof(struct proto_session_attach) + 4] = {0};

		proto_put_le16(buf + offsetof(struct proto_session_attach, id_len), 100);
		tc_send(&c, PROTO_MSG_SESSION_ATTACH, 3, buf, sizeof(buf));
	}
	cr_assert(tc_recv(&c, &f) == 1);
	cr_assert_eq(f.hdr.type, PROTO_MSG_ERROR);
	cr_assert_eq(f.hdr.id, 0);
	free(f.payload);
	ts_call_free(&r);
	tc_close(&c);
}

Test(agent_session, exec_beside_a_session_is_unchanged)
{
	static const char *const argv[] = {"echo", "plain", NULL};
	static const char *const sleeper[] = {"sleep", "30", NULL};
	struct tc_exec e;
	struct ts_call r;
	struct tc_conn c;

	tc_connect(&c);
	ts_call_init(&r);
	ts_exec_send(&c, 1, "cmd-beside", PROTO_SESSION_KILL_ON_DISCONNECT, 0, PROTO_SESSION_NEVER,
		     600, sleeper);
	ts_wait_started(&c, 1, &r);
	tc_exec(&c, 2, 0, 0, "", argv, &e);
	cr_assert(e.exited);
	cr_assert_str_eq(e.out, "plain\n");
	tc_exec_free(&e);
	ts_call_free(&r);
	tc_close(&c);
}

Test(agent_session, output_is_bounded_attached_or_not)
{
	static const char *const argv[] = {"head", "-c", "67108864", "/dev/zero", NULL};
	struct ts_call r1, r2;
	struct tc_conn c1;
	struct ts_info info;
	long before, after;
	uint64_t total = 0;
	struct tc_frame f;

	tc_connect(&c1);
	before = ts_rss_kib(tc_agent_pid);
	/* detached: 64 MiB go through the ring while nobody reads; the command does not block */
	ts_call_init(&r1);
	ts_exec_send(&c1, 1, "cmd-big-detached", 0, 0, PROTO_SESSION_NEVER, 600, argv);
	tc_send(&c1, PROTO_MSG_SESSION_DETACH, 1, NULL, 0);
	ts_wait(&c1, 1, &r1);
	ts_wait_exited(&c1, "cmd-big-detached", 30000, &info);
	cr_assert_eq(info.out_len, 67108864);
	after = ts_rss_kib(tc_agent_pid);
	cr_assert(after - before < 8 * 1024, "the agent grew from %ld to %ld KiB", before, after);
	ts_call_free(&r1);

	/* attached and not read: the command waits on its pipe, the agent does not grow */
	ts_exec_send(&c1, 2, "cmd-big-attached", 0, 0, PROTO_SESSION_NEVER, 600, argv);
	usleep(500 * 1000);
	after = ts_rss_kib(tc_agent_pid);
	cr_assert(after - before < 12 * 1024, "the agent grew from %ld to %ld KiB", before, after);
	ts_call_init(&r2);
	for (;;) {
		cr_assert(tc_recv(&c1, &f) == 1);
		cr_assert_eq(f.hdr.id, 2);
		if (f.hdr.type == PROTO_MSG_SESSION_OUT) {
			/* every byte, in order, none twice (ts_take would keep 64 MiB) */
			cr_assert_eq(proto_get_le64(f.payload +
						    offsetof(struct proto_session_out, offset)),
				     total);
			total += f.hdr.len - sizeof(struct proto_session_out);
		} else if (f.hdr.type == PROTO_MSG_EXIT) {
			cr_assert_eq(proto_get_le32(f.payload), 0);
			free(f.payload);
			break;
		} else {
			cr_assert_eq(f.hdr.type, PROTO_MSG_STARTED);
		}
		free(f.payload);
	}
	cr_assert_eq(total, 67108864);
	ts_call_free(&r2);
	tc_close(&c1);
}

/* PROTO_SESSION_SHELL_FALLBACK: a missing argv[0] runs /bin/sh with the same arguments and
 * argv[0] "/bin/sh" (busybox picks its applet by it); without the flag it is 127 as before. */
Test(agent_session, shell_fallback_runs_sh_where_the_shell_is_missing)
{
	static const char *const argv[] = {"/nonexistent/bash", "-c", "echo \"$0\" ran; exit 3",
					   NULL};
	struct ts_call r;
	struct tc_conn c;

	tc_connect(&c);
	ts_call_init(&r);
	ts_exec_send(&c, 1, "cmd-fallback", PROTO_SESSION_SHELL_FALLBACK, 0, PROTO_SESSION_NEVER,
		     600, argv);
	ts_wait(&c, 1, &r);
	cr_assert(r.exited);
	cr_assert_eq(r.code, 3);
	cr_assert_str_eq(r.out[0], "/bin/sh ran\n");
	ts_call_free(&r);

	ts_call_init(&r);
	ts_exec_send(&c, 2, "cmd-no-fallback", 0, 0, PROTO_SESSION_NEVER, 600, argv);
	ts_wait(&c, 2, &r);
	cr_assert(r.exited);
	cr_assert_eq(r.code, 127);
	cr_assert(r.out[1] != NULL && strstr(r.out[1], "/nonexistent/bash: ") != NULL);
	ts_call_free(&r);
	tc_close(&c);
}
