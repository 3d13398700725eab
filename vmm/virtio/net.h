/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-net's insides, shared by its files and nobody else (other files see net_add in
 * virtio.h): net.c is the device (ops table, tx, the tap on the event loop), net_rx.c the
 * receive path (frames from the tap into the guest's rx buffers).
 *
 * Threads: everything here runs on the I/O thread under dev->lock, except the transport's
 * activate and reset and a vCPU's MMIO kick without ioeventfd (vCPU threads, under the same
 * lock), which only flip flags and write kick_fd so that the I/O thread does the work: the
 * tap's epoll events change only on the I/O thread (evloop_mod).
 *
 * Frames: the tap is opened with IFF_VNET_HDR and TUNSETVNETHDRSZ 12, so every frame it
 * reads or writes starts with a struct virtio_net_hdr_v1, the header the driver puts before
 * its tx frames and expects before its rx ones: tx chains go to the tap as they are, rx
 * frames come from it with the header the guest reads (only num_buffers is ours to fill).
 */
#ifndef SANDBOX_VIRTIO_NET_H
#define SANDBOX_VIRTIO_NET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <linux/virtio_net.h>

#include "virtio/virtio.h"

#define NET_RX_Q      0u
#define NET_TX_Q      1u
#define NET_NQUEUES   2u
#define NET_QUEUE_MAX 256u
#define NET_HDR_LEN   sizeof(struct virtio_net_hdr_v1)
/* The longest frame either way, without its header: a 64 KiB GSO packet with its Ethernet
 * and VLAN headers (QEMU's and Linux's limit for a tap too). */
#define NET_FRAME_MAX 65550u
/* Frames served per event-loop pass in each direction; then the loop serves the others
 * (rx: the tap stays readable, tx: the device kicks itself). */
#define NET_RX_BUDGET 64u
#define NET_TX_BUDGET 64u

_Static_assert(sizeof(struct virtio_net_hdr_v1) == 12, "the frame header is 12 bytes");

/* The config space we serve: the MAC and the link status (VIRTIO_NET_F_MAC, _STATUS). */
struct net_config {
	uint8_t mac[6];
	uint16_t status; /* little-endian: VIRTIO_NET_S_LINK_UP */
};
_Static_assert(sizeof(struct net_config) == 8, "mac and status, no padding");

struct net_dev {
	pthread_mutex_t lock; /* everything below */
	struct vm *vm;
	struct virtio_dev *vdev;
	int tap_fd;
	bool is_tap; /* a tap; otherwise a SOCK_SEQPACKET socket of frames */
	bool dead;   /* the backend hung up: nothing more is read or written */
	struct ev_source tap_src;
	uint32_t tap_events; /* what tap_src waits for now */
	int kick_fd;	     /* eventfd: work for the I/O thread */
	struct ev_source kick_src;
	struct net_config config;
	uint64_t offered; /* device features: the offloads the tap accepted */
	bool active;	  /* DRIVER_OK and not reset or failed since */
	bool mrg;	  /* VIRTIO_NET_F_MRG_RXBUF negotiated */
	bool rx_wait;	  /* no rx buffer: the tap is not read until the guest kicks rx */
	bool tx_wait;	  /* the tap refused a frame (EAGAIN): wait for EPOLLOUT */
	bool irq;	  /* used buffers to tell the driver of, after unlocking */
	const char *fail; /* the guest broke the protocol: NEEDS_RESET after unlocking */
	struct log_ratelimit rl;
	uint64_t rx_frames, rx_dropped, tx_frames, tx_dropped;
	uint32_t frame_len; /* a frame read from the tap, waiting for rx buffers; 0: none */
	uint8_t frame[NET_HDR_LEN + NET_FRAME_MAX + 1]; /* + 1: an oversize read shows */
	struct iovec iov[VIRTQ_CHAIN_MAX];
	uint16_t heads[NET_QUEUE_MAX]; /* the chains one rx frame fills */
	uint32_t lens[NET_QUEUE_MAX];
	struct virtq_chain chain;  /* the chain being served */
	struct virtq_chain chain0; /* an rx frame's first chain, whose header is filled last */
};

/* The guest broke the virtio protocol: stop serving until the driver resets the device. */
void net_fail(struct net_dev *d, const char *why);
/* Read frames from the tap into the rx queue, up to NET_RX_BUDGET of them, until the tap has
 * none or the guest has no more buffers (then rx_wait is set). */
void net_serve_rx(struct net_dev *d);

#endif
