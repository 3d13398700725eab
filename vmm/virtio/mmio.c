/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The virtio-mmio transport, version 2 (virtio 1.x, modern only): the register file, feature
 * negotiation, device status, queue configuration and the interrupt. Devices plug in through
 * struct virtio_ops and never see a register. Every value the guest writes is checked before
 * use; a driver that breaks the protocol gets DEVICE_NEEDS_RESET, never a dead VMM.
 *
 * Queue notifications reach the I/O thread (the main loop) through an ioeventfd on QueueNotify,
 * so a kick does not even exit to user space; where KVM refuses one, QueueNotify is an MMIO
 * exit served on the kicking vCPU. Interrupts leave through an irqfd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>

#include "virtio/virtio.h"

#define MMIO_MAGIC_VIRT	 0x74726976u /* "virt" */
#define MMIO_VERSION_2	 2u
#define VIRTIO_VENDOR_ID 0x53424f58u /* "SBOX" */

#define VIRTIO_INT_USED	  1u
#define VIRTIO_INT_CONFIG 2u

/* Features the transport itself offers: modern virtio, and what queue.c implements. */
#define VIRTIO_TRANSPORT_FEATURES                                                                  \
	((1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_RING_F_EVENT_IDX) |                        \
	 (1ull << VIRTIO_RING_F_INDIRECT_DESC))

static uint64_t virtio_offered(const struct virtio_dev *v)
{
	return v->ops->features(v->dev) | VIRTIO_TRANSPORT_FEATURES;
}

/* Raise the interrupt with `bits` added to InterruptStatus; the irqfd makes KVM inject an edge
 * on the device's GSI. Caller holds the lock. */
static void virtio_raise_locked(struct virtio_dev *v, uint32_t bits)
{
	uint64_t one = 1;

	v->interrupt_status |= bits;
	if (write(v->irq_fd, &one, sizeof(one)) < 0 && log_ratelimit_ok(&v->rl, 1))
		log_warn("virtio-%s: cannot raise IRQ %u: %m", v->ops->name, v->irq);
}

void virtio_notify_used(struct virtio_dev *v)
{
	pthread_mutex_lock(&v->lock);
	virtio_raise_locked(v, VIRTIO_INT_USED);
	pthread_mutex_unlock(&v->lock);
}

void virtio_notify_config(struct virtio_dev *v)
{
	pthread_mutex_lock(&v->lock);
	v->config_generation++;
	virtio_raise_locked(v, VIRTIO_INT_CONFIG);
	pthread_mutex_unlock(&v->lock);
}

static void virtio_needs_reset_locked(struct virtio_dev *v, const char *why)
{
	if (log_ratelimit_ok(&v->rl, 3))
		log_warn("virtio-%s at %#llx: %s: device needs reset", v->ops->name,
			 (unsigned long long)v->base, why);
	/* Marked at any stage of initialisation (a bad queue set-up is refused before
	 * DRIVER_OK); the driver only listens for the config interrupt once it is running. */
	v->status |= VIRTIO_CONFIG_S_NEEDS_RESET;
	v->config_generation++;
	if (v->status & VIRTIO_CONFIG_S_DRIVER_OK)
		virtio_raise_locked(v, VIRTIO_INT_CONFIG);
}

void virtio_set_needs_reset(struct virtio_dev *v, const char *why)
{
	pthread_mutex_lock(&v->lock);
	virtio_needs_reset_locked(v, why);
	pthread_mutex_unlock(&v->lock);
}

/* Status 0: back to the state after creation; the device drops its work first. */
static void virtio_reset_locked(struct virtio_dev *v)
{
	v->ops->reset(v->dev);
	v->status = 0;
	v->device_features_sel = v->driver_features_sel = 0;
	v->driver_features = 0;
	v->queue_sel = 0;
	v->interrupt_status = 0;
	for (unsigned i = 0; i < VIRTIO_QUEUES_MAX; i++)
		virtq_reset(&v->queues[i]);
	memset(v->pending, 0, sizeof(v->pending));
}

