/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm/virtio/net.c and net_rx.c: a fake guest driver posts rx buffers and tx frames in fake
 * guest RAM; the "tap" is one end of a SOCK_SEQPACKET socketpair (one message, one frame with
 * its 12-byte header), the test holds the other end, and runs the VM's event loop itself
 * (this thread is the I/O thread).
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <linux/if_tun.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_net.h>
#include <linux/virtio_ring.h>

#include "fake_driver.h"
#include "fake_mem.h"
#include "fake_vm.h"
#include "virtio/net.h"
#include "virtio/virtio.h"

#define QSIZE	    256u
#define RX_BUF_GPA  0x100000u
#define TX_BUF_GPA  0x2000000u
#define TX_SLOT_LEN 0x11000u
#define HDR	    12u

static struct vm vm;
static uint8_t *ram;
static struct virtio_dev *vdev;
static struct net_dev *dev;
static int peer = -1;
static char cmdline[256];
static struct fake_driver drv;
static uint32_t rx_buf_len;
static const uint8_t test_mac[6] = {0x02, 0x53, 0x42, 0x00, 0x00, 0x02};

/* Serve the event loop until it has nothing left to do. */
static void pump(void)
{
	cr_assert(fdrv_pump(&drv, 10000), "the event loop never goes idle");
}

/* Offer rx buffer `i` (a device-writable buffer of rx_buf_len bytes). */
static void post_rx(uint16_t i)
{
	fdrv_post(&drv, 0, i, RX_BUF_GPA + (uint64_t)i * rx_buf_len, rx_buf_len,
		  VRING_DESC_F_WRITE);
}

/* The device up with the features it offers, MRG_RXBUF only if `mrg`, and `nrx` rx buffers
 * of `buf_len` bytes. */
static void start(bool mrg, unsigned nrx, uint32_t buf_len)
{
	int sv[2];

	fake_vm_init(&vm);
	ram = fake_mem_create(&vm.mem, 64 * MIB, 0);
	cr_assert(eq(int, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0));
	peer = sv[1];
	strcpy(cmdline, "console=ttyS0");
	cr_assert(eq(int, net_add(&vm, sv[0], test_mac, cmdline, sizeof(cmdline), &vdev), 0));
	dev = vdev->dev;
	rx_buf_len = buf_len;

	fdrv_init(&drv, &vm, &vm.mem, vdev);
	cr_assert(fdrv_setup(&drv, mrg ? ~0ull : ~(1ull << VIRTIO_NET_F_MRG_RXBUF), 2, QSIZE));
	for (uint16_t i = 0; i < nrx; i++)
		post_rx(i);
	fdrv_driver_ok(&drv);
	cr_assert(not(fdrv_needs_reset(&drv)));
	pump();
}

static void teardown(void)
{
	struct guest_mem ram_of_vm = vm.mem; /* vm_destroy forgets a fake RAM */

	vm_destroy(&vm);
	fake_mem_destroy(&ram_of_vm);
	fake_vm_destroy(&vm);
	if (peer >= 0)
		close(peer);
	peer = -1;
}

TestSuite(virtio_net, .fini = teardown);

/* A frame as the peer sends it: the header, then `len` bytes of `seed`-derived data. */
static size_t make_frame(uint8_t *buf, uint32_t len, uint8_t seed)
{
	memset(buf, 0, HDR);
	for (uint32_t i = 0; i < len; i++)
		buf[HDR + i] = (uint8_t)(seed + i * 7);
	return HDR + len;
}

static void peer_send(uint32_t len, uint8_t seed)
{
	static uint8_t buf[HDR + 70000];
	size_t n = make_frame(buf, len, seed);

	cr_assert(eq(long, (long)send(peer, buf, n, MSG_DONTWAIT), (long)n), "send: %s",
		  strerror(errno));
}

/* Queue a tx chain at slot `slot`: header and frame in `segs` descriptors (1 or 2); the
 * header is `hdr_len` bytes. Does not kick. */
