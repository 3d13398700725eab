/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vsock-echo: a checksummed echo over vsock, the same guest program under our VMM and under
 * QEMU with vhost-vsock (tools/bench/vsock_qemu.sh; issue 13, item 5: are the emulated host's
 * stalls and triple faults under heavy vsock traffic ours or the emulation's?).
 *
 *   vsock-echo serve PORT
 *       in a Linux guest: accept one connection on vsock PORT, send back every byte, exit
 *       at its end of file.
 *   vsock-echo send TARGET PORT BYTES STALL_S
 *       on the host: connect, send BYTES of a fixed pseudo-random stream while reading the
 *       echo, and compare every byte that comes back with what was sent there. TARGET is unix:PATH
 * (our VMM's vsock socket: "CONNECT PORT\n", then "OK ...") or vsock:CID (AF_VSOCK, vhost-vsock).
 *       Fails when no byte moves for STALL_S seconds. Prints one line:
 *       "vsock-echo: ok bytes=N seconds=S mib_s=R" or "vsock-echo: FAIL <why> ...".
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

#define CHUNK (64u << 10)

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The stream: a 1 MiB block of splitmix64 words, repeated, each copy's first 8 bytes
 * replaced by its index, so a misplaced MiB shows too. Made and checked at memcpy speed: the
 * emulated host emulates every instruction of this side. */
#define BLOCK (1u << 20)
static uint8_t block[BLOCK];

static void block_init(void)
{
	uint64_t x = 0x243f6a8885a308d3ull;

	for (size_t i = 0; i < BLOCK; i += 8) {
		uint64_t z = (x += 0x9e3779b97f4a7c15ull);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		memcpy(block + i, &z, 8);
	}
}

/* The stream's bytes [off, off + len) into buf. */
static void fill(uint8_t *buf, uint64_t off, size_t len)
{
	while (len) {
		uint64_t in = off % BLOCK, idx = off / BLOCK;
		size_t n = BLOCK - in < len ? (size_t)(BLOCK - in) : len;

		memcpy(buf, block + in, n);
		for (uint64_t k = in; k < 8 && k < in + n; k++)
			buf[k - in] = (uint8_t)(idx >> (8 * k));
		buf += n;
		off += n;
		len -= n;
	}
}

static int serve(unsigned port)
{
	struct sockaddr_vm a = {
		.svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port};
	static uint8_t buf[CHUNK];
	int l = socket(AF_VSOCK, SOCK_STREAM, 0), c;
	uint64_t total = 0;

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0) {
		printf("vsock-echo: FAIL cannot listen on vsock port %u: %s\n", port,
		       strerror(errno));
		return 1;
	}
	printf("vsock-echo: listening on %u\n", port);
	fflush(stdout);
	c = accept(l, NULL, NULL);
	if (c < 0) {
		printf("vsock-echo: FAIL accept: %s\n", strerror(errno));
		return 1;
	}
	for (;;) {
		ssize_t n = read(c, buf, sizeof(buf)), off = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		while (off < n) {
			ssize_t w = write(c, buf + off, (size_t)(n - off));

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				printf("vsock-echo: FAIL write: %s\n", strerror(errno));
				return 1;
			}
			off += w;
		}
		total += (uint64_t)n;
	}
	printf("vsock-echo: served %llu bytes\n", (unsigned long long)total);
	return 0;
}