static void virtio_write_status(struct virtio_dev *v, uint32_t status)
{
	uint32_t old = v->status;

	if (status == 0) {
		virtio_reset_locked(v);
		return;
	}
	/* Bits only accumulate until a reset (the driver cannot clear one by writing). */
	if ((old & ~status) & 0xff) {
		virtio_needs_reset_locked(v, "device status bits cleared without a reset");
		return;
	}
	if ((status & VIRTIO_CONFIG_S_FEATURES_OK) && !(old & VIRTIO_CONFIG_S_FEATURES_OK)) {
		/* Modern only: without VERSION_1, or with features we never offered, the
		 * negotiation fails and FEATURES_OK does not stick, as the spec says. */
		if (!(v->driver_features & (1ull << VIRTIO_F_VERSION_1)) ||
		    (v->driver_features & ~virtio_offered(v)))
			status &= ~(uint32_t)VIRTIO_CONFIG_S_FEATURES_OK;
	}
	if ((status & VIRTIO_CONFIG_S_DRIVER_OK) && !(old & VIRTIO_CONFIG_S_DRIVER_OK)) {
		if (!(status & VIRTIO_CONFIG_S_FEATURES_OK)) {
			v->status = status & ~(uint32_t)VIRTIO_CONFIG_S_DRIVER_OK;
			virtio_needs_reset_locked(v, "DRIVER_OK before FEATURES_OK");
			return;
		}
		for (unsigned i = 0; i < v->ops->nqueues; i++)
			virtq_set_event_idx(&v->queues[i],
					    v->driver_features & (1ull << VIRTIO_RING_F_EVENT_IDX));
		v->status = status;
		if (v->ops->activate(v->dev, v, v->driver_features) != 0)
			virtio_needs_reset_locked(v, "the device could not start");
		return;
	}
	v->status = status;
}

/* QueueReady = 1 commits the pending ring addresses after checking them. */
static void virtio_queue_ready(struct virtio_dev *v, unsigned qi, uint32_t ready)
{
	struct virtq *q = &v->queues[qi];

	if (!ready) {
		virtq_reset(q);
		return;
	}
	if (v->pending[qi].num == 0 || v->pending[qi].num > v->ops->queue_max ||
	    virtq_configure(q, v->pending[qi].num, v->pending[qi].desc, v->pending[qi].avail,
			    v->pending[qi].used) != 0)
		virtio_needs_reset_locked(v, q->error ? q->error : "bad queue size");
}

static uint32_t virtio_read_reg(struct virtio_dev *v, uint64_t reg)
{
	bool qok = v->queue_sel < v->ops->nqueues;
	uint64_t features;

	switch (reg) {
	case VIRTIO_MMIO_MAGIC_VALUE:
		return MMIO_MAGIC_VIRT;
	case VIRTIO_MMIO_VERSION:
		return MMIO_VERSION_2;
	case VIRTIO_MMIO_DEVICE_ID:
		return v->ops->device_id;
	case VIRTIO_MMIO_VENDOR_ID:
		return VIRTIO_VENDOR_ID;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		features = virtio_offered(v);
		if (v->device_features_sel > 1)
			return 0;
		return (uint32_t)(features >> (32 * v->device_features_sel));
	case VIRTIO_MMIO_QUEUE_NUM_MAX:
		return qok ? v->ops->queue_max : 0;
	case VIRTIO_MMIO_QUEUE_READY:
		return qok ? v->queues[v->queue_sel].ready : 0;
	case VIRTIO_MMIO_INTERRUPT_STATUS:
		return v->interrupt_status;
	case VIRTIO_MMIO_STATUS:
		return v->status;
	case VIRTIO_MMIO_CONFIG_GENERATION:
		return v->config_generation;
	default:
		return 0; /* write-only or reserved */
	}
}

/* Set the low or high half of a 64-bit ring address. */
static void virtio_set_half(uint64_t *addr, uint32_t val, bool high)
{
	if (high)
		*addr = (*addr & 0xffffffffull) | ((uint64_t)val << 32);
	else
		*addr = (*addr & ~0xffffffffull) | val;
}

/* The pending ring address that register `low` (a QUEUE_*_LOW offset) sets. */
static uint64_t *virtio_ring_addr(struct virtio_pending_queue *p, uint64_t low)
{
	if (low == VIRTIO_MMIO_QUEUE_DESC_LOW)
		return &p->desc;
	if (low == VIRTIO_MMIO_QUEUE_AVAIL_LOW)
		return &p->avail;
	return &p->used;
}