static void tx_post(unsigned slot, uint32_t hdr_len, uint32_t len, int segs)
{
	uint16_t d0 = (uint16_t)(2 * slot % QSIZE), d1 = (uint16_t)(d0 + 1);
	uint64_t gpa = TX_BUF_GPA + (uint64_t)(slot % (QSIZE / 2)) * TX_SLOT_LEN;

	cr_assert(le(u32, hdr_len + len, TX_SLOT_LEN));
	memset(ram + gpa, 0, hdr_len);
	for (uint32_t i = 0; i < len; i++)
		ram[gpa + hdr_len + i] = (uint8_t)(slot + i * 3);
	if (segs == 1) {
		fdrv_desc(&drv, 1)[d0] = (struct vring_desc){.addr = gpa, .len = hdr_len + len};
	} else {
		fdrv_desc(&drv, 1)[d0] = (struct vring_desc){
			.addr = gpa, .len = hdr_len, .flags = VRING_DESC_F_NEXT, .next = d1};
		fdrv_desc(&drv, 1)[d1] = (struct vring_desc){.addr = gpa + hdr_len, .len = len};
	}
	fdrv_offer(&drv, 1, d0);
}

/* What the peer can read now: the message's length, or -1 when none is there. */
static long peer_recv(uint8_t *buf, size_t len)
{
	long n = recv(peer, buf, len, MSG_DONTWAIT);

	if (n < 0)
		cr_assert(eq(int, errno, EAGAIN), "%s", strerror(errno));
	return n;
}

Test(virtio_net, config_and_features)
{
	uint8_t mac[6];
	uint16_t status;
	uint64_t f;

	start(true, 0, 2048);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_NET));
	for (unsigned i = 0; i < 6; i++)
		virtio_mmio_access(vdev, VIRTIO_MMIO_CONFIG + i, &mac[i], 1, false);
	cr_assert(eq(int, memcmp(mac, test_mac, 6), 0));
	virtio_mmio_access(vdev, VIRTIO_MMIO_CONFIG + 6, (uint8_t *)&status, 2, false);
	cr_assert(eq(u16, status, VIRTIO_NET_S_LINK_UP));
	f = fdrv_offered(&drv);
	cr_assert(ne(u64, f & (1ull << VIRTIO_NET_F_MAC), 0));
	cr_assert(ne(u64, f & (1ull << VIRTIO_NET_F_STATUS), 0));
	cr_assert(ne(u64, f & (1ull << VIRTIO_NET_F_MRG_RXBUF), 0));
	/* A socket takes no offloads: none is offered. */
	cr_assert(eq(u64, f & (1ull << VIRTIO_NET_F_CSUM), 0));
	cr_assert(eq(u64, f & (1ull << VIRTIO_NET_F_GUEST_TSO4), 0));
	cr_assert(strstr(cmdline, "virtio_mmio.device=4K@") != NULL);
}

Test(virtio_net, tx_frame_reaches_the_tap)
{
	uint8_t buf[4096];
	long n;

	start(true, 0, 2048);
	tx_post(0, HDR, 1000, 2);
	tx_post(1, HDR, 60, 1);
	fdrv_kick(&drv, 1);
	pump();
	cr_assert(eq(u16, fdrv_used(&drv, 1)->idx, 2));
	cr_assert(eq(u32, fdrv_used(&drv, 1)->ring[0].len, 0));
	n = peer_recv(buf, sizeof(buf));
	cr_assert(eq(long, n, HDR + 1000));
	cr_assert(eq(int, memcmp(buf + HDR, ram + TX_BUF_GPA + HDR, 1000), 0));
	n = peer_recv(buf, sizeof(buf));
	cr_assert(eq(long, n, HDR + 60));
	cr_assert(eq(u8, buf[HDR + 1], (uint8_t)(1 + 3)));
	cr_assert(eq(long, peer_recv(buf, sizeof(buf)), -1));
	cr_assert(eq(u64, dev->tx_frames, 2));
}

