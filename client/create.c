/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Creating a sandbox (docs/sandboxctl.md, create): from the image's ready snapshot when
 * there is one for these options (ready.c), else a directory under $SANDBOX_HOME/sandboxes
 * (make.c), an overlay above the image's rootfs and a VMM booting it (start.c), which then
 * becomes the ready snapshot for the next create. A lifecycle verb (client.h): errors as
 * values, in the caller's report.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "client.h"
#include "disk.h"

int sandbox_create(const struct create_opts *o, struct sandbox *sb, struct lc_report *r)
{
	char path[4200], rootfs[4200], vmm[PATH_MAX], ready[NAME_MAX_LEN + 2] = "";
	struct disk_error derr = {""};
	struct stat st;
	int err;

	memset(sb, 0, sizeof(*sb));
	if ((err = sandbox_host_check(r)) < 0)
		return err;
	if ((err = state_init()) < 0)
		return lc_fail(r, err, "cannot create %s: %s", state_home(), strerror(-err));
	if (image_path(o->image, "kernel", path, sizeof(path)) < 0 ||
	    image_path(o->image, "initrd", path, sizeof(path)) < 0 ||
	    image_path(o->image, "rootfs", rootfs, sizeof(rootfs)) < 0 || stat(rootfs, &st) < 0)
		return lc_fail(r, -ENOENT,
			       "no image '%s' in %s/images (see sandboxctl images; tools/dev setup "
			       "installs busybox and debian)",
			       o->image, state_home());
	if (o->disk_size_gib && o->disk_size_gib << 30 < (uint64_t)st.st_size)
		return lc_bad_option(r, "--disk-size %llu: the image '%s' alone needs %llu MiB",
				     (unsigned long long)o->disk_size_gib, o->image,
				     (unsigned long long)(st.st_size + (1 << 20) - 1) >> 20);
	/* Warm: the image's ready snapshot for these options, when there is one. */
	if (find_vmm(vmm, sizeof(vmm)) == 0 && strchr(vmm, '/') &&
	    ready_name(o, vmm, ready, sizeof(ready)) == 0 && ready_restore(o, ready, sb, r) == 0)
		return 0;
	memset(sb, 0, sizeof(*sb));
	snprintf(sb->image, sizeof(sb->image), "%s", o->image);
	for (unsigned i = 0; i < o->ndisks; i++) {
		char *real = realpath(o->disks[i], NULL);

		if (!real || strchr(real, ',') || strchr(real, '\n') ||
		    strlen(real) >= DISK_PATH_MAX) {
			err = lc_bad_option(r, "--disk %s: %s", o->disks[i],
					    real ? "a path with a comma or a newline, or too long"
						 : strerror(errno));
			free(real);
			return err;
		}
		snprintf(sb->disks[i].path, DISK_PATH_MAX, "%s", real);
		sb->disks[i].ro = o->disks_ro[i];
		free(real);
	}
	sb->ndisks = o->ndisks;
	sb->cpus = o->cpus;
	sb->memory_mib = o->memory_mib;
	sb->created = (uint64_t)time(NULL);
	sb->network = !o->no_network;
	sb->deadline = o->ttl_s ? sb->created + o->ttl_s : 0;
	sb->lifeline_fd = o->lifeline_fd;
	snprintf(sb->top, sizeof(sb->top), "root.layer");

	if ((err = sandbox_make_dir(sb, o->name, r)) < 0)
		return err;
	if (sb->network && (err = sandbox_net_prepare(sb, o, r)) < 0) {
		sandbox_discard(sb, r);
		return err;
	}
	if ((err = sandbox_path(sb, sb->top, path, sizeof(path))) < 0 ||
	    (err = disk_create_overlay_len(path, rootfs, 0, o->disk_size_gib << 30, &derr)) < 0) {
		lc_fail(r, err, "%s: cannot create the root disk: %s", sb->id,
			derr.msg[0] ? derr.msg : strerror(-err));
		sandbox_discard(sb, r);
		return err;
	}
	if ((err = sandbox_start_vmm(sb, o->console, NULL, o->timeout_s, o->no_wait, r)) < 0) {
		sandbox_discard(sb, r);
		return err;
	}
	if (ready[0])
		ready_make(sb, ready, r); /* the next create of these options restores it */
	/* After the ready snapshot: no sandbox's CA is in another's trust store. */
	if (sb->network && !o->no_wait && (err = sandbox_install_ca(sb, r)) < 0) {
		sandbox_discard(sb, r);
		return err;
	}
	return 0;
}
