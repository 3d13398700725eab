/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The virtio-mmio transport (version 2) as a payload's driver sees it: register offsets,
 * device status bits and split-ring flags (<linux/virtio_mmio.h>, <linux/virtio_ring.h>;
 * virtio 1.2, 4.2 and 2.7), for the payloads' one driver (vq.h) and the guests that drive a
 * device through it; each adds its device's own ids and bits.
 */
#ifndef SANDBOX_GUESTS_VIRTIO_MMIO_H
#define SANDBOX_GUESTS_VIRTIO_MMIO_H

#define VIO_MAGIC_VALUE		0x000
#define VIO_VERSION		0x004
#define VIO_DEVICE_ID		0x008
#define VIO_DEVICE_FEATURES	0x010
#define VIO_DEVICE_FEATURES_SEL 0x014
#define VIO_DRIVER_FEATURES	0x020
#define VIO_DRIVER_FEATURES_SEL 0x024
#define VIO_QUEUE_SEL		0x030
#define VIO_QUEUE_NUM_MAX	0x034
#define VIO_QUEUE_NUM		0x038
#define VIO_QUEUE_READY		0x044
#define VIO_QUEUE_NOTIFY	0x050
#define VIO_STATUS		0x070
#define VIO_QUEUE_DESC_LOW	0x080
#define VIO_QUEUE_DESC_HIGH	0x084
#define VIO_QUEUE_AVAIL_LOW	0x090
#define VIO_QUEUE_AVAIL_HIGH	0x094
#define VIO_QUEUE_USED_LOW	0x0a0
#define VIO_QUEUE_USED_HIGH	0x0a4
#define VIO_CONFIG		0x100 /* the device's config space */

#define VIO_MAGIC     0x74726976u /* "virt" */
#define VIO_S_ACK     0x01u
#define VIO_S_DRIVER  0x02u
#define VIO_S_DRV_OK  0x04u
#define VIO_S_FEAT_OK 0x08u
#define VIO_S_RESET   0x40u /* DEVICE_NEEDS_RESET */

#define DESC_F_NEXT	     1u
#define DESC_F_WRITE	     2u
#define DESC_F_INDIRECT	     4u
#define AVAIL_F_NO_INTERRUPT 1u

#endif
