/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The session calls of the agent protocol for the unit tests (test_agent_session.c), on top of
 * test_agent_client.h: SESSION_EXEC and SESSION_ATTACH requests, and a collector of a session
 * call's frames that fails the test when a SESSION_OUT does not start exactly where the last
 * one of its stream ended (nothing lost, nothing repeated).
 */
#ifndef SANDBOX_TESTS_TEST_SESSION_CLIENT_H
#define SANDBOX_TESTS_TEST_SESSION_CLIENT_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_agent_client.h"

static const char *const ts_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/", NULL};

/* What a session call collected. */
struct ts_call {
	char *out[2];	   /* stdout, stderr as received, NUL-terminated */
	size_t len[2];	   /* bytes received */
	size_t cap[2];	   /* bytes allocated */
	uint64_t first[2]; /* the offset of the first frame of each stream */
	uint64_t next[2];  /* the offset the next frame must carry */
	bool seen[2];	   /* a frame of that stream came */
	unsigned frames;
	bool started;
	uint32_t pid;
	bool exited;
	uint32_t code, sig, flags;
	bool failed; /* ERROR instead of EXIT */
	uint32_t errnum;
	char msg[512];
	bool ok; /* OK: detached */
};

/* SESSION_EXEC id on call `call` with flags and timers, argv in /. */
static void ts_exec_send(struct tc_conn *c, uint64_t call, const char *id, uint32_t flags,
			 uint32_t timeout_ms, uint32_t idle_s, uint32_t ttl_s,
			 const char *const *argv)
{
	uint8_t buf[8192];
	size_t off = sizeof(struct proto_session), n;
	uint16_t argc = 0, envc = 0;

	memset(buf, 0, sizeof(buf));
	n = strlen(id);
	memcpy(buf + off, id, n);
	off += n;
	buf[off++] = '\0'; /* cwd "" */
	for (; argv[argc] != NULL; argc++) {
		n = strlen(argv[argc]) + 1;
		cr_assert(off + n < sizeof(buf));
		memcpy(buf + off, argv[argc], n);
		off += n;
	}
	for (; ts_env[envc] != NULL; envc++) {
		n = strlen(ts_env[envc]) + 1;
		memcpy(buf + off, ts_env[envc], n);
		off += n;
	}
	proto_put_le32(buf + offsetof(struct proto_session, flags), flags);
	proto_put_le32(buf + offsetof(struct proto_session, uid), PROTO_ID_KEEP);
	proto_put_le32(buf + offsetof(struct proto_session, gid), PROTO_ID_KEEP);
	proto_put_le32(buf + offsetof(struct proto_session, timeout_ms), timeout_ms);
	proto_put_le32(buf + offsetof(struct proto_session, idle_timeout_s), idle_s);
	proto_put_le32(buf + offsetof(struct proto_session, ttl_s), ttl_s);
	proto_put_le16(buf + offsetof(struct proto_session, id_len), (uint16_t)strlen(id));
	proto_put_le16(buf + offsetof(struct proto_session, argc), argc);
	proto_put_le16(buf + offsetof(struct proto_session, envc), envc);
	proto_put_le16(buf + offsetof(struct proto_session, rows), 24);
	proto_put_le16(buf + offsetof(struct proto_session, cols), 80);
	tc_send(c, PROTO_MSG_SESSION_EXEC, call, buf, (uint32_t)off);
}

/* SESSION_ATTACH id on call `call` from the offsets. */
static void ts_attach_send(struct tc_conn *c, uint64_t call, const char *id, uint64_t off_out,
			   uint64_t off_err)
{
	uint8_t buf[sizeof(struct proto_session_attach) + 256] = {0};
	size_t n = strlen(id);

	proto_put_le64(buf + offsetof(struct proto_session_attach, stdout_offset), off_out);
	proto_put_le64(buf + offsetof(struct proto_session_attach, stderr_offset), off_err);
	proto_put_le16(buf + offsetof(struct proto_session_attach, id_len), (uint16_t)n);
	memcpy(buf + sizeof(struct proto_session_attach), id, n);
	tc_send(c, PROTO_MSG_SESSION_ATTACH, call, buf,
		(uint32_t)(sizeof(struct proto_session_attach) + n));
}

