/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for virtio-vsock (vmm/virtio/vsock.c, vsock_conn.c): the packet header
 * checks and the connection state machine, with a hostile guest on one side and hostile host
 * clients on the other. The whole device runs as in the unit test: fake guest RAM, the
 * virtio-mmio registers, real unix sockets for the host side, and this thread as the I/O
 * thread running the VM's event loop. No KVM.
 *
 * The input is a script of steps; each starts with a byte whose low 3 bits say what:
 *   0  the guest sends a raw packet: how much of its header it sends (44 or less: a broken
 *      queue), a 44-byte header as is, a u16 payload length (bit 15: header and payload in two
 *      descriptors) and the payload
 *   1  the guest sends a well-formed packet (CID 3 to CID 2, stream): op, guest and host port
 *      (from small tables, so ports meet), flags, credit, a u8 payload length and the payload
 *   2  a host client connects to vsock.sock and writes "CONNECT <port>\n" (port from a table),
 *      or (bit 7 of the next byte) a line of its own bytes
 *   3  a host client (the one the next byte names) writes bytes, shuts down or closes
 *   4  the same for the far end of a connection the guest opened to host port 1234
 *   5  the next byte's bits: the guest stops or starts giving rx buffers back (credit and
 *      buffers run out); the device is quiesced and saved as for a snapshot; the config
 *      space is read
 *   6  time passes: every handshake expires (or, bit 7, a transport reset as after a restore)
 *   7  the driver resets the device and sets it up again
 * After each step the event loop runs until idle, the host sides read what they were sent,
 * and every packet the device put in the rx queue is checked: a used length inside the
 * buffer, the header's length matching it, to CID 3, stream, from CID 2 (or an RST).
 *
 * Built and run by tests/fuzz/run.sh vsock; seeds in tests/fuzz/corpus/vsock/.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_vsock.h>

#include "fake_driver.h"
#include "fake_vm.h"
#include "virtio/virtio.h"
#include "virtio/vsock.h"

#define QSIZE	   16u
#define RX_BUF_GPA 0x20000u
#define RX_BUF_LEN (44u + 4096u)
#define EV_BUF_GPA 0x40000u
#define TX_BUF_GPA 0x50000u
#define TX_MAX	   (44u + 0x10000u)
#define RAM_LEN	   (TX_BUF_GPA + TX_MAX + 0x1000u)
#define HOST_PORT  1234u /* a listener on vsock.sock_1234 answers the guest's requests */
#define NFDS	   4u
#define PUMP_MAX   256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_vsock: %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static struct vm vm;
static uint8_t *ram;
static struct virtio_dev *vdev;
static char dir[64], sock_path[96];
static int host_listen_fd = -1;
static int clients[NFDS], peers[NFDS];
static struct fake_driver drv;
static bool rx_repost;

/* The input, consumed step by step. */
struct fuzz_in {
	const uint8_t *p;
	size_t left;
};

static bool take(struct fuzz_in *in, void *out, size_t n)
{
	if (in->left < n)
		return false;
	memcpy(out, in->p, n);
	in->p += n;
	in->left -= n;
	return true;
}

/* The driver's set-up: features, the three queues, every rx and event buffer, DRIVER_OK. */
static void fuzz_driver_setup(void)
{
	memset(ram, 0, TX_BUF_GPA);
	rx_repost = true;
	fdrv_init(&drv, &vm, &vm.mem, vdev);
	/* The high word only (VERSION_1): no EVENT_IDX. From a reset FEATURES_OK always holds,
	 * and if it did not, the device would say so in what follows. */
	(void)fdrv_setup(&drv, ~0ull << 32, 3, QSIZE);
	for (uint16_t i = 0; i < QSIZE; i++)
		fdrv_post(&drv, 0, i, RX_BUF_GPA + (uint64_t)i * RX_BUF_LEN, RX_BUF_LEN,
			  VRING_DESC_F_WRITE);
	for (uint16_t i = 0; i < 4; i++)
		fdrv_post(&drv, 2, i, EV_BUF_GPA + i * 16u, 16, VRING_DESC_F_WRITE);
	fdrv_driver_ok(&drv);
}

