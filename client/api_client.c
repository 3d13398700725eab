/* SPDX-License-Identifier: Apache-2.0 */
/* The client side of api.sock (wire/api_proto.h): one connection per call, with a timeout. */
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "api_proto.h"
#include "client.h"

/* A fork's memory is a chain of at most this many files (vmm.h MEM_DELTAS_MAX + 1). */
#define MEM_FILES_MAX 8

/* Read exactly `len` bytes before `deadline` (now_ms). */
static int read_full(int fd, void *buf, size_t len, uint64_t deadline)
{
	uint8_t *p = buf;

	while (len) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		uint64_t now = now_ms();
		ssize_t n;

		if (now >= deadline)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)(deadline - now)) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		n = recv(fd, p, len, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* send, with `pass_fd` as SCM_RIGHTS when it is >= 0. */
static ssize_t send_fd(int fd, const void *buf, size_t len, int pass_fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

	if (pass_fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		m.msg_control = cm.buf;
		m.msg_controllen = sizeof(cm.buf);
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&cm.h), &pass_fd, sizeof(int));
	}
	return sendmsg(fd, &m, MSG_NOSIGNAL);
}

int api_request(const struct sandbox *sb, uint16_t type, const void *req, uint32_t req_len,
		unsigned timeout_ms, int32_t *error, void *body, size_t body_max, size_t *body_len)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int err = sandbox_path(sb, "api.sock", path, sizeof(path));

	if (err < 0)
		return err;
	return api_request_path(path, type, req, req_len, timeout_ms, error, body, body_max,
				body_len);
}

static int request(const char *api_path, uint16_t type, const void *req, uint32_t req_len,
		   unsigned timeout_ms, int32_t *error, void *body, size_t body_max,
		   size_t *body_len, pid_t *peer, int pass_fd);

int api_request_path(const char *api_path, uint16_t type, const void *req, uint32_t req_len,
		     unsigned timeout_ms, int32_t *error, void *body, size_t body_max,
		     size_t *body_len)
{
	return request(api_path, type, req, req_len, timeout_ms, error, body, body_max, body_len,
		       NULL, -1);
}

/* api_request_path, and the VMM's pid as this process's pid namespace numbers it (the VMM's
 * own view, in the replies, is 1 when it has a pid namespace of its own), and `pass_fd`
 * (>= 0) sent along with the request. */
static int request(const char *api_path, uint16_t type, const void *req, uint32_t req_len,
		   unsigned timeout_ms, int32_t *error, void *body, size_t body_max,
		   size_t *body_len, pid_t *peer, int pass_fd)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	uint64_t deadline = now_ms() + timeout_ms;
	struct api_hdr h = {
		.magic = htole32(API_MAGIC),
		.version = htole16(API_VERSION),
		.type = htole16(type),
		.id = htole32(1),
		.len = htole32(req_len),
	};
	uint8_t payload[API_PAYLOAD_MAX], msg[sizeof(h) + API_PAYLOAD_MAX];
	struct api_result r;
	uint32_t len;
	int fd, err;

	if (req_len > API_PAYLOAD_MAX)
		return -E2BIG;
	if ((err = path_fmt(addr.sun_path, sizeof(addr.sun_path), "%s", api_path)) < 0)
		return err;
	/* Non-blocking: a wedged VMM whose listen backlog is full makes a blocking connect wait
	 * for ever (and `sandboxctl ls` with it); a unix socket then says EAGAIN at once. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	while (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		if (errno != EAGAIN && errno != EINTR) {
			err = -errno;
			goto out;
		}
		if (now_ms() >= deadline) {
			err = -ETIMEDOUT;
			goto out;
		}
		usleep(10000);
	}
	if (peer) {
		struct ucred cred;
		socklen_t cl = sizeof(cred);

		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0) {
			err = -errno;
			goto out;
		}
		*peer = cred.pid;
	}
	memcpy(msg, &h, sizeof(h));
	if (req_len)
		memcpy(msg + sizeof(h), req, req_len);
	/* Small enough for the socket's buffer: one send, or the VMM is not reading. */
	if (send_fd(fd, msg, sizeof(h) + req_len, pass_fd) != (ssize_t)(sizeof(h) + req_len)) {
		err = -EPIPE;
		goto out;
	}
	if ((err = read_full(fd, &h, sizeof(h), deadline)) < 0)
		goto out;
	len = le32toh(h.len);
	/* the reply is checked like any input before its payload is read */
	if (le32toh(h.magic) != API_MAGIC || le16toh(h.version) != API_VERSION ||
	    le16toh(h.type) != (type | API_REPLY) || le32toh(h.id) != 1 || len > sizeof(payload) ||
	    len < sizeof(r)) {
		err = -EPROTO;
		goto out;
	}
	if ((err = read_full(fd, payload, len, deadline)) < 0)
		goto out;
	memcpy(&r, payload, sizeof(r));
	*error = (int32_t)le32toh((uint32_t)r.error);
	len -= (uint32_t)sizeof(r);
	if (len > body_max)
		len = (uint32_t)body_max;
	if (len)
		memcpy(body, payload + sizeof(r), len);
	if (body_len)
		*body_len = len;
	err = 0;
out:
	close(fd);
	return err;
}

