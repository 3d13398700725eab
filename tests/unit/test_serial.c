/* SPDX-License-Identifier: Apache-2.0 */
/* vmm/serial.c: the 8250 as Linux's driver and payloads use it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "fake_vm.h"
#include "payload_abi.h"

#define COM1 0x3f8

static struct vm vm;
static struct serial *s;
static int pipe_fds[2];

static void setup(void)
{
	fake_vm_init(&vm);
	cr_assert(eq(int, pipe2(pipe_fds, O_NONBLOCK), 0));
	cr_assert(eq(int, serial_create(&vm, pipe_fds[1], &s), 0));
}

static void teardown(void)
{
	serial_destroy(s);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	fake_vm_destroy(&vm);
}

TestSuite(serial, .init = setup, .fini = teardown);

static void put(const char *str)
{
	while (*str)
		fake_vm_outb(&vm, COM1, (uint8_t)*str++);
}

Test(serial, transmits_to_the_output_fd)
{
	char buf[32] = {0};

	put("hi\n");
	cr_assert(eq(int, (int)read(pipe_fds[0], buf, sizeof(buf)), 3));
	cr_assert(eq(str, buf, "hi\n"));
	/* The transmitter is always empty. */
	cr_assert(eq(u8, fake_vm_inb(&vm, COM1 + 5) & 0x60, 0x60));
}

Test(serial, loopback_for_the_probe)
{
	char buf[4];

	/* Linux's autoconfig: MCR = LOOP | OUT2 | RTS must read back MSR 0x90. */
	fake_vm_outb(&vm, COM1 + 4, 0x10 | 0x0a);
	cr_assert(eq(u8, fake_vm_inb(&vm, COM1 + 6) & 0xf0, 0x90));
	/* In loopback a transmitted byte is received, not sent. */
	fake_vm_outb(&vm, COM1, 'x');
	cr_assert(eq(u8, fake_vm_inb(&vm, COM1 + 5) & 0x01, 0x01));
	cr_assert(eq(u8, fake_vm_inb(&vm, COM1), 'x'));
	cr_assert(eq(int, (int)read(pipe_fds[0], buf, sizeof(buf)), -1), "nothing reached the fd");
}

Test(serial, thr_empty_interrupt)
{
	cr_assert(eq(u8, fake_vm_inb(&vm, COM1 + 2), 0x01), "no interrupt pending");
	/* Enabling THRI with the THR empty raises it at once; reading IIR acknowledges it. */
	fake_vm_outb(&vm, COM1 + 1, 0x02);
	cr_assert(eq(u8, fake_vm_inb(&vm, COM1 + 2), 0x02));
	cr_assert(eq(u8, fake_vm_inb(&vm, COM1 + 2), 0x01));
	/* Each transmitted byte raises it again. */
	fake_vm_outb(&vm, COM1, 'a');
	cr_assert(eq(u8, fake_vm_inb(&vm, COM1 + 2), 0x02));
}

Test(serial, divisor_latch_does_not_transmit)
{
	char buf[4];

	fake_vm_outb(&vm, COM1 + 3, 0x80); /* DLAB */
	fake_vm_outb(&vm, COM1, 0x01);
	fake_vm_outb(&vm, COM1 + 1, 0x02);
	cr_assert(eq(u8, fake_vm_inb(&vm, COM1), 0x01));
	cr_assert(eq(u8, fake_vm_inb(&vm, COM1 + 1), 0x02));
	fake_vm_outb(&vm, COM1 + 3, 0x03);
	cr_assert(eq(u8, fake_vm_inb(&vm, COM1 + 1), 0x00), "IER untouched by the DLM write");
	cr_assert(eq(int, (int)read(pipe_fds[0], buf, sizeof(buf)), -1));
}

Test(serial, panic_line_sets_the_flag)
{
	put("[    1.0] Kernel panic - not syncing");
	cr_assert(not(atomic_load(&vm.guest_panicked)), "only complete lines count");
	put(": Attempted to kill init!\n");
	cr_assert(atomic_load(&vm.guest_panicked));
}

Test(serial, long_lines_are_bounded)
{
	/* 10 KiB without a newline: scanned in pieces, never overflowing the line buffer. */
	for (int i = 0; i < 10240; i++)
		fake_vm_outb(&vm, COM1, 'z');
	cr_assert(not(atomic_load(&vm.guest_panicked)));
}