/* Take and check every packet in the rx queue; give the buffers back unless told not to. */
static void fuzz_rx_drain(void)
{
	struct vring_used_elem e;
	bool reposted = false;

	while (fdrv_next_used(&drv, 0, &e.id, &e.len)) {
		struct virtio_vsock_hdr h;

		fuzz_check(e.id < QSIZE);
		fuzz_check(e.len >= VSOCK_HDR_LEN && e.len <= RX_BUF_LEN);
		memcpy(&h, ram + RX_BUF_GPA + (uint64_t)e.id * RX_BUF_LEN, sizeof(h));
		fuzz_check(h.len == e.len - VSOCK_HDR_LEN);
		fuzz_check(h.src_cid == VSOCK_HOST_CID || h.op == VIRTIO_VSOCK_OP_RST);
		fuzz_check(h.dst_cid == VSOCK_GUEST_CID && h.type == VIRTIO_VSOCK_TYPE_STREAM);
		fuzz_check(h.op >= VIRTIO_VSOCK_OP_REQUEST &&
			   h.op <= VIRTIO_VSOCK_OP_CREDIT_REQUEST);
		fuzz_check(h.op == VIRTIO_VSOCK_OP_RW || h.len == 0);
		if (rx_repost) {
			fdrv_post(&drv, 0, (uint16_t)e.id, RX_BUF_GPA + (uint64_t)e.id * RX_BUF_LEN,
				  RX_BUF_LEN, VRING_DESC_F_WRITE);
			reposted = true;
		}
	}
	/* tx and event chains come back too; the event buffers are offered again */
	drv.q[1].used_seen = fdrv_used(&drv, 1)->idx;
	while (fdrv_next_used(&drv, 2, &e.id, &e.len)) {
		fuzz_check(e.id < 4 && e.len <= 16);
		fdrv_post(&drv, 2, (uint16_t)e.id, EV_BUF_GPA + e.id * 16u, 16, VRING_DESC_F_WRITE);
	}
	if (reposted)
		fdrv_kick(&drv, 0);
}

