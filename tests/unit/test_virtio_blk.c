/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm/virtio/blk.c: real request chains posted in fake guest RAM, driven through the
 * virtio-mmio registers, against a temporary raw image (read-only) or an overlay above it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>

#include "disk.h"
#include "fake_driver.h"
#include "fake_mem.h"
#include "fake_vm.h"
#include "virtio/virtio.h"

#define IMAGE_LEN  (1 * MIB)
#define QSIZE	   16u
#define HDR_GPA	   0x20000u
#define DATA_GPA   0x21000u
#define STATUS_GPA 0x40000u

static struct vm vm;
static uint8_t *ram;
static struct virtio_dev *vdev;
static char dir[] = "/tmp/test_virtio_blk.XXXXXX";
static char raw_path[64], ovl_path[64];
static char cmdline[256];
static struct fake_driver drv;
static unsigned qsize = QSIZE; /* the queue's size, as start() configures it */

/* The byte a fresh image holds at `off`. */
static uint8_t pattern(uint64_t off)
{
	return (uint8_t)(off / 512 * 7 + off % 251);
}

static void make_image(void)
{
	uint8_t *buf = malloc(IMAGE_LEN);
	int fd;

	cr_assert(buf != NULL);
	for (uint64_t i = 0; i < IMAGE_LEN; i++)
		buf[i] = pattern(i);
	char *made = mkdtemp(dir);

	cr_assert(made != NULL);
	snprintf(raw_path, sizeof(raw_path), "%s/base.img", dir);
	snprintf(ovl_path, sizeof(ovl_path), "%s/top.layer", dir);
	fd = open(raw_path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	cr_assert(fd >= 0);
	cr_assert(eq(long, (long)write(fd, buf, IMAGE_LEN), (long)IMAGE_LEN));
	close(fd);
	free(buf);
}

/* Attach a disk and take the driver to DRIVER_OK with queue 0 set up. */
static void start(bool overlay, bool ro)
{
	struct disk_error err;
	struct disk *d;
	/* Without EVENT_IDX: interrupts on every request. */
	uint64_t want = ~(1ull << VIRTIO_RING_F_EVENT_IDX);

	fake_vm_init(&vm);
	ram = fake_mem_create(&vm.mem, 64 * MIB, 0);
	make_image();
	if (overlay) {
		cr_assert(eq(int, disk_create_overlay(ovl_path, raw_path, 0, &err), 0), "%s",
			  err.msg);
		cr_assert(eq(int, disk_open(ovl_path, 0, &d, &err), 0), "%s", err.msg);
	} else {
		cr_assert(eq(int, disk_open(raw_path, DISK_OPEN_RAW, &d, &err), 0), "%s", err.msg);
	}
	strcpy(cmdline, "console=ttyS0");
	struct blk_options bo = {.read_only = ro, .serial = "test-serial", .depth = 4};

	cr_assert(eq(int, blk_add(&vm, d, &bo, cmdline, sizeof(cmdline), &vdev), 0));
	fdrv_init(&drv, &vm, &vm.mem, vdev);
	cr_assert(fdrv_setup(&drv, want, 1, qsize), "features %llx",
		  (unsigned long long)(fdrv_offered(&drv) & want));
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_QUEUE_NUM_MAX), 256)); /* queue 0's */
	fdrv_driver_ok(&drv);
	cr_assert(not(fdrv_needs_reset(&drv)));
}

static void start_raw(void)
{
	start(false, false);
}
static void start_overlay(void)
{
	start(true, false);
}
static void start_overlay_ro(void)
{
	start(true, true);
}
/* The raw disk behind a queue of 256 entries: room for more requests than one pass takes. */
static void start_raw_big(void)
{
	qsize = 256;
	start(false, false);
}

static void stop(void)
{
	struct guest_mem ram_of_vm = vm.mem; /* vm_destroy forgets a fake RAM */

	vm_destroy(&vm); /* destroys the devices, closing the disk */
	fake_mem_destroy(&ram_of_vm);
	fake_vm_destroy(&vm);
	unlink(ovl_path);
	unlink(raw_path);
	rmdir(dir);
	strcpy(dir, "/tmp/test_virtio_blk.XXXXXX");
	qsize = QSIZE;
}

struct seg {
	uint64_t gpa;
	uint32_t len;
	bool write;
};

