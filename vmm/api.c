/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control socket (--api PATH): a unix stream socket served on the I/O thread through
 * vm->loop, speaking wire/api_proto.h. Requests are small and answered at once, in order; a
 * client that breaks the framing is disconnected, never trusted. Only the VMM's own user (or
 * root) may connect: the socket file is made 0600 and every peer's credentials are checked.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api_proto.h"
#include "vmm.h"

#define API_CONNS_MAX	    16
#define API_PAUSE_MS	    2000
#define API_MSG_MAX	    (sizeof(struct api_hdr) + API_PAYLOAD_MAX)
#define API_REPLY_EXTRA_MAX API_ERROR_MSG_MAX

struct api_conn {
	struct api *api;
	struct ev_source src;
	int passed_fd; /* the last fd the client sent (SCM_RIGHTS), -1: none */
	uint32_t have; /* bytes of buf filled */
	uint8_t buf[API_MSG_MAX];
	struct api_conn *next;
};

struct api {
	struct vm *vm;
	struct ev_source listen_src;
	int listen_fd;
	char *path;
	uint64_t start_ns;
	unsigned nconns;
	struct api_conn *conns;
	struct log_ratelimit rl;
};

static const struct {
	const char *name;
	uint32_t min_len;
} api_types[] = {
#define API_ENTRY(n, value, min) [value] = {#n, min},
	API_REQUESTS(API_ENTRY)
#undef API_ENTRY
};

static void api_conn_close(struct api_conn *c)
{
	struct api *api = c->api;

	for (struct api_conn **p = &api->conns; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			break;
		}
	}
	api->nconns--;
	evloop_del(&api->vm->loop, &c->src);
	close(c->src.fd);
	if (c->passed_fd >= 0)
		close(c->passed_fd);
	free(c);
}

/* Send one reply: the header, api_result, then `extra_len` bytes of `extra`. The reply is
 * small and the client waits for it; a peer that does not take it whole is dropped. */