Test(virtio_net, rx_one_buffer_per_frame)
{
	const struct virtio_net_hdr_v1 *h;
	uint8_t want[HDR + 1500];

	start(false, 4, 2048);
	h = (const void *)(ram + RX_BUF_GPA);
	peer_send(1500, 5);
	peer_send(64, 9);
	pump();
	cr_assert(eq(u16, fdrv_used(&drv, 0)->idx, 2));
	cr_assert(eq(u32, fdrv_used(&drv, 0)->ring[0].id, 0));
	cr_assert(eq(u32, fdrv_used(&drv, 0)->ring[0].len, HDR + 1500));
	cr_assert(eq(u16, h->num_buffers, 1));
	make_frame(want, 1500, 5);
	cr_assert(eq(int, memcmp(ram + RX_BUF_GPA + HDR, want + HDR, 1500), 0));
	cr_assert(eq(u32, fdrv_used(&drv, 0)->ring[1].len, HDR + 64));
}

Test(virtio_net, rx_mergeable_spreads_a_frame)
{
	const struct virtio_net_hdr_v1 *h;
	uint8_t want[HDR + 3000];

	start(true, 8, 1024);
	h = (const void *)(ram + RX_BUF_GPA);
	peer_send(3000, 1);
	pump();
	/* 3012 bytes over 1024-byte buffers: 3 of them, the last with 964 bytes. */
	cr_assert(eq(u16, fdrv_used(&drv, 0)->idx, 3));
	cr_assert(eq(u16, h->num_buffers, 3));
	cr_assert(eq(u32, fdrv_used(&drv, 0)->ring[0].len, 1024));
	cr_assert(eq(u32, fdrv_used(&drv, 0)->ring[1].len, 1024));
	cr_assert(eq(u32, fdrv_used(&drv, 0)->ring[2].len, 3012 - 2048));
	make_frame(want, 3000, 1);
	/* Buffers 0, 1, 2 are contiguous in RAM here. */
	cr_assert(eq(int, memcmp(ram + RX_BUF_GPA + HDR, want + HDR, 3000), 0));
}

Test(virtio_net, rx_waits_for_buffers_and_stops_polling)
{
	start(true, 0, 2048);
	peer_send(100, 3);
	pump();
	cr_assert(eq(u16, fdrv_used(&drv, 0)->idx, 0));
	cr_assert(dev->rx_wait);
	cr_assert(eq(u32, dev->tap_events & EPOLLIN, 0), "the tap is still polled without buffers");
	/* The frame stays in the socket: nothing read with nowhere to put it. */
	cr_assert(eq(u32, dev->frame_len, 0));
	post_rx(0);
	post_rx(1);
	fdrv_kick(&drv, 0);
	pump();
	cr_assert(eq(u16, fdrv_used(&drv, 0)->idx, 1));
	cr_assert(eq(u32, fdrv_used(&drv, 0)->ring[0].len, HDR + 100));
	/* One buffer left: the tap is polled again. */
	cr_assert(ne(u32, dev->tap_events & EPOLLIN, 0));
}

Test(virtio_net, rx_mergeable_frame_waits_for_enough_buffers)
{
	start(true, 2, 1024);
	peer_send(3000, 1);
	pump();
	/* Two buffers are not enough: none is used, both go back to the avail ring. */
	cr_assert(eq(u16, fdrv_used(&drv, 0)->idx, 0));
	cr_assert(eq(u32, dev->frame_len, HDR + 3000));
	cr_assert(eq(u16, vdev->queues[0].last_avail_idx, 0));
	post_rx(2);
	fdrv_kick(&drv, 0);
	pump();
	cr_assert(eq(u16, fdrv_used(&drv, 0)->idx, 3));
	cr_assert(not(fdrv_needs_reset(&drv)));
}

Test(virtio_net, rx_frame_too_big_for_a_buffer_is_dropped)
{
	start(false, 2, 1024);
	peer_send(1500, 1);
	peer_send(100, 2);
	pump();
	/* The first is dropped, its buffer kept for the second. */
	cr_assert(eq(u16, fdrv_used(&drv, 0)->idx, 1));
	cr_assert(eq(u32, fdrv_used(&drv, 0)->ring[0].id, 0));
	cr_assert(eq(u32, fdrv_used(&drv, 0)->ring[0].len, HDR + 100));
	cr_assert(eq(u64, dev->rx_dropped, 1));
	cr_assert(not(fdrv_needs_reset(&drv)));
}