static void virtio_write_reg(struct virtio_dev *v, uint64_t reg, uint32_t val)
{
	unsigned qi = v->queue_sel;
	bool qok = qi < v->ops->nqueues;
	/* Queue set-up registers are the driver's only before DRIVER_OK and while not ready. */
	bool qsetup = qok && !(v->status & VIRTIO_CONFIG_S_DRIVER_OK) && !v->queues[qi].ready;

	switch (reg) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL:
		v->device_features_sel = val;
		return;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		if (v->status & VIRTIO_CONFIG_S_FEATURES_OK)
			break;
		if (v->driver_features_sel <= 1)
			virtio_set_half(&v->driver_features, val, v->driver_features_sel == 1);
		return;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL:
		v->driver_features_sel = val;
		return;
	case VIRTIO_MMIO_QUEUE_SEL:
		v->queue_sel = val;
		return;
	case VIRTIO_MMIO_QUEUE_NUM:
		if (!qsetup)
			break;
		v->pending[qi].num = val;
		return;
	case VIRTIO_MMIO_QUEUE_READY:
		if (!qok || (v->status & VIRTIO_CONFIG_S_DRIVER_OK))
			break;
		virtio_queue_ready(v, qi, val);
		return;
	case VIRTIO_MMIO_QUEUE_NOTIFY:
		/* Handled by the caller, outside the lock. */
		return;
	case VIRTIO_MMIO_INTERRUPT_ACK:
		v->interrupt_status &= ~val;
		return;
	case VIRTIO_MMIO_STATUS:
		virtio_write_status(v, val);
		return;
	case VIRTIO_MMIO_QUEUE_DESC_LOW:
	case VIRTIO_MMIO_QUEUE_DESC_HIGH:
	case VIRTIO_MMIO_QUEUE_AVAIL_LOW:
	case VIRTIO_MMIO_QUEUE_AVAIL_HIGH:
	case VIRTIO_MMIO_QUEUE_USED_LOW:
	case VIRTIO_MMIO_QUEUE_USED_HIGH:
		if (!qsetup)
			break;
		/* Each ring address is a LOW register and the HIGH one 4 bytes above it. */
		virtio_set_half(virtio_ring_addr(&v->pending[qi], reg & ~4ull), val, reg & 4);
		return;
	default:
		return; /* read-only or reserved: ignored */
	}
	virtio_needs_reset_locked(v, "register written out of sequence");
}

void virtio_mmio_access(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool write)
{
	struct virtio_dev *v = opaque;
	uint32_t val = 0, notify = UINT32_MAX;

	if (offset >= VIRTIO_MMIO_CONFIG) {
		uint64_t off = offset - VIRTIO_MMIO_CONFIG;

		/* The config space: bounds-checked here, so the device never sees a bad range. */
		if (off > v->ops->config_len || len > v->ops->config_len - off) {
			if (!write)
				memset(data, 0, len);
			return;
		}
		pthread_mutex_lock(&v->lock);
		if (write)
			v->ops->config_write(v->dev, (uint32_t)off, data, len);
		else
			v->ops->config_read(v->dev, (uint32_t)off, data, len);
		pthread_mutex_unlock(&v->lock);
		return;
	}
	/* Registers are 32 bits wide and aligned; anything else reads 0 and is ignored. */
	if (len != 4 || (offset & 3)) {
		if (!write)
			memset(data, 0, len);
		return;
	}
	pthread_mutex_lock(&v->lock);
	if (write) {
		memcpy(&val, data, 4);
		virtio_write_reg(v, offset, val);
		if (offset == VIRTIO_MMIO_QUEUE_NOTIFY && val < v->ops->nqueues &&
		    (v->status & VIRTIO_CONFIG_S_DRIVER_OK) &&
		    !(v->status & VIRTIO_CONFIG_S_NEEDS_RESET))
			notify = val;
	} else {
		val = virtio_read_reg(v, offset);
		memcpy(data, &val, 4);
	}
	pthread_mutex_unlock(&v->lock);
	if (notify != UINT32_MAX)
		v->ops->queue_notify(v->dev, notify);
}

/* A table with a hole is refused at registration, not discovered by a guest at run time. */
static bool virtio_ops_complete(const struct virtio_ops *o)
{
	return o->name && o->features && o->config_read && o->config_write && o->activate &&
	       o->queue_notify && o->quiesce && o->reset && o->destroy && o->nqueues >= 1 &&
	       o->nqueues <= VIRTIO_QUEUES_MAX && o->queue_max >= 1 &&
	       o->queue_max <= VIRTQ_SIZE_MAX && !(o->queue_max & (o->queue_max - 1)) &&
	       o->config_len <= 0x1000 - VIRTIO_MMIO_CONFIG;
}

/* The I/O thread saw notify_fd readable: serve the kicks (every queue of a live device). */
static void virtio_mmio_handle_notify(struct ev_source *src, uint32_t events)
{
	struct virtio_dev *v = src->opaque;
	uint64_t count;

	/* One read drains every kick since the last: the device looks at all its queues. */
	if (read(v->notify_fd, &count, sizeof(count)) != sizeof(count))
		return;
	virtio_mmio_kick_all(v);
}

/*
 * Where a device's word goes in the kernel command line: before a standalone "--" outside
 * quotes, since the kernel hands every word after it to init as its arguments; else at the
 * end.
 */
static size_t virtio_mmio_cmdline_pos(const char *cmdline)
{
	bool quoted = false;

	for (size_t i = 0; cmdline[i]; i++) {
		if (cmdline[i] == '"')
			quoted = !quoted;
		else if (!quoted && cmdline[i] == '-' && cmdline[i + 1] == '-' &&
			 (i == 0 || cmdline[i - 1] == ' ') &&
			 (cmdline[i + 2] == ' ' || cmdline[i + 2] == '\0'))
			return i;
	}
	return strlen(cmdline);
}

