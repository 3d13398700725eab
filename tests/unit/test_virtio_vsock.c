/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm/virtio/vsock.c and vsock_conn.c: a fake guest driver posts rx buffers and sends packets
 * on the tx queue in fake guest RAM, real unix sockets play the host side, and the test runs
 * the VM's event loop itself (this thread is the I/O thread).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_vsock.h>

#include "fake_driver.h"
#include "fake_mem.h"
#include "fake_vm.h"
#include "virtio/virtio.h"
#include "virtio/vsock.h"

#define QSIZE	    128u
#define RX_BUF_GPA  0x100000u
#define RX_PAYLOAD  4096u
#define RX_BUF_LEN  (44u + RX_PAYLOAD)
#define TX_BUF_GPA  0x400000u
#define TX_SLOT_LEN 0x12000u
#define EV_BUF_GPA  0x300000u
#define GUEST_PORT  52u
#define HDR_LEN	    44u
#define OUR_BUF	    (256u * 1024)
#define BIG_BUF	    (1u << 20)

static struct vm vm;
static uint8_t *ram;
static struct virtio_dev *vdev;
static char dir[] = "/tmp/test_virtio_vsock.XXXXXX";
static char sock_path[80];
static char cmdline[256];
static struct fake_driver drv;
static bool rx_repost = true;

struct pkt {
	struct virtio_vsock_hdr h;
	uint32_t len; /* payload bytes */
	uint8_t data[RX_PAYLOAD];
};

/* Serve the event loop until it has nothing left to do. */
static void pump(void)
{
	cr_assert(fdrv_pump(&drv, 10000), "the event loop never goes idle");
}

/* Offer rx buffer `i` (device-writable, room for a header and RX_PAYLOAD bytes). */
static void post_rx(uint16_t i)
{
	fdrv_post(&drv, 0, i, RX_BUF_GPA + (uint64_t)i * RX_BUF_LEN, RX_BUF_LEN,
		  VRING_DESC_F_WRITE);
}

static void setup(void)
{
	fake_vm_init(&vm);
	ram = fake_mem_create(&vm.mem, 64 * MIB, 0);
	cr_assert(mkdtemp(dir) != NULL);
	snprintf(sock_path, sizeof(sock_path), "%s/vsock.sock", dir);
	strcpy(cmdline, "console=ttyS0");
	cr_assert(eq(int, vsock_add(&vm, sock_path, cmdline, sizeof(cmdline), &vdev), 0));
	rx_repost = true;

	/* The high word only (VERSION_1): no EVENT_IDX, an interrupt for every buffer. */
	fdrv_init(&drv, &vm, &vm.mem, vdev);
	cr_assert(fdrv_setup(&drv, ~0ull << 32, 3, QSIZE));
	for (uint16_t i = 0; i < QSIZE; i++)
		post_rx(i);
	for (uint16_t i = 0; i < 4; i++)
		fdrv_post(&drv, 2, i, EV_BUF_GPA + i * 16u, 16, VRING_DESC_F_WRITE);
	fdrv_driver_ok(&drv);
	cr_assert(not(fdrv_needs_reset(&drv)));
	pump();
}

static void teardown(void)
{
	char path[100];

	struct guest_mem ram_of_vm = vm.mem; /* vm_destroy forgets a fake RAM */

	vm_destroy(&vm);
	fake_mem_destroy(&ram_of_vm);
	fake_vm_destroy(&vm);
	snprintf(path, sizeof(path), "%s/vsock.sock_1234", dir);
	unlink(path);
	rmdir(dir);
	strcpy(dir, "/tmp/test_virtio_vsock.XXXXXX");
}

TestSuite(virtio_vsock, .init = setup, .fini = teardown);

/* The next packet the device put in the rx queue (and the buffer goes back, unless
 * rx_repost is off). False when there is none. */
static bool rx_next(struct pkt *p)
{
	struct vring_used_elem e;
	const uint8_t *buf;

	if (!fdrv_next_used(&drv, 0, &e.id, &e.len))
		return false;
	cr_assert(lt(u32, e.id, QSIZE));
	cr_assert(ge(u32, e.len, HDR_LEN));
	cr_assert(le(u32, e.len, RX_BUF_LEN));
	buf = ram + RX_BUF_GPA + (uint64_t)e.id * RX_BUF_LEN;
	memcpy(&p->h, buf, HDR_LEN);
	p->len = e.len - HDR_LEN;
	cr_assert(eq(u32, p->h.len, p->len));
	memcpy(p->data, buf + HDR_LEN, p->len);
	/* From the host, or an RST from whatever CID the guest addressed. */
	cr_assert(p->h.src_cid == 2 || p->h.op == VIRTIO_VSOCK_OP_RST);
	cr_assert(eq(u64, p->h.dst_cid, 3));
	cr_assert(eq(u16, p->h.type, VIRTIO_VSOCK_TYPE_STREAM));
	if (rx_repost) {
		post_rx((uint16_t)e.id);
		fdrv_kick(&drv, 0);
	}
	return true;
}

/* The next rx packet, which must be there, with op `op`. */
static void rx_expect(struct pkt *p, uint16_t op)
{
	pump();
	cr_assert(rx_next(p), "no packet (wanted op %u)", op);
	cr_assert(eq(u16, p->h.op, op));
}

static void rx_expect_none(void)
{
	struct pkt p;

	pump();
	cr_assert(not(rx_next(&p)), "unexpected packet op %u", p.h.op);
}

/* Send a packet as the guest: `segs` descriptors (1: header and payload together, 2: apart)
 * at the next tx slot. Whether the device gave the chain back. */
