/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A lazy lower layer's clusters fetched on first read (disk.h, disk_set_fetch): the layer
 * file came with its header and bitmap only, and each run of clusters not yet known to be in
 * is asked of the fetch function (whole clusters, one call a run) before it is read. What it
 * answered for stays known: a cluster is asked for once.
 */
#include <errno.h>

#include "disk.h"

static bool fetched(const struct disk_layer *l, uint64_t idx)
{
	return (l->fetched[idx / 8] >> (idx % 8)) & 1;
}

int disk_layer_fetch(struct disk_layer *l, disk_fetch_fn fetch, void *arg, uint64_t file_offset,
		     uint64_t len)
{
	uint64_t first, last, idx;

	if (!l->fetched || !len)
		return 0;
	if (file_offset < l->hdr.data_offset)
		return -EIO; /* extents of a layer are of its data area */
	first = (file_offset - l->hdr.data_offset) / l->cluster_len;
	last = (file_offset - l->hdr.data_offset + len - 1) / l->cluster_len;
	if (last >= l->nclusters)
		return -EIO;
	for (idx = first; idx <= last;) {
		uint64_t end = idx;
		int r;

		if (fetched(l, idx)) {
			idx++;
			continue;
		}
		while (end + 1 <= last && !fetched(l, end + 1))
			end++;
		r = fetch(arg, l->hdr.layer_id, l->hdr.data_offset + idx * l->cluster_len,
			  (end - idx + 1) * l->cluster_len);
		if (r < 0)
			return -EIO;
		for (; idx <= end; idx++)
			l->fetched[idx / 8] |= (uint8_t)(1u << (idx % 8));
	}
	return 0;
}