/* Start collecting a call from offsets (the first frames must carry them, unless a stream's
 * first frame comes from where the ring starts: then first[] says where). */
static void ts_call_init(struct ts_call *r)
{
	memset(r, 0, sizeof(*r));
}

/* Account one frame to r. Each SESSION_OUT must go on exactly where the last one of its stream
 * ended: nothing lost, nothing repeated. Returns true once r ended. */
static bool ts_take(struct ts_call *r, const struct tc_frame *f)
{
	const uint8_t *p = f->payload;
	uint32_t stream;
	uint64_t off;
	size_t n;
	int k;

	switch (f->hdr.type) {
	case PROTO_MSG_STARTED:
		cr_assert(!r->started, "a second STARTED");
		r->started = true;
		r->pid = proto_get_le32(p);
		return false;
	case PROTO_MSG_SESSION_OUT:
		cr_assert(r->started, "output before STARTED");
		cr_assert(f->hdr.len >= sizeof(struct proto_session_out));
		stream = proto_get_le32(p + offsetof(struct proto_session_out, stream));
		off = proto_get_le64(p + offsetof(struct proto_session_out, offset));
		n = f->hdr.len - sizeof(struct proto_session_out);
		cr_assert(stream == PROTO_STREAM_STDOUT || stream == PROTO_STREAM_STDERR);
		cr_assert(n > 0 && n <= PROTO_DATA_CHUNK, "a frame of %zu bytes", n);
		k = stream == PROTO_STREAM_STDOUT ? 0 : 1;
		if (!r->seen[k]) {
			r->seen[k] = true;
			r->first[k] = off;
		} else {
			cr_assert_eq(off, r->next[k], "stream %d: frame at %llu, expected %llu", k,
				     (unsigned long long)off, (unsigned long long)r->next[k]);
		}
		r->next[k] = off + n;
		if (r->len[k] + n + 1 > r->cap[k]) {
			/* doubling: output of many small frames stays linear */
			r->cap[k] = 2 * (r->len[k] + n + 1);
			r->out[k] = realloc(r->out[k], r->cap[k]);
			cr_assert_not_null(r->out[k]);
		}
		memcpy(r->out[k] + r->len[k], p + sizeof(struct proto_session_out), n);
		r->len[k] += n;
		r->out[k][r->len[k]] = '\0';
		r->frames++;
		return false;
	case PROTO_MSG_EXIT:
		r->exited = true;
		r->code = proto_get_le32(p + offsetof(struct proto_exit, code));
		r->sig = proto_get_le32(p + offsetof(struct proto_exit, signal));
		r->flags = proto_get_le32(p + offsetof(struct proto_exit, flags));
		return true;
	case PROTO_MSG_OK:
		r->ok = true;
		return true;
	case PROTO_MSG_ERROR:
		r->failed = true;
		r->errnum = proto_get_le32(p);
		snprintf(r->msg, sizeof(r->msg), "%.*s", (int)(f->hdr.len - 8), p + 8);
		return true;
	default:
		cr_assert_fail("unexpected frame %s for a session call",
			       proto_type_name(f->hdr.type) ? proto_type_name(f->hdr.type) : "?");
		return true;
	}
}

/* Collect call `call` of c into r until it ends (frames of other ids fail the test). */
static void ts_wait(struct tc_conn *c, uint64_t call, struct ts_call *r)
{
	struct tc_frame f;
	bool done = false;

	while (!done) {
		cr_assert(tc_recv(c, &f) == 1, "connection closed during call %llu",
			  (unsigned long long)call);
		cr_assert_eq(f.hdr.id, call, "a frame %s of call %llu", proto_type_name(f.hdr.type),
			     (unsigned long long)f.hdr.id);
		done = ts_take(r, &f);
		free(f.payload);
	}
}

/* Take frames of call `call` until stdout holds `want` (or the call ends). */
static void ts_wait_for(struct tc_conn *c, uint64_t call, struct ts_call *r, const char *want)
{
	struct tc_frame f;
	bool done = false;

	while (!done && (r->out[0] == NULL || strstr(r->out[0], want) == NULL)) {
		cr_assert(tc_recv(c, &f) == 1);
		cr_assert_eq(f.hdr.id, call);
		done = ts_take(r, &f);
		free(f.payload);
	}
}