/* Reads and writes complete on io_uring: run the VM's event loop until the used index moves
 * past `used_before`, the device gives up on the queue, or a second passes. */
static void wait_used(uint16_t used_before)
{
	const volatile struct vring_used *used = fdrv_used(&drv, 0);

	for (int i = 0; i < 100 && used->idx == used_before && !fdrv_needs_reset(&drv); i++)
		cr_assert(evloop_run_once(&vm.loop, 10) >= 0);
}

/* Post one chain at descriptors 0..n-1, kick, and return the used length (or -1 when the
 * device returned nothing). */
static long submit(const struct seg *segs, unsigned n)
{
	struct vring_desc *desc = fdrv_desc(&drv, 0);
	struct vring_used *used = fdrv_used(&drv, 0);
	uint16_t used_before = used->idx;

	for (unsigned i = 0; i < n; i++) {
		desc[i].addr = segs[i].gpa;
		desc[i].len = segs[i].len;
		desc[i].flags = (segs[i].write ? VRING_DESC_F_WRITE : 0) |
				(i + 1 < n ? VRING_DESC_F_NEXT : 0);
		desc[i].next = (uint16_t)(i + 1);
	}
	fdrv_offer(&drv, 0, 0);
	fdrv_kick(&drv, 0);
	wait_used(used_before);
	if (used->idx == used_before)
		return -1;
	cr_assert(eq(u16, used->idx, (uint16_t)(used_before + 1)));
	cr_assert(eq(u32, used->ring[used_before % QSIZE].id, 0));
	return used->ring[used_before % QSIZE].len;
}

static void put_hdr(uint32_t type, uint64_t sector)
{
	struct virtio_blk_outhdr h = {.type = type, .sector = sector};

	memcpy(ram + HDR_GPA, &h, sizeof(h));
	ram[STATUS_GPA] = 0xee;
}

/* A plain request: header, data of `len` bytes (device-writable for a read), status. */
static long request(uint32_t type, uint64_t sector, uint32_t len, bool data_write)
{
	struct seg s[3] = {
		{HDR_GPA, 16, false}, {DATA_GPA, len, data_write}, {STATUS_GPA, 1, true}};

	put_hdr(type, sector);
	if (!len) {
		s[1] = s[2];
		return submit(s, 2);
	}
	return submit(s, 3);
}

static bool data_is_pattern(uint64_t disk_off, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		if (ram[DATA_GPA + i] != pattern(disk_off + i))
			return false;
	return true;
}

TestSuite(virtio_blk_raw, .init = start_raw, .fini = stop);
TestSuite(virtio_blk_rw, .init = start_overlay, .fini = stop);
TestSuite(virtio_blk_ro, .init = start_overlay_ro, .fini = stop);
TestSuite(virtio_blk_big, .init = start_raw_big, .fini = stop);

Test(virtio_blk_raw, identity_config_and_features)
{
	uint64_t capacity;
	uint32_t seg_max, blk_size, f;

	cr_assert(eq(str, cmdline, "console=ttyS0 virtio_mmio.device=4K@0xd0000000:5"));
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_BLOCK));
	virtio_mmio_access(vdev, VIRTIO_MMIO_CONFIG, (uint8_t *)&capacity, 8, false);
	cr_assert(eq(u64, capacity, IMAGE_LEN / 512));
	virtio_mmio_access(vdev, VIRTIO_MMIO_CONFIG + offsetof(struct virtio_blk_config, seg_max),
			   (uint8_t *)&seg_max, 4, false);
	cr_assert(eq(u32, seg_max, VIRTQ_CHAIN_MAX - 2));
	virtio_mmio_access(vdev, VIRTIO_MMIO_CONFIG + offsetof(struct virtio_blk_config, blk_size),
			   (uint8_t *)&blk_size, 4, false);
	cr_assert(eq(u32, blk_size, 512));
	fdrv_wr(&drv, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	f = fdrv_rd(&drv, VIRTIO_MMIO_DEVICE_FEATURES);
	cr_assert(eq(u32, f & (1u << VIRTIO_BLK_F_RO), 1u << VIRTIO_BLK_F_RO));
	cr_assert(eq(u32, f & (1u << VIRTIO_BLK_F_FLUSH), 1u << VIRTIO_BLK_F_FLUSH));
	cr_assert(eq(u32, f & (1u << VIRTIO_BLK_F_SEG_MAX), 1u << VIRTIO_BLK_F_SEG_MAX));
	cr_assert(eq(u32, f & (1u << VIRTIO_BLK_F_WRITE_ZEROES), 0));
}