static bool tx_raw(const struct virtio_vsock_hdr *h, uint32_t hdr_len, const void *data,
		   uint32_t len, int segs)
{
	/* The device returns every tx chain at once: 32 two-descriptor slots go round. */
	static unsigned n;
	unsigned slot = n++ % (QSIZE / 2);
	uint16_t d0 = (uint16_t)(2 * slot), d1 = (uint16_t)(2 * slot + 1);
	uint64_t gpa = TX_BUF_GPA + (uint64_t)slot * TX_SLOT_LEN;

	cr_assert(le(u32, len, TX_SLOT_LEN - HDR_LEN));
	memcpy(ram + gpa, h, hdr_len);
	if (len)
		memcpy(ram + gpa + hdr_len, data, len);
	if (segs == 1 || !len) {
		fdrv_desc(&drv, 1)[d0] = (struct vring_desc){.addr = gpa, .len = hdr_len + len};
	} else {
		fdrv_desc(&drv, 1)[d0] = (struct vring_desc){
			.addr = gpa, .len = hdr_len, .flags = VRING_DESC_F_NEXT, .next = d1};
		fdrv_desc(&drv, 1)[d1] = (struct vring_desc){.addr = gpa + hdr_len, .len = len};
	}
	fdrv_offer(&drv, 1, d0);
	fdrv_kick(&drv, 1);
	pump();
	return fdrv_used(&drv, 1)->idx == drv.q[1].avail_idx;
}

static void tx_full(uint64_t src_cid, uint64_t dst_cid, uint16_t type, uint16_t op,
		    uint32_t guest_port, uint32_t host_port, uint32_t flags, uint32_t buf_alloc,
		    uint32_t fwd_cnt, const void *data, uint32_t len)
{
	struct virtio_vsock_hdr h = {
		.src_cid = src_cid,
		.dst_cid = dst_cid,
		.src_port = guest_port,
		.dst_port = host_port,
		.len = len,
		.type = type,
		.op = op,
		.flags = flags,
		.buf_alloc = buf_alloc,
		.fwd_cnt = fwd_cnt,
	};

	cr_assert(tx_raw(&h, HDR_LEN, data, len, 2), "the tx chain was not returned");
}

/* A well-formed packet from guest port `gp` to host port `hp`, advertising a big buffer and
 * `fwd_cnt`. */
static void tx(uint16_t op, uint32_t gp, uint32_t hp, uint32_t flags, uint32_t fwd_cnt,
	       const void *data, uint32_t len)
{
	tx_full(3, 2, VIRTIO_VSOCK_TYPE_STREAM, op, gp, hp, flags, BIG_BUF, fwd_cnt, data, len);
}

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	strcpy(sa.sun_path, path);
	cr_assert(eq(int, connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0), "%s: %s", path,
		  strerror(errno));
	return fd;
}

static void send_all(int fd, const void *buf, size_t len)
{
	cr_assert(eq(long, (long)send(fd, buf, len, MSG_NOSIGNAL), (long)len));
}

/* What the client can read now, up to `len` bytes; 0 at EOF, -1 when nothing is there. */
static long client_read(int fd, void *buf, size_t len)
{
	long n = recv(fd, buf, len, MSG_DONTWAIT);

	if (n < 0) {
		int err = errno;

		cr_assert(err == EAGAIN || err == ECONNRESET, "%s", strerror(err));
		return err == EAGAIN ? -1 : 0;
	}
	return n;
}

/* A host client connects to guest port `port`: returns its fd, the REQUEST's source port in
 * *host_port. */
static int host_connect(uint32_t port, uint32_t *host_port)
{
	char line[32];
	struct pkt p;
	int fd = unix_connect(sock_path);

	snprintf(line, sizeof(line), "CONNECT %u\n", port);
	send_all(fd, line, strlen(line));
	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	cr_assert(eq(u32, p.h.dst_port, port));
	cr_assert(eq(u32, p.h.buf_alloc, OUR_BUF));
	cr_assert(eq(u32, p.h.len, 0));
	*host_port = p.h.src_port;
	return fd;
}

/* host_connect, the guest accepts with a buffer of `buf_alloc`, the client reads "OK". */
static int host_establish(uint32_t port, uint32_t buf_alloc, uint32_t *host_port)
{
	char want[32], got[32] = {0};
	int fd = host_connect(port, host_port);

	tx_full(3, 2, VIRTIO_VSOCK_TYPE_STREAM, VIRTIO_VSOCK_OP_RESPONSE, port, *host_port, 0,
		buf_alloc, 0, NULL, 0);
	snprintf(want, sizeof(want), "OK %u\n", *host_port);
	cr_assert(eq(long, client_read(fd, got, strlen(want)), (long)strlen(want)));
	cr_assert(eq(str, got, want));
	return fd;
}

/* A unix listener at sock_path_`port`, for the guest's connections. */
static int host_listen(uint32_t port)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_%u", sock_path, port);
	cr_assert(eq(int, bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0));
	cr_assert(eq(int, listen(fd, 2048), 0));
	return fd;
}

Test(virtio_vsock, identity_and_config)
{
	uint64_t cid = 0;

	cr_assert(eq(str, cmdline, "console=ttyS0 virtio_mmio.device=4K@0xd0000000:5"));
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_VSOCK));
	virtio_mmio_access(vdev, VIRTIO_MMIO_CONFIG, (uint8_t *)&cid, 8, false);
	cr_assert(eq(u64, cid, 3));
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_SEL, 2);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_QUEUE_NUM_MAX), 256));
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_SEL, 3);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_QUEUE_NUM_MAX), 0));
}