static int api_reply(struct api_conn *c, const struct api_hdr *req, int32_t error,
		     const void *extra, uint32_t extra_len)
{
	uint8_t msg[sizeof(struct api_hdr) + sizeof(struct api_result) + API_REPLY_EXTRA_MAX];
	struct api_hdr h = {
		.magic = htole32(API_MAGIC),
		.version = req->version, /* the request's: 1 or 2 (api_proto.h) */
		.type = htole16((uint16_t)(le16toh(req->type) | API_REPLY)),
		.id = req->id,
		.len = htole32((uint32_t)sizeof(struct api_result) + extra_len),
	};
	struct api_result r = {.error = (int32_t)htole32((uint32_t)error)};
	size_t len = sizeof(h) + sizeof(r) + extra_len;
	ssize_t n;

	if (extra_len > API_REPLY_EXTRA_MAX)
		return -EINVAL;
	memcpy(msg, &h, sizeof(h));
	memcpy(msg + sizeof(h), &r, sizeof(r));
	if (extra_len)
		memcpy(msg + sizeof(h) + sizeof(r), extra, extra_len);
	n = send(c->src.fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	return n == (ssize_t)len ? 0 : -EPIPE;
}

/* SNAPSHOT's payload: its flags and strings (see vmm.h). */
int api_snapshot_parse(const uint8_t *payload, uint32_t len, struct snapshot_req *sr, char *msg,
		       size_t msg_len)
{
	struct api_snapshot_req req;
	const uint8_t *p = payload + sizeof(req), *end = payload + len;
	uint32_t nstrings;

	memset(sr, 0, sizeof(*sr));
	sr->dir_fd = -1;
	memcpy(&req, payload, sizeof(req));
	nstrings = le32toh(req.nstrings);
	if (nstrings < 1 || nstrings > 1 + SNAP_TOPS_MAX ||
	    (le32toh(req.flags) & ~API_SNAPSHOT_FLAGS)) {
		snprintf(msg, msg_len, "bad SNAPSHOT request: %u strings, flags %#x", nstrings,
			 le32toh(req.flags));
		return -EINVAL;
	}
	for (uint32_t i = 0; i < nstrings; i++) {
		const uint8_t *nul = p < end ? memchr(p, 0, (size_t)(end - p)) : NULL;

		if (!nul) {
			snprintf(msg, msg_len, "bad SNAPSHOT request: string %u is not terminated",
				 i);
			return -EINVAL;
		}
		if (i == 0)
			sr->dir = (const char *)p;
		else
			sr->new_tops[sr->ntops++] = (const char *)p;
		p = nul + 1;
	}
	sr->stop = le32toh(req.flags) & API_SNAPSHOT_STOP;
	sr->live = le32toh(req.flags) & API_SNAPSHOT_LIVE;
	sr->durable = le32toh(req.flags) & API_SNAPSHOT_DURABLE;
	return 0;
}

/* SNAPSHOT: parse the request, write the snapshot, answer with the figures or the message
 * saying what failed. */
static int api_snapshot(struct api_conn *c, const struct api_hdr *h, const uint8_t *payload)
{
	struct snapshot_req sr;
	struct snapshot_stats st;
	struct api_snapshot_result res;
	char msg[API_ERROR_MSG_MAX] = "";
	int err;

	err = api_snapshot_parse(payload, le32toh(h->len), &sr, msg, sizeof(msg));
	if (err < 0)
		return api_reply(c, h, err, msg, (uint32_t)strlen(msg) + 1);
	/* Host paths: inside the jail they must lie in its root. The directory may instead
	 * come as an fd (its string then only names it in messages). */
	for (unsigned i = 0; i <= sr.ntops; i++) {
		const char **path = i == 0 ? &sr.dir : &sr.new_tops[i - 1];
		const char *in = i == 0 && c->passed_fd >= 0 ? *path : jail_path(*path);

		if (!in) {
			snprintf(msg, sizeof(msg),
				 "%.200s: outside the VMM's jail %.200s: snapshot files go inside "
				 "it",
				 *path, jail_dir());
			return api_reply(c, h, -EXDEV, msg, (uint32_t)strlen(msg) + 1);
		}
		*path = in;
	}
	sr.dir_fd = c->passed_fd;
	c->passed_fd = -1; /* this request's, closed below */
	err = vm_snapshot(c->api->vm, &sr, &st, msg, sizeof(msg));
	if (sr.dir_fd >= 0)
		close(sr.dir_fd);
	if (err < 0) {
		log_warn("snapshot to %s failed: %s", sr.dir, msg);
		return api_reply(c, h, err, msg, (uint32_t)strlen(msg) + 1);
	}
	log_info("snapshot written to %s: paused %.3f ms, %llu MiB of memory in %.1f ms", sr.dir,
		 (double)st.pause_ns / 1e6, (unsigned long long)(st.memory_bytes >> 20),
		 (double)st.total_ns / 1e6);
	res = (struct api_snapshot_result){.pause_us = htole64(st.pause_ns / 1000),
					   .total_us = htole64(st.total_ns / 1000),
					   .state_bytes = htole64(st.state_bytes),
					   .memory_bytes = htole64(st.memory_bytes)};
	memcpy(res.memory_sha256, st.memory_sha256, sizeof(res.memory_sha256));
	{
		/* A version 1 client's result ends before the digest. */
		size_t rlen = le16toh(h->version) < 2
				      ? offsetof(struct api_snapshot_result, memory_sha256)
				      : sizeof(res);
		uint8_t body[sizeof(res) + sizeof(st.memory_path)];
		size_t plen = strnlen(st.memory_path, sizeof(st.memory_path) - 1) + 1;

		memcpy(body, &res, rlen);
		memcpy(body + rlen, st.memory_path, plen - 1);
		body[rlen + plen - 1] = '\0';
		return api_reply(c, h, 0, body, (uint32_t)(rlen + plen));
	}
}

static int api_handle(struct api_conn *c, const struct api_hdr *h, const uint8_t *payload)
{
	struct vm *vm = c->api->vm;
	uint16_t type = le16toh(h->type);
	struct api_status st;
	int err;

	switch (type) {
	case API_STATUS:
		memset(&st, 0, sizeof(st));
		st.state = htole32(atomic_load(&vm->stopping) ? API_STATE_STOPPING
				   : vcpu_paused(vm)	      ? API_STATE_PAUSED
							      : API_STATE_RUNNING);
		st.ncpus = htole32(vm->ncpus);
		st.memory_mib = htole64(vm->mem.ram_len >> 20);
		st.uptime_ms = htole64((vmm_now_ns() - c->api->start_ns) / 1000000);
		st.pid = htole32((uint32_t)getpid());
		return api_reply(c, h, 0, &st, sizeof(st));
	case API_PAUSE:
		err = vcpu_pause_all(vm, API_PAUSE_MS);
		if (err == 0)
			log_info("paused through the API");
		return api_reply(c, h, err, NULL, 0);
	case API_RESUME:
		vcpu_resume_all(vm);
		log_info("resumed through the API");
		return api_reply(c, h, 0, NULL, 0);
	case API_SHUTDOWN:
		err = api_reply(c, h, 0, NULL, 0);
		vm_request_stop(vm, VM_EXIT_SHUTDOWN, "shut down through the API");
		return err;
	case API_TOUCH_MARK:
		return api_reply(c, h, mem_touched_mark(&vm->mem), NULL, 0);
	case API_SNAPSHOT:
		return api_snapshot(c, h, payload);
	default:
		return api_reply(c, h, -EOPNOTSUPP, NULL, 0);
	}
}

/* A request's header (see vmm.h). */
int api_msg_len(const struct api_hdr *h)
{
	uint32_t len = le32toh(h->len);
	uint16_t type = le16toh(h->type);

	if (le32toh(h->magic) != API_MAGIC || le16toh(h->version) < API_VERSION_MIN ||
	    le16toh(h->version) > API_VERSION || len > API_PAYLOAD_MAX || (type & API_REPLY))
		return -EPROTO;
	if (type < sizeof(api_types) / sizeof(api_types[0]) && api_types[type].name &&
	    len < api_types[type].min_len)
		return -EPROTO;
	return (int)(sizeof(*h) + len);
}

/* recv into c->buf, keeping the one fd a request may come with (SNAPSHOT's directory): the
 * last one sent wins, any other is closed at once. */
static ssize_t api_recv(struct api_conn *c)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	struct iovec iov = {.iov_base = c->buf + c->have, .iov_len = sizeof(c->buf) - c->have};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = cm.buf,
			   .msg_controllen = sizeof(cm.buf)};
	ssize_t n = recvmsg(c->src.fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	if (n < 0)
		return n;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
		size_t nfds;
		int fds[4];

		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		nfds = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (nfds > 4)
			nfds = 4;
		memcpy(fds, CMSG_DATA(h), nfds * sizeof(int));
		for (size_t i = 0; i < nfds; i++) {
			if (c->passed_fd >= 0)
				close(c->passed_fd);
			c->passed_fd = fds[i];
		}
	}
	return n;
}