Test(virtio_net, rx_oversize_frame_is_dropped)
{
	start(true, 64, 2048);
	peer_send(NET_FRAME_MAX + 1, 1);
	peer_send(10, 2);
	pump();
	cr_assert(eq(u16, fdrv_used(&drv, 0)->idx, 1));
	cr_assert(eq(u32, fdrv_used(&drv, 0)->ring[0].len, HDR + 10));
	cr_assert(eq(u64, dev->rx_dropped, 1));
	cr_assert(not(fdrv_needs_reset(&drv)));
}

Test(virtio_net, rx_readable_buffer_needs_reset)
{
	start(true, 0, 2048);
	fdrv_post(&drv, 0, 0, RX_BUF_GPA, 2048, 0);
	fdrv_kick(&drv, 0);
	peer_send(100, 1);
	pump();
	cr_assert(fdrv_needs_reset(&drv));
	cr_assert(eq(u16, fdrv_used(&drv, 0)->idx, 0));
	/* The device is dead until a reset: frames are left alone. */
	cr_assert(not(dev->active));
}

Test(virtio_net, rx_buffer_shorter_than_the_header_needs_reset)
{
	start(true, 0, 8);
	post_rx(0);
	fdrv_kick(&drv, 0);
	peer_send(100, 1);
	pump();
	cr_assert(fdrv_needs_reset(&drv));
}

Test(virtio_net, tx_chain_shorter_than_the_header_needs_reset)
{
	uint8_t buf[64];

	start(true, 0, 2048);
	tx_post(0, 8, 0, 1);
	fdrv_kick(&drv, 1);
	pump();
	cr_assert(fdrv_needs_reset(&drv));
	cr_assert(eq(long, peer_recv(buf, sizeof(buf)), -1));
}

Test(virtio_net, tx_oversize_frame_is_dropped)
{
	uint8_t buf[128];

	start(true, 0, 2048);
	tx_post(0, HDR, NET_FRAME_MAX + 1, 2);
	tx_post(1, HDR, 50, 2);
	fdrv_kick(&drv, 1);
	pump();
	cr_assert(eq(u16, fdrv_used(&drv, 1)->idx, 2));
	cr_assert(eq(long, peer_recv(buf, sizeof(buf)), HDR + 50));
	cr_assert(eq(u64, dev->tx_dropped, 1));
	cr_assert(not(fdrv_needs_reset(&drv)));
}

Test(virtio_net, tx_writable_descriptor_in_chain_is_not_sent)
{
	uint8_t buf[128];

	start(true, 0, 2048);
	tx_post(0, HDR, 40, 2);
	/* The frame's part device-writable: only the header goes out, nothing is written. */
	fdrv_desc(&drv, 1)[1].flags = VRING_DESC_F_WRITE;
	fdrv_kick(&drv, 1);
	pump();
	cr_assert(eq(u16, fdrv_used(&drv, 1)->idx, 1));
	cr_assert(eq(long, peer_recv(buf, sizeof(buf)), HDR));
}

Test(virtio_net, tx_budget_yields_to_the_loop)
{
	uint8_t buf[256];
	unsigned got = 0;

	start(true, 0, 2048);
	for (unsigned i = 0; i < 200; i++)
		tx_post(i, HDR, 20, 1);
	/* One kick serves one budget, then the device kicks itself for the rest. */
	fdrv_kick(&drv, 1);
	cr_assert(eq(u16, fdrv_used(&drv, 1)->idx, NET_TX_BUDGET));
	pump();
	cr_assert(eq(u16, fdrv_used(&drv, 1)->idx, 200));
	while (peer_recv(buf, sizeof(buf)) == HDR + 20)
		got++;
	cr_assert(eq(u32, got, 200));
}

Test(virtio_net, rx_budget_per_pass)
{
	start(true, 200, 2048);
	for (unsigned i = 0; i < 100; i++)
		peer_send(30, (uint8_t)i);
	cr_assert(gt(int, evloop_run_once(&vm.loop, 0), 0));
	cr_assert(eq(u16, fdrv_used(&drv, 0)->idx, NET_RX_BUDGET));
	pump();
	cr_assert(eq(u16, fdrv_used(&drv, 0)->idx, 100));
}

