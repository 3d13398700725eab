/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The virtio device interface: every device (blk, net, vsock, rng) is one const ops table and
 * an opaque pointer; the virtio-mmio transport (mmio.c) owns the register file, feature
 * negotiation, device status, the virtqueues and the interrupt, and only calls through the
 * table. Registration rejects a table with a missing slot (docs/style.md rule 5).
 */
#ifndef SANDBOX_VIRTIO_H
#define SANDBOX_VIRTIO_H

#include <stdbool.h>
#include <stdint.h>

#include "virtio/queue.h"
#include "vmm.h"

#define VIRTIO_MMIO_WINDOW   0x1000u /* each device's register window */
#define VIRTIO_MMIO_IRQ_BASE 5u	     /* device n gets ISA IRQ 5 + n */
#define VIRTIO_MMIO_MAX	     8u	     /* IRQs 5..12 */
#define VIRTIO_QUEUES_MAX    4u

struct virtio_dev;

struct virtio_ops {
	const char *name;
	uint32_t device_id;  /* VIRTIO_ID_* */
	unsigned nqueues;    /* at most VIRTIO_QUEUES_MAX */
	uint16_t queue_max;  /* largest queue size the device accepts, a power of 2 */
	uint32_t config_len; /* bytes of device config space; accesses beyond are refused */
	/* Device feature bits, besides VERSION_1 which the transport offers itself. */
	uint64_t (*features)(void *dev);
	/* Config space accesses, already bounds-checked: offset + len <= config_len. */
	void (*config_read)(void *dev, uint32_t offset, uint8_t *data, uint32_t len);
	void (*config_write)(void *dev, uint32_t offset, const uint8_t *data, uint32_t len);
	/* The driver set DRIVER_OK with `features` negotiated: start serving the queues.
	 * Non-zero refuses, and the device is marked NEEDS_RESET. */
	int (*activate)(void *dev, struct virtio_dev *vdev, uint64_t features);
	/* The driver kicked queue `q` (from the I/O thread, or a vCPU without ioeventfd). */
	void (*queue_notify)(void *dev, unsigned q);
	/* Before a snapshot (vCPUs paused, I/O thread): finish the work in flight, so that the
	 * rings and the device's backend hold nothing half done. */
	int (*quiesce)(void *dev);
	/* The driver reset the device: drop in-flight work, forget negotiated state. */
	void (*reset)(void *dev);
	void (*destroy)(void *dev);
};

/* A queue's size and ring addresses as the driver writes them, before QueueReady. */
struct virtio_pending_queue {
	uint32_t num;
	uint64_t desc, avail, used;
};

struct virtio_dev {
	struct vm *vm;
	const struct virtio_ops *ops;
	void *dev;
	gpa_t base;		     /* the register window */
	unsigned irq;		     /* ISA IRQ (GSI), raised through irqfd */
	int irq_fd;		     /* eventfd bound to the GSI with KVM_IRQFD */
	int notify_fd;		     /* eventfd bound to QueueNotify with KVM_IOEVENTFD, or -1 */
	struct ev_source notify_src; /* notify_fd on the VM's event loop */
	pthread_mutex_t lock;	     /* register file; vCPUs and the I/O thread */
	uint32_t status;
	uint32_t device_features_sel;
	uint32_t driver_features_sel;
	uint64_t driver_features;
	uint32_t queue_sel;
	uint32_t interrupt_status;
	uint32_t config_generation;
	struct virtq queues[VIRTIO_QUEUES_MAX];
	/* Committed by QueueReady after checking. */
	struct virtio_pending_queue pending[VIRTIO_QUEUES_MAX];
	struct log_ratelimit rl;
};

/* Attach `dev` with `ops` as the next virtio-mmio device of `vm`: registers its MMIO window,
 * its irqfd and ioeventfd, and appends `virtio_mmio.device=4K@BASE:IRQ` to `cmdline` (of
 * `cmdline_len` bytes). Refuses an ops table with a NULL slot. */
int virtio_mmio_add(struct vm *vm, const struct virtio_ops *ops, void *dev, char *cmdline,
		    size_t cmdline_len, struct virtio_dev **out) __must_check;
void virtio_mmio_destroy(struct virtio_dev *vdev);
/* The register window's access handler (also called by unit tests). */
void virtio_mmio_access(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool write);
/* Tell the driver that used buffers are ready on some queue (interrupt status bit 0). */
void virtio_notify_used(struct virtio_dev *vdev);
/* Tell the driver the config space changed (interrupt status bit 1). */
void virtio_notify_config(struct virtio_dev *vdev);
/* The guest broke the protocol: set DEVICE_NEEDS_RESET, tell the driver, log (rate-limited).
 * The device stays dead until the driver resets it; the VMM goes on. */
void virtio_set_needs_reset(struct virtio_dev *vdev, const char *why);

/* ---- mmio_snap.c: a device in a snapshot ---- */