static void api_conn_event(struct ev_source *src, uint32_t events)
{
	struct api_conn *c = src->opaque;
	struct api_hdr h;
	ssize_t n;
	int len;

	n = api_recv(c);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		goto close;
	c->have += (uint32_t)n;
	while (c->have >= sizeof(h)) {
		memcpy(&h, c->buf, sizeof(h));
		len = api_msg_len(&h);
		if (len < 0) {
			if (log_ratelimit_ok(&c->api->rl, 5))
				log_warn("api: malformed request header: connection closed");
			goto close;
		}
		if (c->have < (uint32_t)len)
			return; /* the rest of the payload has not arrived */
		if (api_handle(c, &h, c->buf + sizeof(h)) < 0)
			goto close;
		c->have -= (uint32_t)len;
		memmove(c->buf, c->buf + len, c->have);
	}
	return;
close:
	api_conn_close(c);
}

static void api_accept(struct ev_source *src, uint32_t events)
{
	struct api *api = src->opaque;
	struct ucred cred;
	socklen_t cred_len = sizeof(cred);
	struct api_conn *c;
	int fd, err;

	fd = accept4(src->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		err = errno;
		/* At the fd limit the client stays in the backlog and the listener readable:
		 * rest a while rather than spin (it is taken once fds are free again). */
		if (evloop_accept_backoff(&api->vm->loop, src, err) &&
		    log_ratelimit_ok(&api->rl, 1))
			log_warn("api: cannot accept a connection (%s): trying again in %u ms",
				 strerror(err), EVLOOP_ACCEPT_BACKOFF_MS);
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) < 0 ||
	    (cred.uid != 0 && cred.uid != geteuid())) {
		if (log_ratelimit_ok(&api->rl, 5))
			log_warn("api: connection from another user refused");
		close(fd);
		return;
	}
	if (api->nconns >= API_CONNS_MAX || !(c = calloc(1, sizeof(*c)))) {
		if (log_ratelimit_ok(&api->rl, 5))
			log_warn("api: too many connections: one refused");
		close(fd);
		return;
	}
	c->api = api;
	c->passed_fd = -1;
	if ((err = evloop_add(&api->vm->loop, &c->src, fd, EPOLLIN, api_conn_event, c)) < 0) {
		log_warn("api: cannot watch a connection: %s", strerror(-err));
		close(fd);
		free(c);
		return;
	}
	c->next = api->conns;
	api->conns = c;
	api->nconns++;
}

int api_create(struct vm *vm, const char *path, struct api **out)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct api *api;
	struct stat st;
	mode_t old_mask;
	int err;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		log_error("--api %s: a socket path is at most %zu bytes", path,
			  sizeof(addr.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(addr.sun_path, path);
	api = calloc(1, sizeof(*api));
	if (!api || !(api->path = strdup(path))) {
		free(api);
		return -ENOMEM;
	}
	api->vm = vm;
	api->start_ns = vmm_now_ns();
	api->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (api->listen_fd < 0) {
		err = -errno;
		goto fail;
	}
	/* A stale socket from a VMM that died is replaced; any other file is not touched. */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	old_mask = umask(077);
	err = bind(api->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ? -errno : 0;
	umask(old_mask);
	if (err < 0)
		goto fail;
	if (listen(api->listen_fd, 8) < 0) {
		err = -errno;
		unlink(path);
		goto fail;
	}
	err = evloop_add(&vm->loop, &api->listen_src, api->listen_fd, EPOLLIN, api_accept, api);
	if (err < 0) {
		unlink(path);
		goto fail;
	}
	*out = api;
	return 0;
fail:
	log_error("--api %s: %s", path, strerror(-err));
	if (api->listen_fd >= 0)
		close(api->listen_fd);
	free(api->path);
	free(api);
	return err;
}

void api_destroy(struct api *api)
{
	if (!api)
		return;
	while (api->conns)
		api_conn_close(api->conns);
	evloop_del(&api->vm->loop, &api->listen_src);
	close(api->listen_fd);
	if (jail_path(api->path))
		unlink(jail_path(api->path));
	free(api->path);
	free(api);
}