static int dial(const char *target, unsigned port)
{
	int fd;

	if (strncmp(target, "vsock:", 6) == 0) {
		struct sockaddr_vm a = {.svm_family = AF_VSOCK,
					.svm_cid = (unsigned)strtoul(target + 6, NULL, 10),
					.svm_port = port};

		fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			return -1;
		return fd;
	}
	if (strncmp(target, "unix:", 5) == 0) {
		struct sockaddr_un a = {.sun_family = AF_UNIX};
		char line[64];
		size_t got = 0;

		snprintf(a.sun_path, sizeof(a.sun_path), "%s", target + 5);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    dprintf(fd, "CONNECT %u\n", port) < 0)
			return -1;
		while (got < sizeof(line) - 1) { /* "OK <port>\n", byte by byte: no data after */
			if (read(fd, line + got, 1) != 1)
				return -1;
			if (line[got++] == '\n')
				break;
		}
		line[got] = 0;
		if (strncmp(line, "OK", 2) != 0)
			return -1;
		return fd;
	}
	errno = EINVAL;
	return -1;
}

static int send_echo(const char *target, unsigned port, uint64_t bytes, double stall)
{
	static uint8_t out[CHUNK], in[CHUNK], want[CHUNK];
	uint64_t sent = 0, recvd = 0;
	double t0 = now_s(), last = t0;
	int fd = -1;

	for (int tries = 0; tries < 600 && fd < 0; tries++) { /* the guest may still boot */
		if ((fd = dial(target, port)) < 0)
			usleep(100000);
	}
	if (fd < 0) {
		printf("vsock-echo: FAIL cannot connect to %s port %u for 60 s\n", target, port);
		return 1;
	}
	t0 = last = now_s();
	while (recvd < bytes) {
		struct pollfd p = {.fd = fd, .events = POLLIN | (sent < bytes ? POLLOUT : 0)};
		int r = poll(&p, 1, 1000);

		if (r < 0 && errno == EINTR)
			continue;
		if (now_s() - last > stall) {
			printf("vsock-echo: FAIL stall: no byte for %.0f s at sent=%llu "
			       "received=%llu\n",
			       stall, (unsigned long long)sent, (unsigned long long)recvd);
			return 1;
		}
		if (r <= 0)
			continue;
		if ((p.revents & POLLOUT) && sent < bytes) {
			size_t n = bytes - sent < CHUNK ? (size_t)(bytes - sent) : CHUNK;
			ssize_t w;

			fill(out, sent, n);
			w = send(fd, out, n, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w > 0) {
				sent += (uint64_t)w;
				last = now_s();
				if (sent == bytes)
					shutdown(fd, SHUT_WR);
			} else if (w < 0 && errno != EAGAIN) {
				printf("vsock-echo: FAIL send: %s\n", strerror(errno));
				return 1;
			}
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = recv(fd, in, sizeof(in), MSG_DONTWAIT);

			if (n == 0) {
				printf("vsock-echo: FAIL the echo ended at %llu of %llu bytes\n",
				       (unsigned long long)recvd, (unsigned long long)bytes);
				return 1;
			}
			if (n > 0) {
				fill(want, recvd, (size_t)n);
				if (memcmp(in, want, (size_t)n)) {
					size_t k = 0;

					while (in[k] == want[k])
						k++;
					printf("vsock-echo: FAIL the echo differs at byte %llu\n",
					       (unsigned long long)(recvd + k));
					return 1;
				}
				recvd += (uint64_t)n;
				last = now_s();
			} else if (errno != EAGAIN) {
				printf("vsock-echo: FAIL recv: %s\n", strerror(errno));
				return 1;
			}
		}
	}
	printf("vsock-echo: ok bytes=%llu seconds=%.1f mib_s=%.1f\n", (unsigned long long)bytes,
	       now_s() - t0, (double)bytes / 1048576.0 / (now_s() - t0));
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "serve"))
		return serve((unsigned)strtoul(argv[2], NULL, 10));
	block_init();
	if (argc == 6 && !strcmp(argv[1], "send"))
		return send_echo(argv[2], (unsigned)strtoul(argv[3], NULL, 10),
				 strtoull(argv[4], NULL, 0), strtod(argv[5], NULL));
	fprintf(stderr, "usage: vsock-echo serve PORT | send unix:PATH|vsock:CID PORT BYTES "
			"STALL_S\n");
	return 2;
}