Test(virtio_vsock, a_live_socket_is_not_taken_over)
{
	struct vm other;
	struct virtio_dev *v2;
	char line[256] = "";

	fake_vm_init(&other);
	other.mem = vm.mem;
	cr_assert(eq(int, vsock_add(&other, sock_path, line, sizeof(line), &v2), -EADDRINUSE));
	fake_vm_destroy(&other);
}

Test(virtio_vsock, host_connect_and_data_both_ways)
{
	uint32_t hp;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	char buf[64] = {0};
	struct pkt p;

	cr_assert(eq(u32, hp, 1024), "host ports count up from 1024");
	send_all(fd, "hello", 5);
	rx_expect(&p, VIRTIO_VSOCK_OP_RW);
	cr_assert(eq(u32, p.len, 5));
	cr_assert(eq(int, memcmp(p.data, "hello", 5), 0));
	cr_assert(eq(u32, p.h.src_port, hp));
	cr_assert(eq(u32, p.h.dst_port, GUEST_PORT));
	tx(VIRTIO_VSOCK_OP_RW, GUEST_PORT, hp, 0, 5, "world!", 6);
	cr_assert(eq(long, client_read(fd, buf, sizeof(buf)), 6));
	cr_assert(eq(str, buf, "world!"));
	rx_expect_none();
	close(fd);
}

Test(virtio_vsock, data_sent_behind_the_connect_line_is_kept)
{
	int fd = unix_connect(sock_path);
	uint32_t hp;
	char ok[16] = {0};
	struct pkt p;

	send_all(fd, "CONNECT 52\nearly", 16);
	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	hp = p.h.src_port;
	rx_expect_none(); /* no data before the guest accepted */
	tx(VIRTIO_VSOCK_OP_RESPONSE, GUEST_PORT, hp, 0, 0, NULL, 0);
	cr_assert(eq(long, client_read(fd, ok, 8), 8));
	cr_assert(eq(str, ok, "OK 1024\n"));
	rx_expect(&p, VIRTIO_VSOCK_OP_RW);
	cr_assert(eq(u32, p.len, 5));
	cr_assert(eq(int, memcmp(p.data, "early", 5), 0));
	close(fd);
}

Test(virtio_vsock, bad_connect_lines_close_the_client)
{
	const char *bad[] = {"HELLO 52\n", "CONNECT\n", "CONNECT 52x\n", "CONNECT 4294967295\n",
			     "CONNECT 1234567890123456789012345678901234567890\n"};
	char c;

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int fd = unix_connect(sock_path);

		send_all(fd, bad[i], strlen(bad[i]));
		rx_expect_none();
		cr_assert(eq(long, client_read(fd, &c, 1), 0), "%s", bad[i]);
		close(fd);
	}
}

Test(virtio_vsock, guest_refusal_closes_the_client)
{
	uint32_t hp;
	int fd = host_connect(53, &hp);
	char c;

	tx(VIRTIO_VSOCK_OP_RST, 53, hp, 0, 0, NULL, 0);
	cr_assert(eq(long, client_read(fd, &c, 1), 0));
	rx_expect_none(); /* no RST answers an RST */
	close(fd);
}

/* A client that never finishes its CONNECT line, and one whose REQUEST the guest never
 * answers, are closed once the handshake deadline passes; the guest hears an RST for the
 * second. A connection that got its answer is left alone. */
Test(virtio_vsock, stalled_handshakes_are_closed)
{
	struct vsock_dev *d = vdev->dev;
	uint32_t hp, hp_ok;
	int silent = unix_connect(sock_path), asked, ok;
	uint64_t deadline;
	struct pkt p;
	char c;

	send_all(silent, "CONN", 4);
	pump();
	asked = host_connect(52, &hp);
	ok = host_establish(53, 4096, &hp_ok);
	pthread_mutex_lock(&d->lock);
	cr_assert(d->timer_armed);
	deadline = vsock_conn_find(d, hp, 52)->handshake_deadline_ms;
	vsock_conn_expire(d, deadline - 1); /* not yet */
	cr_assert(d->timer_armed);
	vsock_conn_expire(d, deadline + VSOCK_HANDSHAKE_MS);
	cr_assert(not(d->timer_armed), "no handshake is left");
	cr_assert(eq(u32, d->nconns, 1));
	vsock_run(d);
	vsock_unlock(d);
	cr_assert(eq(long, client_read(silent, &c, 1), 0));
	cr_assert(eq(long, client_read(asked, &c, 1), 0));
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert(eq(u32, p.h.src_port, hp));
	cr_assert(eq(u32, p.h.dst_port, 52));
	rx_expect_none();
	send_all(ok, "x", 1);
	rx_expect(&p, VIRTIO_VSOCK_OP_RW);
	close(silent);
	close(asked);
	close(ok);
}

Test(virtio_vsock, credit_is_respected)
{
	uint32_t hp, got = 0;
	int fd = host_establish(GUEST_PORT, 100, &hp);
	uint8_t data[1000];
	struct pkt p;

	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)i;
	send_all(fd, data, sizeof(data));
	pump();
	while (rx_next(&p)) {
		cr_assert(eq(u16, p.h.op, VIRTIO_VSOCK_OP_RW));
		cr_assert(eq(int, memcmp(p.data, data + got, p.len), 0));
		got += p.len;
	}
	cr_assert(eq(u32, got, 100), "the guest's buf_alloc is 100");
	rx_expect_none();
	/* The guest read 60 of them: 60 more may come. */
	tx_full(3, 2, VIRTIO_VSOCK_TYPE_STREAM, VIRTIO_VSOCK_OP_CREDIT_UPDATE, GUEST_PORT, hp, 0,
		100, 60, NULL, 0);
	pump();
	while (rx_next(&p)) {
		cr_assert(eq(int, memcmp(p.data, data + got, p.len), 0));
		got += p.len;
	}
	cr_assert(eq(u32, got, 160));
	close(fd);
}