Test(virtio_net, reset_stops_and_restart_works)
{
	start(true, 4, 2048);
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS, 0);
	pump();
	cr_assert(not(dev->active));
	cr_assert(eq(u32, dev->tap_events, 0));
	peer_send(10, 1);
	pump();
	cr_assert(eq(u32, dev->frame_len, 0));
}

Test(virtio_net, peer_hangup_is_survived)
{
	start(true, 4, 2048);
	close(peer);
	peer = -1;
	pump();
	cr_assert(dev->dead);
	cr_assert(not(fdrv_needs_reset(&drv)));
	tx_post(0, HDR, 20, 1);
	fdrv_kick(&drv, 1);
	pump();
}

Test(virtio_net, quiesce_leaves_nothing_half_done)
{
	start(true, 2, 1024);
	peer_send(3000, 1);
	pump();
	cr_assert(eq(int, virtio_mmio_quiesce(vdev), 0));
	/* The frame waiting for buffers holds none of the guest's. */
	cr_assert(eq(u16, vdev->queues[0].last_avail_idx, vdev->queues[0].used_idx));
}

Test(virtio_net, not_a_tap_is_refused)
{
	struct virtio_dev *v;
	int fds[2];

	fake_vm_init(&vm);
	ram = fake_mem_create(&vm.mem, 64 * MIB, 0);
	cr_assert(eq(int, pipe(fds), 0));
	close(fds[1]);
	strcpy(cmdline, "console=ttyS0");
	cr_assert(eq(int, net_add(&vm, fds[0], test_mac, cmdline, sizeof(cmdline), &v), -ENOTTY));
}

Test(virtio_net, mac_parsing)
{
	uint8_t mac[6];

	cr_assert(net_parse_mac("02:53:42:00:00:02", mac));
	cr_assert(eq(int, memcmp(mac, test_mac, 6), 0));
	cr_assert(net_parse_mac("0A:bC:00:00:00:01", mac));
	cr_assert(eq(u8, mac[1], 0xbc));
	cr_assert(not(net_parse_mac("01:00:00:00:00:01", mac)), "multicast");
	cr_assert(not(net_parse_mac("00:00:00:00:00:00", mac)), "zero");
	cr_assert(not(net_parse_mac("02:53:42:00:00", mac)));
	cr_assert(not(net_parse_mac("02:53:42:00:00:0g", mac)));
	cr_assert(not(net_parse_mac("02-53-42-00-00-02", mac)));
	cr_assert(not(net_parse_mac("02:53:42:00:00:022", mac)));
	cr_assert(not(net_parse_mac(" 2:53:42:00:00:02", mac)));
}

Test(virtio_net, real_tap_offers_what_it_accepts)
{
	struct ifreq ifr = {.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR};
	struct virtio_dev *v;
	uint64_t f;
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);

	/* A tap of our own (gone with the fd): only where we may make one. */
	if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr) < 0) {
		if (fd >= 0)
			close(fd);
		cr_skip_test("no tap here (needs /dev/net/tun and CAP_NET_ADMIN)");
	}
	fake_vm_init(&vm);
	ram = fake_mem_create(&vm.mem, 64 * MIB, 0);
	strcpy(cmdline, "console=ttyS0");
	cr_assert(eq(int, net_add(&vm, fd, test_mac, cmdline, sizeof(cmdline), &v), 0));
	vdev = v;
	dev = v->dev;
	cr_assert(dev->is_tap);
	fdrv_init(&drv, &vm, &vm.mem, v);
	f = fdrv_offered(&drv);
	/* Every Linux tap takes checksum offload and TSO4. */
	cr_assert(ne(u64, f & (1ull << VIRTIO_NET_F_CSUM), 0));
	cr_assert(ne(u64, f & (1ull << VIRTIO_NET_F_GUEST_CSUM), 0));
	cr_assert(ne(u64, f & (1ull << VIRTIO_NET_F_HOST_TSO4), 0));
	cr_assert(ne(u64, f & (1ull << VIRTIO_NET_F_GUEST_TSO4), 0));
	cr_assert(ne(u64, f & (1ull << VIRTIO_NET_F_MRG_RXBUF), 0));
}