/* Host sides: accept the guest's connections, read whatever they were sent. */
static void fuzz_host_read(void)
{
	char buf[4096];
	int fd;

	while ((fd = accept4(host_listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		unsigned i;

		for (i = 0; i < NFDS && peers[i] >= 0; i++)
			;
		if (i == NFDS)
			close(fd);
		else
			peers[i] = fd;
	}
	for (unsigned i = 0; i < 2 * NFDS; i++) {
		int *f = i < NFDS ? &clients[i] : &peers[i - NFDS];
		ssize_t n;

		while (*f >= 0 && (n = recv(*f, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			;
	}
}

/* Run the loop until idle, reading the host sides and the rx queue between rounds (not
 * fdrv_pump: the host sides and the driver take their turn in every round, and a quiet round
 * is checked twice). */
static void fuzz_pump(void)
{
	for (int i = 0; i < PUMP_MAX; i++) {
		int n = evloop_run_once(&vm.loop, 0);

		fuzz_host_read();
		fuzz_rx_drain();
		if (n <= 0 && evloop_run_once(&vm.loop, 0) <= 0)
			return;
	}
}

/* The guest sends header `h` (hdr_len bytes of it) and `len` payload bytes. */
static void tx(const void *h, uint32_t hdr_len, const uint8_t *payload, uint32_t len, bool split)
{
	memcpy(ram + TX_BUF_GPA, h, hdr_len);
	if (len)
		memcpy(ram + TX_BUF_GPA + hdr_len, payload, len);
	if (!split || !len) {
		fdrv_desc(&drv, 1)[0] =
			(struct vring_desc){.addr = TX_BUF_GPA, .len = hdr_len + len};
	} else {
		fdrv_desc(&drv, 1)[0] = (struct vring_desc){
			.addr = TX_BUF_GPA, .len = hdr_len, .flags = VRING_DESC_F_NEXT, .next = 1};
		fdrv_desc(&drv, 1)[1] =
			(struct vring_desc){.addr = TX_BUF_GPA + hdr_len, .len = len};
	}
	fdrv_offer(&drv, 1, 0);
	fdrv_kick(&drv, 1);
}

static void step_raw(struct fuzz_in *in)
{
	struct virtio_vsock_hdr h;
	uint16_t len;
	uint8_t hdr_len;

	if (!take(in, &hdr_len, 1) || !take(in, &h, sizeof(h)) || !take(in, &len, sizeof(len)))
		return;
	if (hdr_len > sizeof(h))
		hdr_len = sizeof(h);
	if ((len & 0x7fff) > in->left)
		len = (uint16_t)((len & 0x8000) | in->left);
	tx(&h, hdr_len, in->p, len & 0x7fff, len & 0x8000);
	in->p += len & 0x7fff;
	in->left -= len & 0x7fff;
}

static void step_packet(struct fuzz_in *in)
{
	static const uint32_t gports[] = {52, 1000, 0xffffffffu, 0};
	static const uint32_t hports[] = {HOST_PORT, VSOCK_PORT_FIRST, VSOCK_PORT_FIRST + 1, 9};
	struct {
		uint8_t op, ports, flags, credit, len;
	} s;
	struct virtio_vsock_hdr h;

	if (!take(in, &s, sizeof(s)))
		return;
	if (s.len > in->left)
		s.len = (uint8_t)in->left;
	h = (struct virtio_vsock_hdr){
		.src_cid = VSOCK_GUEST_CID,
		.dst_cid = VSOCK_HOST_CID,
		.src_port = gports[s.ports & 3],
		.dst_port = hports[(s.ports >> 2) & 3],
		.len = s.len,
		.type = VIRTIO_VSOCK_TYPE_STREAM,
		.op = (uint16_t)(s.op % 8),
		.flags = s.flags,
		.buf_alloc = s.credit & 0x80 ? (uint32_t)(s.credit & 0x7f) << 4 : 1u << 20,
		.fwd_cnt = (uint32_t)(s.ports >> 4) << 8,
	};
	tx(&h, sizeof(h), in->p, s.len, s.ports & 0x80);
	in->p += s.len;
	in->left -= s.len;
}

static void step_connect(struct fuzz_in *in)
{
	static const uint32_t ports[] = {52, 1000, 7, 0xffffffffu};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char line[64];
	uint8_t how, n = 0;
	unsigned i;
	int fd;

	if (!take(in, &how, 1))
		return;
	for (i = 0; i < NFDS && clients[i] >= 0; i++)
		;
	if (i == NFDS)
		return;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fuzz_check(fd >= 0);
	strcpy(sa.sun_path, sock_path);
	fuzz_check(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	if (how & 0x80) {
		n = how & 0x1f;
		if (n > in->left)
			n = (uint8_t)in->left;
		memcpy(line, in->p, n);
		in->p += n;
		in->left -= n;
	} else {
		n = (uint8_t)snprintf(line, sizeof(line), "CONNECT %u\n", ports[how & 3]);
	}
	if (n && send(fd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		fuzz_check(errno == EPIPE || errno == ECONNRESET || errno == EAGAIN);
	clients[i] = fd;
}

/* A host side writes bytes (n > 0), shuts its write side (0) or closes (255). */
static void step_host_write(struct fuzz_in *in, int *fds)
{
	uint8_t s[2];
	int *f;

	if (!take(in, s, 2))
		return;
	f = &fds[s[0] % NFDS];
	if (*f < 0)
		return;
	if (s[1] == 0) {
		shutdown(*f, SHUT_WR);
	} else if (s[1] == 255) {
		close(*f);
		*f = -1;
	} else {
		uint8_t n = s[1] > in->left ? (uint8_t)in->left : s[1];

		if (n && send(*f, in->p, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			fuzz_check(errno == EPIPE || errno == ECONNRESET || errno == EAGAIN);
		in->p += n;
		in->left -= n;
	}
}

static void step_time(struct fuzz_in *in)
{
	struct vsock_dev *d = vdev->dev;
	uint8_t how;

	if (!take(in, &how, 1))
		return;
	if (how & 0x80) {
		fuzz_check(vsock_transport_reset(vdev) == 0);
		return;
	}
	pthread_mutex_lock(&d->lock);
	vsock_conn_expire(d, vmm_now_ns() / 1000000u + VSOCK_HANDSHAKE_MS + 1);
	d->reset_ack_deadline_ms = 0; /* so does the wait for the guest to handle a reset */
	vsock_run(d);
	vsock_unlock(d);
}

/* The driver's side: rx buffers withheld or given back, a quiesce, config reads. */
static void step_driver(struct fuzz_in *in)
{
	uint8_t how, cfg[8];

	if (!take(in, &how, 1))
		return;
	if (how & 1) {
		rx_repost = !rx_repost;
		fdrv_kick(&drv, 0);
	}
	if (how & 2) {
		/* as for a snapshot: quiesced, then saved (and the guest goes on) */
		struct snap_writer w;
		const void *buf;
		size_t len;

		fuzz_check(virtio_mmio_quiesce(vdev) == 0);
		fuzz_check(snapw_init(&w) == 0);
		virtio_mmio_save(vdev, 0, &w);
		fuzz_check(snapw_finish(&w, &buf, &len) == 0 && len > 0);
		snapw_free(&w);
	}
	if (how & 4) {
		/* the whole config at once, or one byte of it (or past it: zeros) */
		virtio_mmio_access(vdev, VIRTIO_MMIO_CONFIG, cfg, 8, false);
		fuzz_check(cfg[0] == VSOCK_GUEST_CID && !cfg[1] && !cfg[4]);
		virtio_mmio_access(vdev, VIRTIO_MMIO_CONFIG + (how >> 4), cfg, 1, false);
		fuzz_check(cfg[0] == ((how >> 4) == 0 ? VSOCK_GUEST_CID : 0));
	}
}

static void fuzz_close_host(void)
{
	for (unsigned i = 0; i < NFDS; i++) {
		if (clients[i] >= 0)
			close(clients[i]);
		if (peers[i] >= 0)
			close(peers[i]);
		clients[i] = peers[i] = -1;
	}
}

static void fuzz_cleanup(void)
{
	char path[128];

	snprintf(path, sizeof(path), "%s_%u", sock_path, HOST_PORT);
	unlink(path);
	rmdir(dir);
}

/* Once per process: RAM, the directory and the host's listener for guest connections. */
static void fuzz_setup(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	ram = malloc(RAM_LEN);
	fuzz_check(ram != NULL);
	snprintf(dir, sizeof(dir), "%s/fuzz_vsock.XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	fuzz_check(mkdtemp(dir) != NULL);
	snprintf(sock_path, sizeof(sock_path), "%s/v.sock", dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_%u", sock_path, HOST_PORT);
	host_listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	fuzz_check(host_listen_fd >= 0);
	fuzz_check(bind(host_listen_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	fuzz_check(listen(host_listen_fd, 64) == 0);
	for (unsigned i = 0; i < NFDS; i++)
		clients[i] = peers[i] = -1;
	atexit(fuzz_cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char cmdline[256];
	struct fuzz_in in = {data, size};
	uint8_t kind;

	if (!ram)
		fuzz_setup();
	fake_vm_init(&vm);
	memset(ram, 0, RAM_LEN);
	mem_layout(&vm.mem, ram, RAM_LEN);
	vm.mem.fd = -1;
	strcpy(cmdline, "console=ttyS0");
	fuzz_check(vsock_add(&vm, sock_path, cmdline, sizeof(cmdline), &vdev) == 0);
	fuzz_driver_setup();
	fuzz_pump();
	while (take(&in, &kind, 1)) {
		switch (kind & 7) {
		case 0:
			step_raw(&in);
			break;
		case 1:
			step_packet(&in);
			break;
		case 2:
			step_connect(&in);
			break;
		case 3:
			step_host_write(&in, clients);
			break;
		case 4:
			step_host_write(&in, peers);
			break;
		case 5:
			step_driver(&in);
			break;
		case 6:
			step_time(&in);
			break;
		case 7:
			fdrv_wr(&drv, VIRTIO_MMIO_STATUS, 0);
			fuzz_pump();
			fuzz_driver_setup();
			break;
		}
		fuzz_pump();
	}
	fuzz_close_host();
	virtio_mmio_destroy(vdev);
	fuzz_host_read(); /* accept and drop what is left in the backlog */
	fuzz_close_host();
	fake_vm_destroy(&vm);
	return 0;
}