/* One read fills many 4 KiB rx buffers (Linux's size): every buffer but the last is full, the
 * bytes are in order, and the guest's credit bounds the batch. */
Test(virtio_vsock, one_read_fills_many_small_rx_buffers)
{
	uint32_t hp, got = 0, len = 10 * RX_PAYLOAD + 123, credit = 7 * RX_PAYLOAD + 5;
	int fd = host_establish(GUEST_PORT, credit, &hp);
	uint8_t *data = malloc(len);
	unsigned npkts = 0;
	struct pkt p;

	cr_assert(data != NULL);
	for (uint32_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 7 + i / 4096);
	send_all(fd, data, len);
	pump();
	while (rx_next(&p)) {
		cr_assert(eq(u16, p.h.op, VIRTIO_VSOCK_OP_RW));
		cr_assert(eq(u32, p.len, got + RX_PAYLOAD <= credit ? RX_PAYLOAD : credit - got));
		cr_assert(eq(int, memcmp(p.data, data + got, p.len), 0));
		got += p.len;
		npkts++;
	}
	cr_assert(eq(u32, got, credit), "no more than the guest's credit");
	cr_assert(eq(u32, npkts, 8));
	/* The guest read it all: the rest comes, in buffers the device may already hold. */
	tx_full(3, 2, VIRTIO_VSOCK_TYPE_STREAM, VIRTIO_VSOCK_OP_CREDIT_UPDATE, GUEST_PORT, hp, 0,
		credit, credit, NULL, 0);
	pump();
	while (rx_next(&p)) {
		cr_assert(eq(int, memcmp(p.data, data + got, p.len), 0));
		got += p.len;
	}
	cr_assert(eq(u32, got, len));
	rx_expect_none();
	cr_assert(not(fdrv_needs_reset(&drv)));
	free(data);
	close(fd);
}

/* Buffers popped for a batch that one read did not fill are kept for the next packets, in
 * the order the guest gave them. */
Test(virtio_vsock, rx_buffers_left_from_a_batch_serve_later_packets)
{
	uint32_t hp;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	struct pkt p;

	for (unsigned i = 0; i < 20; i++) {
		char b[16];
		int n = snprintf(b, sizeof(b), "msg%u.", i);

		send_all(fd, b, (size_t)n);
		pump();
		rx_expect(&p, VIRTIO_VSOCK_OP_RW);
		cr_assert(eq(u32, p.len, (uint32_t)n));
		cr_assert(eq(int, memcmp(p.data, b, (size_t)n), 0));
		rx_expect_none();
	}
	cr_assert(not(fdrv_needs_reset(&drv)));
	close(fd);
}

Test(virtio_vsock, no_rx_buffers_means_the_socket_waits)
{
	uint32_t hp;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	uint16_t posted = 0;
	struct pkt p;

	/* Take every buffer back from the device's view: the driver consumes without
	 * reposting, then 64 one-byte writes find no buffer. */
	rx_repost = false;
	for (unsigned i = 0; i < QSIZE + 8; i++) {
		send_all(fd, "x", 1);
		pump();
	}
	while (rx_next(&p))
		posted++;
	cr_assert(le(u16, posted, QSIZE));
	/* The rest waits in the socket; new buffers bring it. */
	rx_repost = true;
	for (uint16_t i = 0; i < 4; i++)
		post_rx(i);
	fdrv_kick(&drv, 0);
	pump();
	cr_assert(rx_next(&p));
	cr_assert(eq(u16, p.h.op, VIRTIO_VSOCK_OP_RW));
	cr_assert(not(fdrv_needs_reset(&drv)));
	close(fd);
}

Test(virtio_vsock, a_megabyte_each_way_with_credit_updates)
{
	uint32_t hp, sent = 0, got = 0, fwd = 0, gsent = 0;
	int fd = host_establish(GUEST_PORT, 16384, &hp);
	uint8_t *data = malloc(BIG_BUF), *back = malloc(BIG_BUF);
	struct pkt p;

	cr_assert(data && back);
	for (uint32_t i = 0; i < BIG_BUF; i++)
		data[i] = (uint8_t)(i * 7 + i / 4096);
	/* Host to guest: the guest reads everything and says so with credit updates. */
	while (got < BIG_BUF) {
		if (sent < BIG_BUF) {
			long n = send(fd, data + sent, BIG_BUF - sent, MSG_DONTWAIT);

			if (n > 0)
				sent += (uint32_t)n;
		}
		pump();
		while (rx_next(&p)) {
			cr_assert(eq(u16, p.h.op, VIRTIO_VSOCK_OP_RW));
			cr_assert(le(u32, got + p.len - fwd, 16384), "credit exceeded");
			memcpy(back + got, p.data, p.len);
			got += p.len;
		}
		fwd = got;
		tx_full(3, 2, VIRTIO_VSOCK_TYPE_STREAM, VIRTIO_VSOCK_OP_CREDIT_UPDATE, GUEST_PORT,
			hp, 0, 16384, fwd, NULL, 0);
	}
	cr_assert(eq(int, memcmp(back, data, BIG_BUF), 0));
	/* Guest to host, never past the device's credit, which its updates renew. */
	memset(back, 0, BIG_BUF);
	got = 0;
	{
		uint32_t peer_fwd = 0;

		while (got < BIG_BUF) {
			uint32_t room = OUR_BUF - (gsent - peer_fwd), n = BIG_BUF - gsent;
			long r;

			if (n > room)
				n = room;
			if (n > 32768)
				n = 32768;
			if (n)
				tx(VIRTIO_VSOCK_OP_RW, GUEST_PORT, hp, 0, fwd, data + gsent, n);
			gsent += n;
			while ((r = client_read(fd, back + got, BIG_BUF - got)) > 0)
				got += (uint32_t)r;
			pump();
			while (rx_next(&p)) {
				cr_assert(eq(u16, p.h.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE));
				cr_assert(eq(u32, p.h.buf_alloc, OUR_BUF));
				peer_fwd = p.h.fwd_cnt;
			}
			cr_assert(n || got < gsent || gsent == BIG_BUF, "the device owes credit");
		}
	}
	cr_assert(eq(int, memcmp(back, data, BIG_BUF), 0));
	free(data);
	free(back);
	close(fd);
}

