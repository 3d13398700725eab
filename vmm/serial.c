/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An 8250 UART (16450 flavour: no FIFO) at 0x3f8 on IRQ 4, enough for Linux's 8250 driver and
 * for payloads: transmit to an fd, the loopback mode the driver's probe uses, a transmitter
 * that is always empty, and its interrupt. Reached at port 0x3f8 and, for payload guests, at
 * the MMIO window of payload_abi.h. Lines are also watched for a kernel panic, which
 * changes the VMM's exit status.
 *
 * A guest's flood of output costs its own vCPU thread (one exit and one write per byte) and
 * nothing on the I/O thread. A console that does not take bytes (a pipe or terminal whose
 * reader stalls) makes the vCPU wait, but never past a stop of the VM: the wait is a poll in
 * slices of SERIAL_WAIT_MS that gives up once the VM is stopping.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "payload_abi.h"
#include "vmm.h"

#define SERIAL_PORT 0x3f8
#define SERIAL_IRQ  4

#define UART_RX	 0 /* in: receive buffer (DLAB=0) */
#define UART_TX	 0 /* out: transmit holding (DLAB=0) */
#define UART_DLL 0 /* divisor latch low (DLAB=1) */
#define UART_IER 1 /* interrupt enable (DLAB=0) */
#define UART_DLM 1 /* divisor latch high (DLAB=1) */
#define UART_IIR 2 /* in: interrupt identification */
#define UART_FCR 2 /* out: FIFO control, ignored: we are a 16450 */
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define UART_MSR 6
#define UART_SCR 7

#define UART_LCR_DLAB	0x80
#define UART_IER_RDI	0x01
#define UART_IER_THRI	0x02
#define UART_IIR_NO_INT 0x01
#define UART_IIR_THRI	0x02
#define UART_IIR_RDI	0x04
#define UART_LSR_DR	0x01
#define UART_LSR_THRE	0x20
#define UART_LSR_TEMT	0x40
#define UART_MCR_DTR	0x01
#define UART_MCR_RTS	0x02
#define UART_MCR_OUT1	0x04
#define UART_MCR_OUT2	0x08
#define UART_MCR_LOOP	0x10
#define UART_MSR_CTS	0x10
#define UART_MSR_DSR	0x20
#define UART_MSR_RI	0x40
#define UART_MSR_DCD	0x80

#define SERIAL_LINE_MAX 256
/* How long a vCPU waits at a time for a console that takes no bytes before it looks whether
 * the VM is stopping (the stop's signal may come just before the wait and be missed). */
#define SERIAL_WAIT_MS	100
#define PANIC_MARK	"Kernel panic - not syncing"

struct serial {
	struct vm *vm;
	int out_fd;
	bool out_is_file;     /* a regular file: writes never block */
	pthread_mutex_t lock; /* vCPUs access the UART concurrently */
	uint8_t ier, lcr, mcr, scr, dll, dlm;
	uint8_t rx; /* one byte, from loopback only */
	bool rx_full;
	bool thr_pending; /* a THR-empty interrupt is due */
	int irq_level;
	char line[SERIAL_LINE_MAX];
	size_t line_len;
	struct log_ratelimit write_rl;
	uint64_t out_len; /* the output file's size (when a file) plus what we wrote */
	uint64_t out_max; /* beyond it the guest's bytes are dropped (one notice says so) */
	bool out_capped;
};

static uint8_t serial_iir(const struct serial *s)
{
	if ((s->ier & UART_IER_RDI) && s->rx_full)
		return UART_IIR_RDI;
	if ((s->ier & UART_IER_THRI) && s->thr_pending)
		return UART_IIR_THRI;
	return UART_IIR_NO_INT;
}

/* Raise or lower IRQ 4 to match the interrupt state; only edges reach KVM. */
static void serial_update_irq(struct serial *s)
{
	int level = serial_iir(s) != UART_IIR_NO_INT;
	struct kvm_irq_level irq = {.irq = SERIAL_IRQ, .level = (uint32_t)level};

	if (level == s->irq_level)
		return;
	s->irq_level = level;
	if (ioctl(s->vm->vm_fd, KVM_IRQ_LINE, &irq) < 0 && log_ratelimit_ok(&s->write_rl, 1))
		log_warn("serial: KVM_IRQ_LINE: %s", strerror(errno));
}

/* A complete console line: look for the kernel's panic message. */
static void serial_scan_line(struct serial *s)
{
	s->line[s->line_len] = '\0';
	if (strstr(s->line, PANIC_MARK))
		atomic_store(&s->vm->guest_panicked, true);
	s->line_len = 0;
}