Test(virtio_blk_raw, read)
{
	cr_assert(eq(long, request(VIRTIO_BLK_T_IN, 3, 1024, true), 1025));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_OK));
	cr_assert(data_is_pattern(3 * 512, 1024));
	/* The last sector. */
	cr_assert(eq(long, request(VIRTIO_BLK_T_IN, IMAGE_LEN / 512 - 1, 512, true), 513));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_OK));
	cr_assert(data_is_pattern(IMAGE_LEN - 512, 512));
}

Test(virtio_blk_raw, split_segments)
{
	/* The header in two pieces, the data in three, the status sharing the last one. */
	struct seg s[] = {
		{HDR_GPA, 8, false},	     {HDR_GPA + 8, 8, false},	  {DATA_GPA, 100, true},
		{DATA_GPA + 100, 412, true}, {DATA_GPA + 512, 513, true},
	};

	put_hdr(VIRTIO_BLK_T_IN, 5);
	ram[DATA_GPA + 1024] = 0xee;
	cr_assert(eq(long, submit(s, 5), 1025));
	cr_assert(data_is_pattern(5 * 512, 1024));
	cr_assert(eq(u8, ram[DATA_GPA + 1024], VIRTIO_BLK_S_OK));
}

Test(virtio_blk_raw, out_of_range_and_bad_lengths_are_ioerr)
{
	cr_assert(eq(long, request(VIRTIO_BLK_T_IN, IMAGE_LEN / 512, 512, true), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_IOERR));
	cr_assert(eq(long, request(VIRTIO_BLK_T_IN, IMAGE_LEN / 512 - 1, 1024, true), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_IOERR));
	cr_assert(eq(long, request(VIRTIO_BLK_T_IN, UINT64_MAX, 512, true), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_IOERR));
	cr_assert(eq(long, request(VIRTIO_BLK_T_IN, 0, 100, true), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_IOERR));
	cr_assert(not(fdrv_needs_reset(&drv)));
}

Test(virtio_blk_raw, write_to_read_only_is_ioerr)
{
	memset(ram + DATA_GPA, 0x5a, 512);
	cr_assert(eq(long, request(VIRTIO_BLK_T_OUT, 0, 512, false), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_IOERR));
	cr_assert(eq(long, request(VIRTIO_BLK_T_IN, 0, 512, true), 513));
	cr_assert(data_is_pattern(0, 512));
}

Test(virtio_blk_raw, get_id_flush_and_unknown)
{
	cr_assert(eq(long, request(VIRTIO_BLK_T_GET_ID, 0, VIRTIO_BLK_ID_BYTES, true), 21));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_OK));
	cr_assert(eq(int, memcmp(ram + DATA_GPA, "test-serial\0\0\0\0\0\0\0\0\0", 20), 0));
	cr_assert(eq(long, request(VIRTIO_BLK_T_FLUSH, 0, 0, false), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_OK));
	cr_assert(eq(long, request(99, 0, 0, false), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_UNSUPP));
	cr_assert(not(fdrv_needs_reset(&drv)));
}

Test(virtio_blk_raw, chain_without_status_needs_reset)
{
	struct seg s[] = {{HDR_GPA, 16, false}, {DATA_GPA, 512, false}};

	put_hdr(VIRTIO_BLK_T_IN, 0);
	cr_assert(eq(long, submit(s, 2), -1));
	cr_assert(fdrv_needs_reset(&drv));
	cr_assert(eq(u8, ram[STATUS_GPA], 0xee), "no status written");
}

Test(virtio_blk_raw, short_header_needs_reset)
{
	struct seg s[] = {{HDR_GPA, 8, false}, {STATUS_GPA, 1, true}};

	put_hdr(VIRTIO_BLK_T_IN, 0);
	cr_assert(eq(long, submit(s, 2), -1));
	cr_assert(fdrv_needs_reset(&drv));
	/* The driver resets and the device works again. */
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS, 0);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_STATUS), 0));
}