Test(serial, payload_mmio_window)
{
	uint8_t c = 'm', lsr = 0;
	char buf[4] = {0};

	cr_assert(bus_access(&vm.mmio, PAYLOAD_UART_GPA, &c, 1, true));
	cr_assert(bus_access(&vm.mmio, PAYLOAD_UART_GPA + 5, &lsr, 1, false));
	cr_assert(eq(u8, lsr & 0x20, 0x20));
	cr_assert(eq(int, (int)read(pipe_fds[0], buf, sizeof(buf)), 1));
	cr_assert(eq(chr, buf[0], 'm'));
}

/* The guest decides how much it prints; the console stops at the cap with one notice line, and
 * a panic past the cap is still seen. */
Test(serial, output_is_capped)
{
	char buf[512] = {0};
	ssize_t n;

	serial_set_output_max(s, 8);
	put("12345678");
	put("overflow\n");
	put("more\n");
	n = read(pipe_fds[0], buf, sizeof(buf) - 1);
	cr_assert(gt(int, (int)n, 8));
	cr_assert(
		eq(ptr, strstr(buf, "12345678\n[sandbox-vmm: console output beyond 8 bytes"), buf),
		"%s", buf);
	cr_assert(eq(ptr, strstr(buf, "overflow"), NULL), "%s", buf);
	cr_assert(eq(ptr, strstr(buf + 9, "more"), NULL), "%s", buf);
	put("Kernel panic - not syncing: x\n");
	cr_assert(atomic_load(&vm.guest_panicked));
}

static void *stop_later(void *arg)
{
	struct vm *v = arg;

	usleep(200 * 1000);
	atomic_store(&v->stopping, true);
	return NULL;
}

/* A console that takes no bytes (a full pipe nobody reads) makes the vCPU wait, but not past
 * a stop of the VM: the byte is dropped then, and the vCPU gets back to its run loop. */
Test(serial_stalled, a_full_console_does_not_hold_a_stopping_vcpu, .timeout = 10)
{
	struct vm v;
	struct serial *ser;
	struct timespec t0, t1;
	char fill[4096] = {0};
	pthread_t t;
	int fds[2];
	double ms;

	fake_vm_init(&v);
	cr_assert(eq(int, pipe2(fds, 0), 0));
	/* Fill the pipe, then make its writes blocking again, as a console's are. */
	cr_assert(eq(int, fcntl(fds[1], F_SETFL, O_NONBLOCK), 0));
	while (write(fds[1], fill, sizeof(fill)) > 0)
		;
	cr_assert(eq(int, fcntl(fds[1], F_SETFL, 0), 0));
	cr_assert(eq(int, serial_create(&v, fds[1], &ser), 0));
	cr_assert(eq(int, pthread_create(&t, NULL, stop_later, &v), 0));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fake_vm_outb(&v, COM1, 'x');
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pthread_join(t, NULL);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	cr_assert(ge(dbl, ms, 150.0), "the write waited %.0f ms", ms);
	cr_assert(lt(dbl, ms, 1000.0), "the write waited %.0f ms after the stop", ms);
	serial_destroy(ser);
	close(fds[0]);
	close(fds[1]);
	fake_vm_destroy(&v);
}

static void ignore_access(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool write)
{
}

/* A serial port whose making fails half way (its MMIO window taken) leaves nothing behind: no
 * port range pointing at freed memory, no teardown registered with the VM. */
Test(serial_make, a_failed_make_leaves_no_range)
{
	struct vm v;
	struct serial *ser = NULL;
	uint8_t b = 0;
	int p[2];

	fake_vm_init(&v);
	cr_assert(eq(int, pipe2(p, O_NONBLOCK), 0));
	cr_assert(
		eq(int, bus_register(&v.mmio, PAYLOAD_UART_GPA, 8, ignore_access, &v, "taken"), 0));
	cr_assert(eq(int, serial_create(&v, p[1], &ser), -EBUSY));
	cr_assert(not(bus_access(&v.pio, COM1, &b, 1, false)), "COM1 still dispatches");
	cr_assert(eq(u32, v.pio.nranges, 0));
	cr_assert(eq(u32, v.mmio.nranges, 1));
	cr_assert(eq(u32, v.ndevices, 0));
	close(p[0]);
	close(p[1]);
	fake_vm_destroy(&v);
}