/* Insert `word` into `cmdline`; the caller checked that one more space fits. */
static void virtio_mmio_cmdline_insert(char *cmdline, const char *word)
{
	size_t at = virtio_mmio_cmdline_pos(cmdline), len = strlen(cmdline), wlen = strlen(word);

	if (at == len) {
		if (len)
			cmdline[len++] = ' ';
		memcpy(cmdline + len, word, wlen + 1);
		return;
	}
	/* "... -- args" becomes "... WORD -- args": `at` is 0 or follows a space. */
	memmove(cmdline + at + wlen + 1, cmdline + at, len - at + 1);
	memcpy(cmdline + at, word, wlen);
	cmdline[at + wlen] = ' ';
}

static void virtio_mmio_destroy_dev(void *v)
{
	virtio_mmio_destroy(v);
}

int virtio_mmio_add(struct vm *vm, const struct virtio_ops *ops, void *dev, char *cmdline,
		    size_t cmdline_len, struct virtio_dev **out)
{
	struct virtio_dev *v;
	char word[64];
	int n, err;

	if (!virtio_ops_complete(ops))
		return -EINVAL;
	if (vm->nvirtio >= VIRTIO_MMIO_MAX)
		return -ENOSPC;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->vm = vm;
	v->ops = ops;
	v->dev = dev;
	v->base = VIRTIO_MMIO_GPA + (gpa_t)vm->nvirtio * VIRTIO_MMIO_WINDOW;
	v->irq = VIRTIO_MMIO_IRQ_BASE + vm->nvirtio;
	v->notify_fd = -1;
	pthread_mutex_init(&v->lock, NULL);
	for (unsigned i = 0; i < VIRTIO_QUEUES_MAX; i++)
		virtq_init(&v->queues[i], &vm->mem);
	v->irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (v->irq_fd < 0) {
		err = -errno;
		goto fail;
	}
	struct kvm_irqfd irqfd = {.fd = (uint32_t)v->irq_fd, .gsi = v->irq};
	if (vm->vm_fd >= 0 && ioctl(vm->vm_fd, KVM_IRQFD, &irqfd) < 0) {
		err = -errno;
		goto fail;
	}
	v->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (v->notify_fd >= 0 && vm->vm_fd >= 0) {
		struct kvm_ioeventfd io = {
			.addr = v->base + VIRTIO_MMIO_QUEUE_NOTIFY, .len = 4, .fd = v->notify_fd};

		if (ioctl(vm->vm_fd, KVM_IOEVENTFD, &io) < 0) {
			log_debug("virtio-%s: no ioeventfd (%m): kicks are MMIO exits", ops->name);
			close(v->notify_fd);
			v->notify_fd = -1;
		}
	} else if (v->notify_fd >= 0) {
		close(v->notify_fd); /* no VM (unit tests): kicks are MMIO accesses */
		v->notify_fd = -1;
	}
	if (v->notify_fd >= 0 && (err = evloop_add(&vm->loop, &v->notify_src, v->notify_fd, EPOLLIN,
						   virtio_mmio_handle_notify, v)) < 0)
		goto fail;
	n = snprintf(word, sizeof(word), "virtio_mmio.device=4K@%#llx:%u",
		     (unsigned long long)v->base, v->irq);
	if (n < 0 || (size_t)n >= sizeof(word) || strlen(cmdline) + 1 + (size_t)n >= cmdline_len) {
		err = -E2BIG;
		goto fail;
	}
	/* its teardown with the VM's (vm_destroy knows no transport) */
	if ((err = vm_device_add(vm, v, virtio_mmio_destroy_dev)) < 0)
		goto fail;
	err = bus_register(&vm->mmio, v->base, VIRTIO_MMIO_WINDOW, virtio_mmio_access, v,
			   ops->name);
	if (err) {
		vm_device_cancel(vm, v);
		goto fail;
	}
	virtio_mmio_cmdline_insert(cmdline, word);
	vm->virtio[vm->nvirtio++] = v;
	*out = v;
	return 0;
fail:
	evloop_del(&vm->loop, &v->notify_src);
	if (v->irq_fd >= 0)
		close(v->irq_fd);
	if (v->notify_fd >= 0)
		close(v->notify_fd);
	pthread_mutex_destroy(&v->lock);
	free(v);
	return err;
}

void virtio_mmio_destroy(struct virtio_dev *v)
{
	evloop_del(&v->vm->loop, &v->notify_src);
	v->ops->destroy(v->dev);
	if (v->irq_fd >= 0)
		close(v->irq_fd);
	if (v->notify_fd >= 0)
		close(v->notify_fd);
	pthread_mutex_destroy(&v->lock);
	free(v);
}