Test(virtio_blk_rw, write_flush_read_back_base_untouched)
{
	uint8_t base[512];
	int fd;

	fdrv_wr(&drv, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_DEVICE_FEATURES) & (1u << VIRTIO_BLK_F_RO), 0));
	memset(ram + DATA_GPA, 0x5a, 1024);
	cr_assert(eq(long, request(VIRTIO_BLK_T_OUT, 7, 1024, false), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_OK));
	cr_assert(eq(long, request(VIRTIO_BLK_T_FLUSH, 0, 0, false), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_OK));
	memset(ram + DATA_GPA, 0, 2048);
	cr_assert(eq(long, request(VIRTIO_BLK_T_IN, 6, 2048, true), 2049));
	cr_assert(data_is_pattern(6 * 512, 512));
	cr_assert(fake_mem_all(ram + DATA_GPA + 512, 1024, 0x5a));
	for (uint32_t i = 0; i < 512; i++)
		cr_assert(eq(u8, ram[DATA_GPA + 1536 + i], pattern(9 * 512 + i)));
	/* The base image is never written. */
	fd = open(raw_path, O_RDONLY);
	cr_assert(fd >= 0);
	cr_assert(eq(long, (long)pread(fd, base, 512, 7 * 512), 512));
	close(fd);
	for (uint32_t i = 0; i < 512; i++)
		cr_assert(eq(u8, base[i], pattern(7 * 512 + i)));
}

Test(virtio_blk_rw, write_out_of_range_is_ioerr)
{
	cr_assert(eq(long, request(VIRTIO_BLK_T_OUT, IMAGE_LEN / 512, 512, false), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_IOERR));
	cr_assert(eq(long, request(VIRTIO_BLK_T_OUT, 0, 511, false), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_IOERR));
}

Test(virtio_blk_rw, write_zeroes_and_discard)
{
	struct virtio_blk_discard_write_zeroes r = {.sector = 2, .num_sectors = 3};

	memcpy(ram + DATA_GPA, &r, sizeof(r));
	cr_assert(eq(long, request(VIRTIO_BLK_T_WRITE_ZEROES, 0, 16, false), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_OK));
	memset(ram + DATA_GPA, 0xff, 2560);
	cr_assert(eq(long, request(VIRTIO_BLK_T_IN, 1, 2560, true), 2561));
	cr_assert(data_is_pattern(512, 512));
	cr_assert(fake_mem_all(ram + DATA_GPA + 512, 1536, 0));
	for (uint32_t i = 0; i < 512; i++)
		cr_assert(eq(u8, ram[DATA_GPA + 2048 + i], pattern(5 * 512 + i)));
	/* Discard takes no flags; a range past the end is an I/O error. */
	r = (struct virtio_blk_discard_write_zeroes){.sector = 0, .num_sectors = 1, .flags = 1};
	memcpy(ram + DATA_GPA, &r, sizeof(r));
	cr_assert(eq(long, request(VIRTIO_BLK_T_DISCARD, 0, 16, false), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_UNSUPP));
	r = (struct virtio_blk_discard_write_zeroes){.sector = IMAGE_LEN / 512, .num_sectors = 1};
	memcpy(ram + DATA_GPA, &r, sizeof(r));
	cr_assert(eq(long, request(VIRTIO_BLK_T_DISCARD, 0, 16, false), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_IOERR));
}

Test(virtio_blk_ro, read_only_overlay_refuses_writes)
{
	fdrv_wr(&drv, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_DEVICE_FEATURES) & (1u << VIRTIO_BLK_F_RO),
		     1u << VIRTIO_BLK_F_RO));
	memset(ram + DATA_GPA, 0x5a, 512);
	cr_assert(eq(long, request(VIRTIO_BLK_T_OUT, 0, 512, false), 1));
	cr_assert(eq(u8, ram[STATUS_GPA], VIRTIO_BLK_S_IOERR));
	cr_assert(eq(long, request(VIRTIO_BLK_T_IN, 0, 512, true), 513));
	cr_assert(data_is_pattern(0, 512));
}

/* Post chain `k` (2 descriptors at 2k, 2k+1) without kicking: the header and, for a write,
 * its data in one readable buffer; for a read its data and the status in one writable
 * buffer; for anything else the status alone. Each chain has its own buffers. */