/* Take frames of call `call` until its STARTED (or its end). */
static void ts_wait_started(struct tc_conn *c, uint64_t call, struct ts_call *r)
{
	struct tc_frame f;
	bool done = false;

	while (!done && !r->started) {
		cr_assert(tc_recv(c, &f) == 1);
		cr_assert_eq(f.hdr.id, call);
		done = ts_take(r, &f);
		free(f.payload);
	}
}

static void ts_call_free(struct ts_call *r)
{
	free(r->out[0]);
	free(r->out[1]);
}

static uint64_t ts_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Whether pid is gone (or a zombie nobody reaped yet). */
static bool ts_dead(pid_t pid)
{
	char path[64], buf[512], *p;
	bool z = false;
	FILE *f;

	if (kill(pid, 0) < 0)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return true;
	if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL)
		z = p[2] == 'Z';
	fclose(f);
	return z;
}

/* Wait up to ms for pid to die. */
static bool ts_wait_dead(pid_t pid, unsigned ms)
{
	uint64_t end = ts_now_ms() + ms;

	while (!ts_dead(pid) && ts_now_ms() < end)
		usleep(10 * 1000);
	return ts_dead(pid);
}

/* One session of a SESSION_LIST answer. */
struct ts_info {
	uint32_t pid, flags, code;
	uint64_t out_len, err_len;
	bool found;
};

/* SESSION_LIST on call `call`: the entry of command id (found false if absent); returns how
 * many sessions were listed. */
static unsigned ts_list(struct tc_conn *c, uint64_t call, const char *id, struct ts_info *out)
{
	struct tc_frame f;
	unsigned n = 0;

	memset(out, 0, sizeof(*out));
	tc_send(c, PROTO_MSG_SESSION_LIST, call, NULL, 0);
	for (;;) {
		const uint8_t *p;

		cr_assert(tc_recv(c, &f) == 1);
		cr_assert_eq(f.hdr.id, call);
		if (f.hdr.type == PROTO_MSG_END) {
			free(f.payload);
			return n;
		}
		cr_assert_eq(f.hdr.type, PROTO_MSG_DATA);
		cr_assert(f.hdr.len > sizeof(struct proto_session_info));
		p = f.payload;
		n++;
		if (f.hdr.len - sizeof(struct proto_session_info) == strlen(id) &&
		    memcmp(p + sizeof(struct proto_session_info), id, strlen(id)) == 0) {
			out->found = true;
			out->pid = proto_get_le32(p + offsetof(struct proto_session_info, pid));
			out->flags = proto_get_le32(p + offsetof(struct proto_session_info, flags));
			out->code =
				proto_get_le32(p + offsetof(struct proto_session_info, exit_code));
			out->out_len =
				proto_get_le64(p + offsetof(struct proto_session_info, stdout_len));
			out->err_len =
				proto_get_le64(p + offsetof(struct proto_session_info, stderr_len));
		}
		free(f.payload);
	}
}

/* Poll SESSION_LIST until id has exited (up to ms). */
static void ts_wait_exited(struct tc_conn *c, const char *id, unsigned ms, struct ts_info *info)
{
	uint64_t end = ts_now_ms() + ms;
	uint64_t call = 900;

	for (;;) {
		ts_list(c, call++, id, info);
		cr_assert(info->found, "%s is not listed", id);
		if (info->flags & PROTO_SESSION_EXITED)
			return;
		cr_assert(ts_now_ms() < end, "%s did not exit in %u ms", id, ms);
		usleep(20 * 1000);
	}
}

/* Whether s[0, n) is valid UTF-8 (the strict form: no surrogates, overlongs, beyond U+10FFFF). */
static bool ts_valid_utf8(const uint8_t *s, size_t n)
{
	uint8_t tail[4], tail_len;
	uint8_t *out = malloc(3 * n + 1);
	size_t m;
	bool ok;

	cr_assert_not_null(out);
	m = agent_utf8_sanitize(s, n, true, out, tail, &tail_len);
	ok = m == n && memcmp(out, s, n) == 0;
	free(out);
	return ok;
}

/* The VmRSS of pid in KiB. */
static long ts_rss_kib(pid_t pid)
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

#endif /* SANDBOX_TESTS_TEST_SESSION_CLIENT_H */