/* Finish the device's work in flight (virtio_ops.quiesce). */
int virtio_mmio_quiesce(struct virtio_dev *v) __must_check;
/* Save the register file, config space and queues as node "virtio@index". */
void virtio_mmio_save(struct virtio_dev *v, unsigned index, struct snap_writer *w);
/* Load them into a freshly added device of the same kind (its config space must read the
 * same), and start the device where the driver had. */
int virtio_mmio_load(struct virtio_dev *v, unsigned index, struct snap_reader *r,
		     int parent) __must_check;
/* Let a live device look at every queue (after a restore: work the driver queued). */
void virtio_mmio_kick_all(struct virtio_dev *v);

/* ---- blk.c: virtio-blk ---- */

struct disk;

#define BLK_DEPTH_DEFAULT 64u  /* requests in flight per disk */
#define BLK_DEPTH_MAX	  256u /* the queue's size */

struct blk_options {
	bool read_only;	    /* also when the disk itself is */
	const char *serial; /* what GET_ID answers (up to 20 bytes are used) */
	unsigned depth;	    /* requests in flight, 1..BLK_DEPTH_MAX */
};

/* Attach a virtio-blk device serving `disk` (which it owns from now on, even on failure) as
 * the next virtio-mmio device, with its I/O on an io_uring whose completions the VM's event
 * loop serves. -EINVAL for a depth out of range; other errors are those of virtio_mmio_add. */
int blk_add(struct vm *vm, struct disk *disk, const struct blk_options *opt, char *cmdline,
	    size_t cmdline_len, struct virtio_dev **out) __must_check;

struct disk_error;
/* For a snapshot (after quiesce): freeze the disk's top layer and continue on a new empty
 * one at `new_top` (disk_snapshot). -EINVAL for another device, -EBUSY with work in flight. */
int blk_freeze(struct virtio_dev *vdev, const char *new_top, struct disk_error *derr) __must_check;
/* True for a virtio-blk device the guest may write (its disk needs freezing). */
bool blk_is_writable(const struct virtio_dev *vdev);

/* ---- vsock.c, vsock_conn.c: virtio-vsock, served in user space ---- */

/* Attach a virtio-vsock device (guest CID 3, host CID 2) as the next virtio-mmio device,
 * listening on the unix socket `uds_path` (a stale socket there is replaced; it is removed at
 * destroy). A client of `uds_path` writes "CONNECT <port>\n" and, once the guest accepts,
 * reads "OK <host port>\n", then raw bytes; a refusal closes its socket. The guest's
 * connections to host port P go to the unix socket `uds_path`_P. Sockets are served on
 * vm->loop. Errors: -ENAMETOOLONG, socket errors, those of virtio_mmio_add. */
int vsock_add(struct vm *vm, const char *uds_path, char *cmdline, size_t cmdline_len,
	      struct virtio_dev **out) __must_check;
/* Drop every connection and post VIRTIO_VSOCK_EVENT_TRANSPORT_RESET to the driver (as soon
 * as it has an event buffer): after a restore, the guest's connections lead nowhere. Host
 * clients' requests then wait until the guest has handled it (VSOCK_RESET_ACK_MS at most).
 * I/O thread only. -EINVAL when `vdev` is not a vsock device. */
int vsock_transport_reset(struct virtio_dev *vdev) __must_check;

/* ---- net.c, net_rx.c: virtio-net on a tap ---- */

/* The MAC a guest NIC gets when none is given (docs/network.md). */
#define NET_MAC_DEFAULT                                                                            \
	{                                                                                          \
		0x02, 0x53, 0x42, 0x00, 0x00, 0x02                                                 \
	}

/* Attach a virtio-net device with MAC `mac` as the next virtio-mmio device, on `tap_fd`
 * (which it owns from now on, even on failure): a tap opened with IFF_TAP | IFF_NO_PI |
 * IFF_VNET_HDR, or a SOCK_SEQPACKET socket whose every message is one frame after a
 * struct virtio_net_hdr_v1 (no offloads then). The fd is made non-blocking and served on
 * vm->loop. -ENOTTY for another kind of fd; other errors are those of virtio_mmio_add. */
int net_add(struct vm *vm, int tap_fd, const uint8_t mac[6], char *cmdline, size_t cmdline_len,
	    struct virtio_dev **out) __must_check;

/* ---- net_tap.c: the host side of --net ---- */

/* Open the persistent tap `name` (made by someone else: never create one) with IFF_TAP |
 * IFF_NO_PI | IFF_VNET_HDR, inside the network namespace at `netns_path` when it is not NULL
 * (the calling thread enters it, then returns to its own; call before any other thread
 * exists). 0 and the fd in *fd_out, or -errno with one sentence in `msg` (no such namespace,
 * no such tap, tap busy, ...). */
int net_tap_open(const char *name, const char *netns_path, int *fd_out, char *msg,
		 size_t msg_len) __must_check;
/* Parse "XX:XX:XX:XX:XX:XX" into mac: false unless it is six hex bytes of a unicast MAC. */
bool net_parse_mac(const char *s, uint8_t mac[6]);

#endif