Test(virtio_vsock, guest_beyond_its_credit_is_reset)
{
	uint32_t hp, sent = 0;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	static uint8_t chunk[32768];
	struct pkt p = {0};
	bool reset = false;

	/* The client reads nothing: its socket fills, then the device's buffer, then the
	 * guest's credit is gone and the next packet resets the connection. */
	for (unsigned i = 0; i < 200 && !reset; i++) {
		tx(VIRTIO_VSOCK_OP_RW, GUEST_PORT, hp, 0, 0, chunk, sizeof(chunk));
		sent += sizeof(chunk);
		pump();
		while (rx_next(&p))
			reset |= p.h.op == VIRTIO_VSOCK_OP_RST;
	}
	cr_assert(reset, "never reset after %u bytes", sent);
	cr_assert(not(fdrv_needs_reset(&drv)));
	close(fd);
}

Test(virtio_vsock, guest_connects_to_a_host_listener)
{
	int l = host_listen(1234), fd;
	char buf[16] = {0};
	struct pkt p;

	tx(VIRTIO_VSOCK_OP_REQUEST, 5000, 1234, 0, 0, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RESPONSE);
	cr_assert(eq(u32, p.h.src_port, 1234));
	cr_assert(eq(u32, p.h.dst_port, 5000));
	fd = accept(l, NULL, NULL);
	cr_assert(fd >= 0);
	tx(VIRTIO_VSOCK_OP_RW, 5000, 1234, 0, 0, "ping", 4);
	cr_assert(eq(long, client_read(fd, buf, sizeof(buf)), 4));
	cr_assert(eq(str, buf, "ping"));
	send_all(fd, "pong", 4);
	rx_expect(&p, VIRTIO_VSOCK_OP_RW);
	cr_assert(eq(int, memcmp(p.data, "pong", 4), 0));
	close(fd);
	close(l);
}