/* Write `len` bytes to the console: what write() returns (all of them, or part), or -1 with
 * errno set; -1 with ECANCELED when the VM stopped while the console took no bytes. */
static ssize_t serial_write_out(struct serial *s, const void *buf, size_t len)
{
	for (;;) {
		struct pollfd p = {.fd = s->out_fd, .events = POLLOUT};
		ssize_t n;

		if (atomic_load(&s->vm->stopping)) {
			errno = ECANCELED;
			return -1;
		}
		if (!s->out_is_file) {
			int ready = poll(&p, 1, SERIAL_WAIT_MS);

			if (ready == 0 || (ready < 0 && errno == EINTR))
				continue;
			/* POLLERR or POLLHUP: the write below says what is wrong. */
		}
		n = write(s->out_fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		return n;
	}
}

static void serial_transmit(struct serial *s, uint8_t byte)
{
	ssize_t n;

	if (s->mcr & UART_MCR_LOOP) {
		s->rx = byte;
		s->rx_full = true;
		return;
	}
	/* The guest decides how much it prints: the console file stops growing at out_max. */
	if (s->out_len >= s->out_max) {
		if (!s->out_capped) {
			char note[128];
			int len = snprintf(
				note, sizeof(note),
				"\n[sandbox-vmm: console output beyond %llu bytes dropped]\n",
				(unsigned long long)s->out_max);

			s->out_capped = true;
			if (serial_write_out(s, note, (size_t)len) < 0) {
				/* as below: the guest goes on either way */
			}
		}
	} else {
		n = serial_write_out(s, &byte, 1);
		if (n < 0 && errno != ECANCELED && log_ratelimit_ok(&s->write_rl, 1))
			log_warn("serial: console write: %s", strerror(errno));
		if (n > 0)
			s->out_len++;
	}
	if (byte == '\n' || s->line_len == SERIAL_LINE_MAX - 1)
		serial_scan_line(s);
	else
		s->line[s->line_len++] = (char)byte;
}

static uint8_t serial_msr(const struct serial *s)
{
	uint8_t m = s->mcr;

	if (!(m & UART_MCR_LOOP))
		return UART_MSR_DCD | UART_MSR_DSR | UART_MSR_CTS; /* a terminal is always there */
	/* Loopback wires the modem outputs back to the inputs: the driver's probe checks this. */
	return (uint8_t)(((m & UART_MCR_RTS) ? UART_MSR_CTS : 0) |
			 ((m & UART_MCR_DTR) ? UART_MSR_DSR : 0) |
			 ((m & UART_MCR_OUT1) ? UART_MSR_RI : 0) |
			 ((m & UART_MCR_OUT2) ? UART_MSR_DCD : 0));
}

static uint8_t serial_read(struct serial *s, uint64_t reg)
{
	bool dlab = s->lcr & UART_LCR_DLAB;
	uint8_t v;

	switch (reg) {
	case UART_RX:
		if (dlab)
			return s->dll;
		v = s->rx;
		s->rx_full = false;
		return v;
	case UART_IER:
		return dlab ? s->dlm : s->ier;
	case UART_IIR:
		v = serial_iir(s);
		if (v == UART_IIR_THRI) /* reading IIR acknowledges a THR-empty interrupt */
			s->thr_pending = false;
		return v;
	case UART_LCR:
		return s->lcr;
	case UART_MCR:
		return s->mcr;
	case UART_LSR:
		return UART_LSR_THRE | UART_LSR_TEMT | (s->rx_full ? UART_LSR_DR : 0);
	case UART_MSR:
		return serial_msr(s);
	case UART_SCR:
		return s->scr;
	}
	return 0;
}

static void serial_write(struct serial *s, uint64_t reg, uint8_t v)
{
	bool dlab = s->lcr & UART_LCR_DLAB;

	switch (reg) {
	case UART_TX:
		if (dlab) {
			s->dll = v;
			return;
		}
		serial_transmit(s, v);
		s->thr_pending = true; /* sent at once: the holding register is empty again */
		return;
	case UART_IER:
		if (dlab) {
			s->dlm = v;
			return;
		}
		/* Enabling the THR-empty interrupt while the THR is empty raises it at once. */
		if ((v & UART_IER_THRI) && !(s->ier & UART_IER_THRI))
			s->thr_pending = true;
		s->ier = v & 0x0f;
		return;
	case UART_FCR:
		return;
	case UART_LCR:
		s->lcr = v;
		return;
	case UART_MCR:
		s->mcr = v & 0x1f;
		return;
	case UART_SCR:
		s->scr = v;
		return;
	}
}

static void serial_access(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool write)
{
	struct serial *s = opaque;

	pthread_mutex_lock(&s->lock);
	/* Byte registers: a wider access touches only the first (Linux never does this). */
	if (write)
		serial_write(s, offset, data[0]);
	else {
		memset(data, 0, len);
		data[0] = serial_read(s, offset);
	}
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

void serial_set_output_max(struct serial *s, uint64_t bytes)
{
	pthread_mutex_lock(&s->lock);
	s->out_max = bytes;
	pthread_mutex_unlock(&s->lock);
}

static void serial_destroy_dev(void *s)
{
	serial_destroy(s);
}

int serial_create(struct vm *vm, int out_fd, struct serial **out)
{
	struct serial *s = calloc(1, sizeof(*s));
	struct stat st;
	int err;

	if (!s)
		return -ENOMEM;
	s->vm = vm;
	s->out_fd = out_fd;
	s->out_max = SERIAL_OUT_MAX;
	if (fstat(out_fd, &st) == 0 && S_ISREG(st.st_mode)) {
		s->out_len = (uint64_t)st.st_size;
		s->out_is_file = true;
	}
	s->mcr = UART_MCR_OUT2;
	pthread_mutex_init(&s->lock, NULL);
	/* The same registers at the port Linux knows and at the MMIO window payloads use; its
	 * teardown with the VM's. */
	err = vm_device_add(vm, s, serial_destroy_dev);
	if (!err)
		err = bus_register(&vm->pio, SERIAL_PORT, 8, serial_access, s, "serial");
	if (!err)
		err = bus_register(&vm->mmio, PAYLOAD_UART_GPA, 8, serial_access, s, "serial-mmio");
	if (err) {
		vm_device_cancel(vm, s);
		bus_unregister(&vm->pio, s);
		bus_unregister(&vm->mmio, s);
		free(s);
		return err;
	}
	*out = s;
	return 0;
}

void serial_destroy(struct serial *s)
{
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* The registers, as one little struct of bytes: ier, lcr, mcr, scr, dll, dlm, rx, flags. */
enum { SERIAL_F_RX_FULL = 1, SERIAL_F_THR_PENDING = 2, SERIAL_F_IRQ = 4 };

void serial_save(struct serial *s, struct snap_writer *w)
{
	uint8_t regs[8];

	pthread_mutex_lock(&s->lock);
	regs[0] = s->ier;
	regs[1] = s->lcr;
	regs[2] = s->mcr;
	regs[3] = s->scr;
	regs[4] = s->dll;
	regs[5] = s->dlm;
	regs[6] = s->rx;
	regs[7] = (uint8_t)((s->rx_full ? SERIAL_F_RX_FULL : 0) |
			    (s->thr_pending ? SERIAL_F_THR_PENDING : 0) |
			    (s->irq_level ? SERIAL_F_IRQ : 0));
	pthread_mutex_unlock(&s->lock);
	snapw_begin(w, "serial");
	snapw_prop(w, "regs", regs, sizeof(regs));
	snapw_end(w);
}

int serial_load(struct serial *s, struct snap_reader *r, int parent)
{
	int node = snapr_node(r, parent, "serial"), err;
	uint8_t regs[8];

	if (node < 0)
		return node;
	if ((err = snapr_get(r, node, "regs", regs, sizeof(regs))) < 0)
		return err;
	if ((regs[0] & ~0x0fu) || (regs[2] & ~0x1fu) || (regs[7] & ~7u))
		return snapr_fail(r, -EBADMSG, "serial/regs: bits no UART has");
	pthread_mutex_lock(&s->lock);
	s->ier = regs[0];
	s->lcr = regs[1];
	s->mcr = regs[2];
	s->scr = regs[3];
	s->dll = regs[4];
	s->dlm = regs[5];
	s->rx = regs[6];
	s->rx_full = regs[7] & SERIAL_F_RX_FULL;
	s->thr_pending = regs[7] & SERIAL_F_THR_PENDING;
	/* The IOAPIC's saved pin state already has the line's level: only remember it. */
	s->irq_level = (regs[7] & SERIAL_F_IRQ) ? 1 : 0;
	pthread_mutex_unlock(&s->lock);
	return 0;
}
