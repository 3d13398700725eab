/* SPDX-License-Identifier: Apache-2.0 */
/* The client side of api.sock (wire/api_proto.h): one connection per call, with a timeout. */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "api_proto.h"
#include "client.h"

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

int api_call(const struct sandbox *sb, uint16_t type, unsigned timeout_ms, int32_t *error,
	     struct api_status *status)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	uint64_t deadline = now_ms() + timeout_ms;
	struct api_hdr h = {
		.magic = htole32(API_MAGIC),
		.version = htole16(API_VERSION),
		.type = htole16(type),
		.id = htole32(1),
	};
	uint8_t payload[API_PAYLOAD_MAX];
	struct api_result r;
	uint32_t len;
	int fd, err;

	if ((err = sandbox_path(sb, "api.sock", addr.sun_path, sizeof(addr.sun_path))) < 0)
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
	if (send(fd, &h, sizeof(h), MSG_NOSIGNAL) != (ssize_t)sizeof(h)) {
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
	if (status) {
		struct api_status st;

		if (*error == 0 && len < sizeof(r) + sizeof(st)) {
			err = -EPROTO;
			goto out;
		}
		memset(status, 0, sizeof(*status));
		if (*error == 0) {
			memcpy(&st, payload + sizeof(r), sizeof(st));
			status->state = le32toh(st.state);
			status->ncpus = le32toh(st.ncpus);
			status->memory_mib = le64toh(st.memory_mib);
			status->uptime_ms = le64toh(st.uptime_ms);
			status->pid = le32toh(st.pid);
		}
	}
	err = 0;
out:
	close(fd);
	return err;
}