#define MULTI_DATA(k)	(DATA_GPA + (k)*8192u)
#define MULTI_STATUS(k) (STATUS_GPA + (k))
static void post2(unsigned k, uint32_t type, uint64_t sector, uint32_t len)
{
	struct vring_desc *desc = fdrv_desc(&drv, 0);
	struct virtio_blk_outhdr h = {.type = type, .sector = sector};
	uint64_t hdr = MULTI_DATA(k);

	memcpy(ram + hdr, &h, sizeof(h));
	desc[2 * k] = (struct vring_desc){
		.addr = hdr, .len = 16, .flags = VRING_DESC_F_NEXT, .next = (uint16_t)(2 * k + 1)};
	if (type == VIRTIO_BLK_T_OUT) {
		desc[2 * k].len = 16 + len;
		desc[2 * k + 1] = (struct vring_desc){
			.addr = MULTI_STATUS(k), .len = 1, .flags = VRING_DESC_F_WRITE};
	} else if (type == VIRTIO_BLK_T_IN) {
		desc[2 * k + 1] = (struct vring_desc){
			.addr = hdr + 16, .len = len + 1, .flags = VRING_DESC_F_WRITE};
	} else {
		desc[2 * k + 1] = (struct vring_desc){
			.addr = MULTI_STATUS(k), .len = 1, .flags = VRING_DESC_F_WRITE};
	}
	fdrv_offer(&drv, 0, (uint16_t)(2 * k));
}

Test(virtio_blk_rw, requests_in_flight_and_flush_is_a_barrier)
{
	const volatile struct vring_used *used = fdrv_used(&drv, 0);
	bool seen[7] = {false};

	/* Three 4 KiB writes (depth is 4), a flush, three reads of what they wrote. */
	for (unsigned k = 0; k < 3; k++) {
		memset(ram + MULTI_DATA(k) + 16, 0x10 + (int)k, 4096);
		post2(k, VIRTIO_BLK_T_OUT, 8 * k + 1, 4096);
	}
	post2(3, VIRTIO_BLK_T_FLUSH, 0, 0);
	for (unsigned k = 4; k < 7; k++)
		post2(k, VIRTIO_BLK_T_IN, 8 * (k - 4) + 1, 4096);
	fdrv_kick(&drv, 0);
	for (int i = 0; i < 200 && used->idx != 7; i++)
		cr_assert(evloop_run_once(&vm.loop, 10) >= 0);
	cr_assert(eq(u16, used->idx, 7), "every request completed");
	cr_assert(not(fdrv_needs_reset(&drv)));
	for (unsigned i = 0; i < 7; i++) {
		unsigned k = used->ring[i].id / 2;

		cr_assert(k < 7 && !seen[k]);
		seen[k] = true;
		/* Writes first (in any order), then the flush, then the reads. */
		cr_assert(i < 3 ? k < 3 : i == 3 ? k == 3 : k >= 4, "used[%u] is chain %u", i, k);
	}
	for (unsigned k = 0; k < 4; k++)
		cr_assert(eq(u8, ram[MULTI_STATUS(k)], VIRTIO_BLK_S_OK));
	for (unsigned k = 4; k < 7; k++) {
		cr_assert(eq(u8, ram[MULTI_DATA(k) + 16 + 4096], VIRTIO_BLK_S_OK));
		cr_assert(fake_mem_all(ram + MULTI_DATA(k) + 16, 4096, (uint8_t)(0x10 + k - 4)));
	}
}

Test(virtio_blk_rw, reset_with_requests_in_flight)
{
	const volatile struct vring_used *used = fdrv_used(&drv, 0);
	uint16_t returned;

	for (unsigned k = 0; k < 4; k++)
		post2(k, VIRTIO_BLK_T_IN, 8 * k, 4096);
	/* Reads the page cache holds complete inside the kick; others are still in flight on
	 * io_uring, and only the event loop reaps them. */
	fdrv_kick(&drv, 0);
	returned = used->idx;
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS, 0);
	for (int i = 0; i < 20; i++)
		cr_assert(evloop_run_once(&vm.loop, 10) >= 0);
	cr_assert(eq(u16, used->idx, returned), "nothing returned to a queue that was reset");
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_STATUS), 0));
}