int api_call(const struct sandbox *sb, uint16_t type, unsigned timeout_ms, int32_t *error,
	     struct api_status *status)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct api_status st;
	size_t n = 0;
	pid_t peer = 0;
	int err = sandbox_path(sb, "api.sock", path, sizeof(path));

	if (err == 0)
		err = request(path, type, NULL, 0, timeout_ms, error, &st, sizeof(st), &n, &peer,
			      -1);
	if (err < 0 || !status)
		return err;
	if (*error == 0 && n < sizeof(st))
		return -EPROTO;
	memset(status, 0, sizeof(*status));
	if (*error == 0) {
		status->state = le32toh(st.state);
		status->ncpus = le32toh(st.ncpus);
		status->memory_mib = le64toh(st.memory_mib);
		status->uptime_ms = le64toh(st.uptime_ms);
		status->pid = peer; /* st.pid is the VMM's own view: 1 when jailed */
	}
	return 0;
}

static int snapshot(const char *api_path, uint32_t flags, const char *dir, int dir_fd,
		    const char *const *tops, unsigned ntops, unsigned timeout_ms,
		    struct api_snapshot_out *out, char *msg, size_t msg_len);

int api_snapshot(const struct sandbox *sb, uint32_t flags, const char *dir, int dir_fd,
		 const char *const *tops, unsigned ntops, unsigned timeout_ms,
		 struct api_snapshot_out *out, char *msg, size_t msg_len)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int err = sandbox_path(sb, "api.sock", path, sizeof(path));

	if (err < 0)
		return err;
	return snapshot(path, flags, dir, dir_fd, tops, ntops, timeout_ms, out, msg, msg_len);
}

/*
 * A fork's frozen RAM, as the VMM names it: "/proc/<pid>/fd/<n>[,...]" with its own pid, or
 * nothing. Each entry must be exactly that (a VMM is not trusted to name files: these are
 * mapped as the children's RAM), and is renamed with `peer`, its pid here.
 */
static int frozen_paths(const char *in, pid_t peer, char *out, size_t out_len)
{
	size_t pos = 0;

	out[0] = '\0';
	if (!*in)
		return 0;
	for (unsigned i = 0; i <= MEM_FILES_MAX; i++) {
		unsigned long fd;
		char *end;
		int n;

		if (strncmp(in, "/proc/", 6) != 0 || !(in[6] >= '1' && in[6] <= '9'))
			return -EPROTO;
		strtoul(in + 6, &end, 10);
		if (strncmp(end, "/fd/", 4) != 0 || !(end[4] >= '0' && end[4] <= '9'))
			return -EPROTO;
		fd = strtoul(end + 4, &end, 10);
		if ((*end != ',' && *end != '\0') || fd > INT_MAX)
			return -EPROTO;
		n = snprintf(out + pos, out_len - pos, "%s/proc/%d/fd/%lu", pos ? "," : "",
			     (int)peer, fd);
		if (n < 0 || (size_t)n >= out_len - pos)
			return -EPROTO;
		pos += (size_t)n;
		if (*end == '\0')
			return 0;
		in = end + 1;
	}
	return -EPROTO;
}

int api_snapshot_path(const char *api_path, uint32_t flags, const char *dir,
		      const char *const *tops, unsigned ntops, unsigned timeout_ms,
		      struct api_snapshot_out *out, char *msg, size_t msg_len)
{
	return snapshot(api_path, flags, dir, -1, tops, ntops, timeout_ms, out, msg, msg_len);
}

static int snapshot(const char *api_path, uint32_t flags, const char *dir, int dir_fd,
		    const char *const *tops, unsigned ntops, unsigned timeout_ms,
		    struct api_snapshot_out *out, char *msg, size_t msg_len)
{
	uint8_t req[API_PAYLOAD_MAX], body[API_ERROR_MSG_MAX + sizeof(struct api_snapshot_result)];
	struct api_snapshot_req h = {.flags = htole32(flags), .nstrings = htole32(1 + ntops)};
	struct api_snapshot_result res;
	size_t len = sizeof(h), n = 0;
	int32_t error = 0;
	pid_t peer = 0;
	int err;

	memset(out, 0, sizeof(*out));
	msg[0] = '\0';
	memcpy(req, &h, sizeof(h));
	for (unsigned i = 0; i <= ntops; i++) {
		const char *s = i == 0 ? dir : tops[i - 1];
		size_t sl = strlen(s) + 1;

		if (sl > sizeof(req) - len)
			return -E2BIG;
		memcpy(req + len, s, sl);
		len += sl;
	}
	err = request(api_path, API_SNAPSHOT, req, (uint32_t)len, timeout_ms, &error, body,
		      sizeof(body) - 1, &n, &peer, dir_fd);
	if (err < 0)
		return err;
	body[n] = '\0';
	if (error > 0 || error < -4095)
		return -EPROTO; /* not an errno */
	if (error) {
		snprintf(msg, msg_len, "%s", n ? (char *)body : strerror(-error));
		return error;
	}
	if (n < sizeof(res))
		return -EPROTO;
	memcpy(&res, body, sizeof(res));
	out->pause_us = le64toh(res.pause_us);
	out->total_us = le64toh(res.total_us);
	out->state_bytes = le64toh(res.state_bytes);
	out->memory_bytes = le64toh(res.memory_bytes);
	memcpy(out->memory_sha256, res.memory_sha256, sizeof(out->memory_sha256));
	return frozen_paths((char *)body + sizeof(res), peer, out->memory_path,
			    sizeof(out->memory_path));
}