Test(virtio_vsock, guest_connect_to_nobody_gets_rst)
{
	struct pkt p;

	tx(VIRTIO_VSOCK_OP_REQUEST, 5000, 9999, 0, 0, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert(eq(u32, p.h.src_port, 9999));
	cr_assert(eq(u32, p.h.dst_port, 5000));
	rx_expect_none();
}

Test(virtio_vsock, shutdown_each_way_then_close)
{
	uint32_t hp;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	char c;
	struct pkt p;

	/* The guest stops sending: the client reads EOF but may still write. */
	tx(VIRTIO_VSOCK_OP_SHUTDOWN, GUEST_PORT, hp, VIRTIO_VSOCK_SHUTDOWN_SEND, 0, NULL, 0);
	cr_assert(eq(long, client_read(fd, &c, 1), 0));
	send_all(fd, "late", 4);
	rx_expect(&p, VIRTIO_VSOCK_OP_RW);
	cr_assert(eq(u32, p.len, 4));
	/* Data after its own SHUTDOWN_SEND is the guest's protocol error: RST. Not here:
	 * instead the client stops sending too. */
	shutdown(fd, SHUT_WR);
	rx_expect(&p, VIRTIO_VSOCK_OP_SHUTDOWN);
	cr_assert(eq(u32, p.h.flags & VIRTIO_VSOCK_SHUTDOWN_SEND, VIRTIO_VSOCK_SHUTDOWN_SEND));
	/* The guest closes for good: the device answers RST and closes the client. */
	tx(VIRTIO_VSOCK_OP_SHUTDOWN, GUEST_PORT, hp,
	   VIRTIO_VSOCK_SHUTDOWN_SEND | VIRTIO_VSOCK_SHUTDOWN_RCV, 0, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	rx_expect_none();
	/* The connection is gone: more data from the guest gets an RST too. */
	tx(VIRTIO_VSOCK_OP_RW, GUEST_PORT, hp, 0, 0, "x", 1);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	close(fd);
}

Test(virtio_vsock, host_close_tells_the_guest)
{
	uint32_t hp;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	struct pkt p;
	uint32_t flags = 0;

	send_all(fd, "bye", 3);
	close(fd);
	rx_expect(&p, VIRTIO_VSOCK_OP_RW);
	cr_assert(eq(u32, p.len, 3));
	pump();
	while (rx_next(&p)) {
		cr_assert(eq(u16, p.h.op, VIRTIO_VSOCK_OP_SHUTDOWN));
		flags |= p.h.flags;
	}
	cr_assert(eq(u32, flags, VIRTIO_VSOCK_SHUTDOWN_SEND | VIRTIO_VSOCK_SHUTDOWN_RCV));
	/* The guest answers with RST, as Linux does; nothing more is owed. */
	tx(VIRTIO_VSOCK_OP_RST, GUEST_PORT, hp, 0, 0, NULL, 0);
	rx_expect_none();
}

Test(virtio_vsock, guest_rst_closes_the_client)
{
	uint32_t hp;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	char c;

	tx(VIRTIO_VSOCK_OP_RST, GUEST_PORT, hp, 0, 0, NULL, 0);
	cr_assert(eq(long, client_read(fd, &c, 1), 0));
	rx_expect_none();
	close(fd);
}

Test(virtio_vsock, credit_request_is_answered)
{
	uint32_t hp;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	struct pkt p;

	tx(VIRTIO_VSOCK_OP_CREDIT_REQUEST, GUEST_PORT, hp, 0, 0, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
	cr_assert(eq(u32, p.h.buf_alloc, OUR_BUF));
	cr_assert(eq(u32, p.h.fwd_cnt, 0));
	close(fd);
}

Test(virtio_vsock, bad_packets_get_rst_or_nothing)
{
	uint32_t hp;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	struct virtio_vsock_hdr h = {.src_cid = 3,
				     .dst_cid = 2,
				     .src_port = 5000,
				     .dst_port = 1234,
				     .type = 1,
				     .op = VIRTIO_VSOCK_OP_RW,
				     .len = 100};
	struct pkt p;
	char c;

	/* Not from the guest's CID: dropped without an answer. */
	tx_full(7, 2, 1, VIRTIO_VSOCK_OP_REQUEST, 5000, 1234, 0, 0, 0, NULL, 0);
	rx_expect_none();
	/* To a CID that is not the host: RST from that CID. */
	tx_full(3, 9, 1, VIRTIO_VSOCK_OP_REQUEST, 5000, 1234, 0, 0, 0, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert(eq(u64, p.h.src_cid, 9));
	/* Seqpacket, unknown op, data or a credit update for no connection: RST. */
	tx_full(3, 2, 2, VIRTIO_VSOCK_OP_REQUEST, 5000, 1234, 0, 0, 0, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	tx(99, 5000, 1234, 0, 0, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	tx(VIRTIO_VSOCK_OP_RW, 5000, 1234, 0, 0, "x", 1);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	tx(VIRTIO_VSOCK_OP_CREDIT_UPDATE, 5000, 1234, 0, 0, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	/* A header claiming more payload than its buffer holds: RST, nothing forwarded. */
	cr_assert(tx_raw(&h, HDR_LEN, "abc", 3, 1));
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	/* Payload on a control packet. */
	tx(VIRTIO_VSOCK_OP_REQUEST, 5001, 1234, 0, 0, "abc", 3);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	/* On the live connection: a second REQUEST or an unknown op resets it. */
	tx(VIRTIO_VSOCK_OP_REQUEST, GUEST_PORT, hp, 0, 0, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert(eq(u32, p.h.src_port, hp));
	cr_assert(eq(long, client_read(fd, &c, 1), 0));
	close(fd);
	fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	tx(VIRTIO_VSOCK_OP_RESPONSE, GUEST_PORT, hp, 0, 0, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert(eq(long, client_read(fd, &c, 1), 0));
	close(fd);
	fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	tx(42, GUEST_PORT, hp, 0, 0, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert(eq(long, client_read(fd, &c, 1), 0));
	close(fd);
	rx_expect_none();
	cr_assert(not(fdrv_needs_reset(&drv)));
}

Test(virtio_vsock, short_header_needs_reset)
{
	uint32_t hp;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	struct virtio_vsock_hdr h = {.src_cid = 3, .dst_cid = 2, .op = VIRTIO_VSOCK_OP_RW};
	char c;

	cr_assert(not(tx_raw(&h, 20, NULL, 0, 1)));
	cr_assert(fdrv_needs_reset(&drv));
	/* Its connections are gone; the VMM is fine, and a reset brings the device back. */
	cr_assert(eq(long, client_read(fd, &c, 1), 0));
	close(fd);
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS, 0);
	pump();
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_STATUS), 0));
}

Test(virtio_vsock, tiny_rx_buffer_needs_reset)
{
	/* Every buffer is consumed, then one with room for a header only. */
	for (uint16_t i = 0; i < QSIZE; i++)
		tx(VIRTIO_VSOCK_OP_REQUEST, 6000 + i, 9999, 0, 0, NULL, 0);
	fdrv_post(&drv, 0, 0, RX_BUF_GPA, HDR_LEN, VRING_DESC_F_WRITE);
	tx(VIRTIO_VSOCK_OP_REQUEST, 5000, 9999, 0, 0, NULL, 0);
	cr_assert(fdrv_needs_reset(&drv));
}

Test(virtio_vsock, driver_reset_drops_connections)
{
	uint32_t hp;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	char c;

	fdrv_wr(&drv, VIRTIO_MMIO_STATUS, 0);
	pump();
	cr_assert(eq(long, client_read(fd, &c, 1), 0));
	close(fd);
}

Test(virtio_vsock, transport_reset_posts_the_event)
{
	uint32_t hp;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	struct vring_used_elem e;
	uint32_t id = 0xffffffff;
	char c;

	cr_assert(eq(int, vsock_transport_reset(vdev), 0));
	pump();
	cr_assert(eq(u16, fdrv_used(&drv, 2)->idx, 1));
	e = fdrv_used(&drv, 2)->ring[0];
	cr_assert(eq(u32, e.len, 4));
	memcpy(&id, ram + EV_BUF_GPA + e.id * 16u, 4);
	cr_assert(eq(u32, id, VIRTIO_VSOCK_EVENT_TRANSPORT_RESET));
	cr_assert(eq(long, client_read(fd, &c, 1), 0));
	close(fd);
	rx_expect_none();
}

/* The guest handled the reset: it gives event buffer `used` slot `i` back and kicks. */
static void event_give_back(unsigned i)
{
	struct vring_used_elem e = fdrv_used(&drv, 2)->ring[i];

	fdrv_post(&drv, 2, (uint16_t)e.id, EV_BUF_GPA + e.id * 16u, 16, VRING_DESC_F_WRITE);
	fdrv_kick(&drv, 2);
}

/* A host client connects right after a restore's reset, before the guest looked at its event
 * queue: its request waits until the guest gave the event buffer back (it handled the reset
 * and forgot its old connections), or the guest would accept it and then drop it with them
 * (payload-snap's child of a second fork, resumed mid-way through serving rx, in the
 * emulated host: "OK", then the connection closed). */
Test(virtio_vsock, after_a_transport_reset_requests_wait_for_the_event_buffer)
{
	const char *line = "CONNECT 52\n";
	char got[32] = {0}, want[32];
	int fd, old;
	uint32_t hp;
	struct pkt p;

	old = host_establish(GUEST_PORT, BIG_BUF, &hp);
	cr_assert(eq(int, vsock_transport_reset(vdev), 0));
	pump();
	cr_assert(eq(u16, fdrv_used(&drv, 2)->idx, 1));
	fd = unix_connect(sock_path);
	send_all(fd, line, strlen(line));
	rx_expect_none();
	/* Other work of the guest's (a packet on tx, a kick of rx) does not let it go. */
	tx(VIRTIO_VSOCK_OP_RST, GUEST_PORT, hp, 0, 0, NULL, 0);
	fdrv_kick(&drv, 0);
	rx_expect_none();
	event_give_back(0);
	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	cr_assert(eq(u32, p.h.dst_port, GUEST_PORT));
	tx_full(3, 2, VIRTIO_VSOCK_TYPE_STREAM, VIRTIO_VSOCK_OP_RESPONSE, GUEST_PORT, p.h.src_port,
		0, BIG_BUF, 0, NULL, 0);
	snprintf(want, sizeof(want), "OK %u\n", p.h.src_port);
	cr_assert(eq(long, client_read(fd, got, strlen(want)), (long)strlen(want)));
	cr_assert(eq(str, got, want));
	/* From now on requests go at once, until the next reset. */
	close(host_establish(GUEST_PORT + 1, BIG_BUF, &hp));
	close(fd);
	close(old);
}

/* A guest that keeps the event buffer gets the waiting requests VSOCK_RESET_ACK_MS after the
 * reset; one that resets the device instead has no old connections to forget. */
Test(virtio_vsock, a_reset_the_guest_does_not_give_back_lets_requests_go_later)
{
	struct vsock_dev *d = vdev->dev;
	const char *line = "CONNECT 52\n";
	uint64_t now_ms;
	struct pkt p;
	int fd;

	cr_assert(eq(int, vsock_transport_reset(vdev), 0));
	now_ms = vmm_now_ns() / 1000000u;
	fd = unix_connect(sock_path);
	send_all(fd, line, strlen(line));
	rx_expect_none();
	pthread_mutex_lock(&d->lock);
	cr_assert(d->reset_unacked);
	cr_assert(ge(u64, d->reset_ack_deadline_ms, now_ms + VSOCK_RESET_ACK_MS));
	cr_assert(lt(u64, d->reset_ack_deadline_ms, now_ms + VSOCK_RESET_ACK_MS + 1000));
	d->reset_ack_deadline_ms = now_ms; /* as if VSOCK_RESET_ACK_MS had passed */
	vsock_run(d);
	vsock_unlock(d);
	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	cr_assert(eq(u32, p.h.dst_port, GUEST_PORT));
	close(fd);

	cr_assert(eq(int, vsock_transport_reset(vdev), 0));
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS, 0);
	pump();
	pthread_mutex_lock(&d->lock);
	cr_assert(not(d->reset_unacked), "a driver reset ends the wait");
	pthread_mutex_unlock(&d->lock);
}

Test(virtio_vsock, many_connections_at_once)
{
	enum { N = 100 };
	int fds[N];
	uint32_t hps[N];
	struct pkt p;
	bool seen[N] = {false};

	for (unsigned i = 0; i < N; i++)
		fds[i] = host_establish(GUEST_PORT + i, BIG_BUF, &hps[i]);
	for (unsigned i = 0; i < N; i++) {
		char msg[16];

		snprintf(msg, sizeof(msg), "conn %u", i);
		send_all(fds[i], msg, strlen(msg));
		snprintf(msg, sizeof(msg), "back %u", i);
		tx(VIRTIO_VSOCK_OP_RW, GUEST_PORT + i, hps[i], 0, 0, msg, (uint32_t)strlen(msg));
	}
	pump();
	while (rx_next(&p)) {
		unsigned i = p.h.dst_port - GUEST_PORT;
		char want[16];

		cr_assert(lt(u32, i, N));
		cr_assert(eq(u32, p.h.src_port, hps[i]));
		snprintf(want, sizeof(want), "conn %u", i);
		cr_assert(eq(u32, p.len, strlen(want)));
		cr_assert(eq(int, memcmp(p.data, want, p.len), 0));
		seen[i] = true;
		pump();
	}
	for (unsigned i = 0; i < N; i++) {
		char got[16] = {0}, want[16];

		cr_assert(seen[i], "connection %u", i);
		snprintf(want, sizeof(want), "back %u", i);
		cr_assert(eq(long, client_read(fds[i], got, sizeof(got)), (long)strlen(want)));
		cr_assert(eq(str, got, want));
		close(fds[i]);
	}
}

Test(virtio_vsock, connections_beyond_the_maximum_get_rst)
{
	int l = host_listen(1234);
	unsigned rsts = 0, responses = 0;
	struct pkt p;

	for (uint32_t i = 0; i < 1024 + 8; i++) {
		tx(VIRTIO_VSOCK_OP_REQUEST, 10000 + i, 1234, 0, 0, NULL, 0);
		while (rx_next(&p)) {
			if (p.h.op == VIRTIO_VSOCK_OP_RST)
				rsts++;
			else if (p.h.op == VIRTIO_VSOCK_OP_RESPONSE)
				responses++;
		}
	}
	cr_assert(eq(u32, responses, 1024));
	cr_assert(eq(u32, rsts, 8));
	cr_assert(not(fdrv_needs_reset(&drv)));
	close(l);
}

/* The host client closed, the guest heard both SHUTDOWNs and ignores them: after
 * VSOCK_CLOSE_MS we reset the connection ourselves (its fd is freed). A client that only
 * stopped sending starts no such clock. */
Test(virtio_vsock, a_finished_connection_the_guest_keeps_is_reset)
{
	struct vsock_dev *d = vdev->dev;
	uint32_t hp, hp_half, flags = 0;
	int fd = host_establish(GUEST_PORT, BIG_BUF, &hp);
	int half = host_establish(GUEST_PORT + 1, BIG_BUF, &hp_half);
	struct vsock_conn *c;
	uint64_t deadline;
	struct pkt p;

	cr_assert(eq(int, shutdown(half, SHUT_WR), 0));
	rx_expect(&p, VIRTIO_VSOCK_OP_SHUTDOWN);
	cr_assert(eq(u32, p.h.flags, VIRTIO_VSOCK_SHUTDOWN_SEND));
	close(fd);
	pump();
	while (rx_next(&p)) {
		cr_assert(eq(u16, p.h.op, VIRTIO_VSOCK_OP_SHUTDOWN));
		cr_assert(eq(u32, p.h.src_port, hp));
		flags |= p.h.flags;
	}
	cr_assert(eq(u32, flags, VIRTIO_VSOCK_SHUTDOWN_SEND | VIRTIO_VSOCK_SHUTDOWN_RCV));
	pthread_mutex_lock(&d->lock);
	cr_assert(eq(u64, vsock_conn_find(d, hp_half, GUEST_PORT + 1)->close_deadline_ms, 0));
	c = vsock_conn_find(d, hp, GUEST_PORT);
	cr_assert(c != NULL);
	deadline = c->close_deadline_ms;
	cr_assert(deadline != 0);
	cr_assert(d->timer_armed);
	vsock_conn_expire(d, deadline - 1); /* not yet */
	cr_assert(eq(u32, d->nconns, 2));
	vsock_conn_expire(d, deadline);
	cr_assert(eq(u32, d->nconns, 1));
	cr_assert(eq(ptr, vsock_conn_find(d, hp, GUEST_PORT), NULL));
	cr_assert(not(d->timer_armed), "no deadline is left");
	vsock_run(d);
	vsock_unlock(d);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert(eq(u32, p.h.src_port, hp));
	cr_assert(eq(u32, p.h.dst_port, GUEST_PORT));
	rx_expect_none();
	close(half);
}

/* A tx queue full of packets the device drops at once (a source CID not the guest's) is
 * served VSOCK_TX_BUDGET per pass; the device kicks itself for the rest. */
Test(virtio_vsock, a_pass_takes_at_most_the_tx_budget_and_comes_back)
{
	const unsigned n = 100;
	struct virtio_vsock_hdr h = {.src_cid = 7,
				     .dst_cid = 2,
				     .src_port = 5000,
				     .dst_port = 1234,
				     .type = VIRTIO_VSOCK_TYPE_STREAM,
				     .op = VIRTIO_VSOCK_OP_REQUEST};

	cr_assert(gt(u32, n, VSOCK_TX_BUDGET));
	cr_assert(le(u32, n, QSIZE));
	for (unsigned i = 0; i < n; i++) {
		uint64_t gpa = TX_BUF_GPA + (uint64_t)i * 64;

		memcpy(ram + gpa, &h, sizeof(h));
		fdrv_desc(&drv, 1)[i] = (struct vring_desc){.addr = gpa, .len = HDR_LEN};
		fdrv_add(&drv, 1, (uint16_t)i);
	}
	fdrv_publish(&drv, 1);
	/* Without a VM, the kick is served right here, in the QueueNotify access. */
	fdrv_kick(&drv, 1);
	cr_assert(eq(u16, fdrv_used(&drv, 1)->idx, VSOCK_TX_BUDGET));
	cr_assert(eq(int, evloop_run_once(&vm.loop, 0), 1), "the device's own kick");
	cr_assert(eq(u16, fdrv_used(&drv, 1)->idx, drv.q[1].avail_idx));
	cr_assert(eq(int, evloop_run_once(&vm.loop, 0), 0), "nothing left, nothing kicked");
	rx_expect_none();
	cr_assert(not(fdrv_needs_reset(&drv)));
}