/*
 * A queue kept full of requests that complete at once (GET_ID) is served 64 requests per pass
 * (BLK_BUDGET), and the device kicks itself for the rest: the event loop comes back to it
 * instead of staying in the queue for ever.
 */
Test(virtio_blk_big, a_pass_takes_at_most_the_budget_and_comes_back)
{
	struct vring_desc *desc = fdrv_desc(&drv, 0);
	const volatile struct vring_used *used = fdrv_used(&drv, 0);
	const unsigned n = 128, budget = 64;

	put_hdr(VIRTIO_BLK_T_GET_ID, 0);
	for (unsigned k = 0; k < n; k++) {
		desc[2 * k] = (struct vring_desc){.addr = HDR_GPA,
						  .len = 16,
						  .flags = VRING_DESC_F_NEXT,
						  .next = (uint16_t)(2 * k + 1)};
		desc[2 * k + 1] = (struct vring_desc){
			.addr = DATA_GPA + 32 * k, .len = 21, .flags = VRING_DESC_F_WRITE};
		fdrv_add(&drv, 0, (uint16_t)(2 * k));
	}
	fdrv_publish(&drv, 0);
	/* Without a VM, the kick is served right here, in the QueueNotify access. */
	fdrv_kick(&drv, 0);
	cr_assert(eq(u16, used->idx, budget), "one pass took %u requests", used->idx);
	/* The device's own kick brings the event loop back for the next pass. */
	cr_assert(eq(int, evloop_run_once(&vm.loop, 0), 1));
	cr_assert(eq(u16, used->idx, (uint16_t)n));
	/* Nothing is left, so nothing more was kicked. */
	cr_assert(eq(int, evloop_run_once(&vm.loop, 0), 0));
	for (unsigned k = 0; k < n; k++) {
		cr_assert(eq(u32, used->ring[k].len, 21));
		cr_assert(eq(str, (char *)(ram + DATA_GPA + 32 * k), "test-serial"));
		cr_assert(eq(u8, ram[DATA_GPA + 32 * k + 20], VIRTIO_BLK_S_OK));
	}
	cr_assert(not(fdrv_needs_reset(&drv)));
}

/* A request costs the budget one unit per 64 KiB its chain spans besides its own: requests of
 * 4 MiB are taken one per pass, however many the guest queued. */
Test(virtio_blk_big, long_requests_take_the_whole_budget)
{
	struct vring_desc *desc = fdrv_desc(&drv, 0);
	const volatile struct vring_used *used = fdrv_used(&drv, 0);
	const unsigned n = 3;

	/* Reads of 4 MiB at sector 0: beyond this 1 MiB disk, so each is a quick IOERR; what
	 * a request costs is the length of its chain, not the work it turned out to be. */
	put_hdr(VIRTIO_BLK_T_IN, 0);
	for (unsigned k = 0; k < n; k++) {
		desc[3 * k] = (struct vring_desc){.addr = HDR_GPA,
						  .len = 16,
						  .flags = VRING_DESC_F_NEXT,
						  .next = (uint16_t)(3 * k + 1)};
		desc[3 * k + 1] =
			(struct vring_desc){.addr = 0x1000000,
					    .len = 4 * MIB,
					    .flags = VRING_DESC_F_WRITE | VRING_DESC_F_NEXT,
					    .next = (uint16_t)(3 * k + 2)};
		desc[3 * k + 2] = (struct vring_desc){
			.addr = STATUS_GPA + k, .len = 1, .flags = VRING_DESC_F_WRITE};
		fdrv_add(&drv, 0, (uint16_t)(3 * k));
	}
	fdrv_publish(&drv, 0);
	fdrv_kick(&drv, 0);
	cr_assert(eq(u16, used->idx, 1), "one pass took %u requests of 4 MiB", used->idx);
	for (unsigned pass = 2; pass <= n; pass++) {
		cr_assert(eq(int, evloop_run_once(&vm.loop, 0), 1));
		cr_assert(eq(u16, used->idx, (uint16_t)pass));
	}
	cr_assert(eq(int, evloop_run_once(&vm.loop, 0), 0));
	for (unsigned k = 0; k < n; k++)
		cr_assert(eq(u8, ram[STATUS_GPA + k], VIRTIO_BLK_S_IOERR));
}
