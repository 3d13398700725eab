/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-vmm: one process, one microVM. Parse and check the command line, acquire every
 * resource (KVM, RAM, devices, the guest image), then run the vCPUs until the guest stops and
 * exit with a status saying how it stopped (docs/vmm.md). Every failure is one line on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "disk.h"
#include "layout.h"
#include "virtio/virtio.h"
#include "options.h"
#include "vmm.h"

/* --check: one sentence about this host, and where there is a KVM, one on whether guest
 * `cpuid` traps (a probe VM asks); the status says whether Linux boots here (0 yes, 3 only
 * payloads, 1 nothing). */
static int run_check(void)
{
	enum kvm_flavour f = kvm_detect_flavour("/sys/module");
	bool dev = access("/dev/kvm", R_OK | W_OK) == 0;

	if (!dev)
		f = KVM_NONE;
	printf("%s: %s\n", kvm_flavour_name(f), kvm_flavour_verdict(f));
	if (f != KVM_NONE)
		printf("%s\n", cpuid_trap_verdict(cpuid_probe_trap()));
	switch (f) {
	case KVM_INTEL:
	case KVM_AMD:
		return 0;
	case KVM_PVM:
	case KVM_OTHER:
		return 3;
	case KVM_NONE:
		break;
	}
	return 1;
}

/* Open every --disk: a file starting with the layer magic is a layer (its chain is checked),
 * anything else a raw image. Returns 0, or an exit status after one line naming the cause;
 * on failure nothing stays open. */
static int open_disks(const struct options *o, struct disk **disks)
{
	for (unsigned i = 0; i < o->ndisks; i++) {
		const struct disk_option *d = &o->disks[i];
		uint8_t magic[DISK_MAGIC_LEN] = {0};
		unsigned flags = d->ro ? DISK_OPEN_RDONLY : 0;
		struct disk_error derr = {""};
		int fd, err;

		if (d->raw) {
			flags |= DISK_OPEN_RAW;
		} else if ((fd = open(d->path, O_RDONLY | O_CLOEXEC)) >= 0) {
			if (pread(fd, magic, sizeof(magic), 0) != (ssize_t)sizeof(magic) ||
			    memcmp(magic, DISK_MAGIC, DISK_MAGIC_LEN) != 0)
				flags |= DISK_OPEN_RAW;
			close(fd);
		} /* else disk_open says why it cannot be opened */
		err = disk_open(d->path, flags, &disks[i], &derr);
		if (err < 0) {
			if (derr.msg[0])
				log_error("--disk: %s", derr.msg);
			else
				log_error("--disk %s: %s", d->path, strerror(-err));
			while (i--)
				disk_close(disks[i]);
			return VM_EXIT_BAD_INPUT;
		}
		log_debug("disk %u: %s, %llu bytes, %u layer(s)%s", i, d->path,
			  (unsigned long long)disk_size(disks[i]), disk_layer_count(disks[i]),
			  disk_read_only(disks[i]) || d->ro ? ", read-only" : "");
	}
	return 0;
}

/* Attach the opened disks as virtio-blk devices, appending their words to `cmdline`. Each
 * disk belongs to its device from then on (or is closed when adding it fails). */
static int add_disks(struct vm *vm, const struct options *o, struct disk **disks, char *cmdline,
		     size_t cmdline_len)
{
	int status = 0;

	for (unsigned i = 0; i < o->ndisks; i++) {
		const char *base = strrchr(o->disks[i].path, '/');
		struct virtio_dev *vdev;
		int err;

		if (status) {
			disk_close(disks[i]);
			continue;
		}
		struct blk_options bo = {.read_only = o->disks[i].ro,
					 .serial = base ? base + 1 : o->disks[i].path,
					 .depth = o->disks[i].depth};

		err = blk_add(vm, disks[i], &bo, cmdline, cmdline_len, &vdev);
		if (err == -E2BIG) {
			log_error("kernel command line too long to announce --disk %s",
				  o->disks[i].path);
			status = VM_EXIT_BAD_INPUT;
		} else if (err < 0) {
			log_error("cannot add --disk %s: %s", o->disks[i].path, strerror(-err));
			status = VM_EXIT_VMM_ERROR;
		}
	}
	return status;
}

static int open_console(const char *path)
{
	int fd;

	if (!path)
		return STDOUT_FILENO;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0640);
	if (fd < 0)
		log_error("cannot open console file %s: %s", path, strerror(errno));
	return fd;
}

/*
 * Close every inherited fd from 3 up but those the options name (--lifeline,
 * --restore-state-fd, --restore-memory-fd, --restore-memory-pager-fd): each must lie below
 * JAIL_FD_KVM, where the filters name KVM's fds. 0 or an exit status.
 */
static int close_inherited(const struct options *o)
{
	int keep[4] = {o->lifeline_fd, o->restore_state_fd, o->restore_memory_fd,
		       o->restore_pager_fd},
	    n = 0;
	unsigned from = 3;

	for (int i = 0; i < 4; i++) {
		if (keep[i] < 0)
			continue;
		if (keep[i] >= JAIL_FD_KVM) {
			log_error("--jail: give inherited fds below %d (fd %d)", JAIL_FD_KVM,
				  keep[i]);
			return VM_EXIT_BAD_INPUT;
		}
		keep[n++] = keep[i];
	}
	for (int i = 0; i < n; i++) /* sort the few kept, ascending */
		for (int j = i + 1; j < n; j++)
			if (keep[j] < keep[i]) {
				int t = keep[i];

				keep[i] = keep[j];
				keep[j] = t;
			}
	for (int i = 0; i < n; i++) {
		if ((unsigned)keep[i] > from)
			close_range(from, (unsigned)keep[i] - 1, 0);
		from = (unsigned)keep[i] + 1;
	}
	close_range(from, ~0u, 0);
	return 0;
}

/* The snapshot's state, far enough to size the VM; its RAM and vCPU count become the
 * options'. Returns 0 or an exit status after one line naming the problem. */
static char img_paths[4096];
static char *img_memory[MEM_DELTAS_MAX + 1];
static unsigned img_nmemory;
static int open_snapshot(const char *dir, struct snap_image *img, struct options *o)
{
	int err;

	/* The state sandboxctl checked against the snapshot's MAC, as a sealed memfd: read
	 * from there, never DIR/state.fdt again (a file replaced after the check). */
	if (o->restore_state_fd >= 0)
		err = snap_image_read(o->restore_state_fd, dir, img);
	else
		err = snap_image_open(dir, img);
	o->restore_state_fd = -1; /* closed */
	if (err < 0) {
		log_error("--restore %s: %s", dir, img->r.msg);
		snap_image_close(img);
		return VM_EXIT_BAD_INPUT;
	}
	o->memory_mib = img->ram_len >> 20;
	o->boot.ncpus = img->ncpus;
	if (o->restore_pager_fd >= 0)
		return 0; /* no file: an empty RAM the pager fills */
	/* DIR/memory, or --restore-memory's comma-separated files (a fork's chain). */
	if ((o->restore_memory && (size_t)snprintf(img_paths, sizeof(img_paths), "%s",
						   o->restore_memory) >= sizeof(img_paths)) ||
	    (!o->restore_memory && (size_t)snprintf(img_paths, sizeof(img_paths), "%s/%s", dir,
						    SNAP_MEMORY_FILE) >= sizeof(img_paths))) {
		log_error("--restore %s: path too long", dir);
		snap_image_close(img);
		return VM_EXIT_BAD_INPUT;
	}
	for (char *p = img_paths, *save = NULL; (p = strtok_r(p, ",", &save)); p = NULL) {
		if (img_nmemory == MEM_DELTAS_MAX + 1) {
			log_error("--restore-memory: at most %u files", MEM_DELTAS_MAX + 1);
			snap_image_close(img);
			return VM_EXIT_BAD_INPUT;
		}
		img_memory[img_nmemory++] = p;
	}
	if (!img_nmemory) {
		log_error("--restore-memory: no file");
		snap_image_close(img);
		return VM_EXIT_BAD_INPUT;
	}
	return 0;
}

/* Load the guest into RAM and create every vCPU at its entry. 0 or an exit status. */
static int boot_guest(struct vm *vm, struct options *o)
{
	struct boot_entry entry;

	o->boot.cpuid_nonce = vm->cpuid_nonce;
	if (boot_load(&vm->mem, &o->boot, &entry) < 0)
		return VM_EXIT_BAD_INPUT;
	log_debug("guest loaded");
	for (unsigned i = 0; i < o->boot.ncpus; i++)
		if (vcpu_create(vm, i, &entry) < 0)
			return VM_EXIT_VMM_ERROR;
	log_debug("booting %s with %u vCPU(s), %llu MiB", o->boot.kernel_path, o->boot.ncpus,
		  (unsigned long long)o->memory_mib);
	return 0;
}

/* Hand the sockets the VMM made to the jail's uid (so it can remove them at exit from the
 * sticky sandbox directory), size its limits, confine it, and move the disks' paths into
 * the jail. 0 or an exit status. */
static int enter_jail(struct vm *vm, struct options *o, struct disk **disks)
{
	struct jail_config *j = &o->jail;
	char msg[256];
	int err;
	const char *socks[] = {o->api_path, o->vsock_path};

	for (unsigned i = 0; i < 2; i++) {
		if (socks[i] && !jail_path_in(j->root, socks[i])) {
			log_error("--jail %s: %s lies outside it", j->root, socks[i]);
			return VM_EXIT_BAD_INPUT;
		}
		if (socks[i] && lchown(socks[i], j->uid, j->gid) < 0) {
			log_error("--jail: cannot give %s to uid %u: %m", socks[i],
				  (unsigned)j->uid);
			return VM_EXIT_VMM_ERROR;
		}
	}
	/* The largest file it may write: the console (capped), a snapshot's memory, a disk's
	 * top layer full. */
	j->fsize = SERIAL_OUT_MAX + (1u << 20);
	if ((o->memory_mib << 20) + (1u << 20) > j->fsize)
		j->fsize = (o->memory_mib << 20) + (1u << 20);
	for (unsigned i = 0; i < o->ndisks; i++)
		if (disk_max_file_len(disks[i]) > j->fsize)
			j->fsize = disk_max_file_len(disks[i]);
	if ((err = vm_place_fds(vm)) < 0) {
		log_error("--jail: cannot move KVM's fds to %d and on: %s", JAIL_FD_KVM,
			  strerror(-err));
		return VM_EXIT_VMM_ERROR;
	}
	if (mem_pagemap_open() < 0)
		log_warn("--jail: no /proc/self/pagemap: snapshots will write all of RAM");
	j->nofile = JAIL_NOFILE;
	j->nproc = JAIL_NPROC;
	if (jail_enter(j, msg, sizeof(msg)) < 0) {
		log_error("--jail %s: %s", j->root, msg);
		return VM_EXIT_VMM_ERROR;
	}
	for (unsigned i = 0; i < o->ndisks; i++)
		if (disk_rebase(disks[i], j->root) < 0) {
			log_error("--jail: out of memory");
			return VM_EXIT_VMM_ERROR;
		}
	log_debug("jailed in %s as uid %u", j->root, (unsigned)j->uid);
	return 0;
}

struct main_loop {
	struct vm *vm;
	unsigned timeout_s;
	struct ev_source signal_src, timer_src, stop_src, lifeline_src;
};

static void main_loop_signal(struct ev_source *src, uint32_t events)
{
	struct main_loop *m = src->opaque;
	struct signalfd_siginfo si;

	if (read(src->fd, &si, sizeof(si)) == sizeof(si))
		vm_request_stop(m->vm, VM_EXIT_SIGNAL, "stopped by signal %u", si.ssi_signo);
}

static void main_loop_timeout(struct ev_source *src, uint32_t events)
{
	struct main_loop *m = src->opaque;

	vm_request_stop(m->vm, VM_EXIT_TIMEOUT, "guest still running after %u s: stopped",
			m->timeout_s);
}

/* --lifeline: bytes on it mean nothing; EOF (every writer gone) is the creator's death. */
static void main_loop_lifeline(struct ev_source *src, uint32_t events)
{
	struct main_loop *m = src->opaque;
	char buf[256];
	ssize_t n = read(src->fd, buf, sizeof(buf));

	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
		return;
	vm_request_stop(m->vm, VM_EXIT_SIGNAL,
			"the creator went away (EOF on --lifeline %d): stopped", src->fd);
}

/* A vCPU asked to stop: the loop condition sees it; only drain the eventfd. */
static void main_loop_stop(struct ev_source *src, uint32_t events)
{
	uint64_t v;

	if (read(src->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_debug("reading the stop eventfd: %m");
}

/* The I/O thread: serve the VM's event loop (device kicks, I/O completions, sockets) until a
 * vCPU asks to stop, a signal arrives, the timeout expires or the lifeline (>= 0) ends. */
static void main_loop(struct vm *vm, unsigned timeout_s, int lifeline_fd)
{
	struct main_loop m = {.vm = vm, .timeout_s = timeout_s};
	int sfd, tfd = -1, err;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		vm_request_stop(vm, VM_EXIT_VMM_ERROR, "cannot set up the main loop: %s",
				strerror(errno));
		return;
	}
	if (timeout_s) {
		struct itimerspec its = {.it_value = {.tv_sec = timeout_s}};

		tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		if (tfd < 0 || timerfd_settime(tfd, 0, &its, NULL) < 0) {
			vm_request_stop(vm, VM_EXIT_VMM_ERROR, "cannot arm the timeout: %s",
					strerror(errno));
			goto out;
		}
	}
	if ((err = evloop_add(&vm->loop, &m.signal_src, sfd, EPOLLIN, main_loop_signal, &m)) ||
	    (err = evloop_add(&vm->loop, &m.stop_src, vm->stop_fd, EPOLLIN, main_loop_stop, &m)) ||
	    (tfd >= 0 &&
	     (err = evloop_add(&vm->loop, &m.timer_src, tfd, EPOLLIN, main_loop_timeout, &m))) ||
	    (lifeline_fd >= 0 && (err = evloop_add(&vm->loop, &m.lifeline_src, lifeline_fd, EPOLLIN,
						   main_loop_lifeline, &m)))) {
		vm_request_stop(vm, VM_EXIT_VMM_ERROR, "cannot set up the main loop: %s",
				strerror(-err));
		goto out;
	}
	while (!atomic_load(&vm->stopping)) {
		err = evloop_run_once(&vm->loop, -1);
		if (err < 0) {
			vm_request_stop(vm, VM_EXIT_VMM_ERROR, "epoll_wait: %s", strerror(-err));
			break;
		}
	}
out:
	evloop_del(&vm->loop, &m.signal_src);
	evloop_del(&vm->loop, &m.stop_src);
	evloop_del(&vm->loop, &m.timer_src);
	evloop_del(&vm->loop, &m.lifeline_src);
	if (tfd >= 0)
		close(tfd);
	close(sfd);
}

int main(int argc, char **argv)
{
	static char cmdline[CMDLINE_BUF_LEN];
	struct disk *disks[DISKS_MAX] = {NULL};
	struct api *api = NULL;
	struct snap_image img = {0};
	struct options o;
	struct vm vm;
	sigset_t set;
	int status, err, started, console_fd, tap_fd = -1;

	log_init("sandbox-vmm", LOG_INFO);
	status = options_parse(argc, argv, &o);
	if (status)
		return status;
	if (o.verbose) {
		log_init(NULL, LOG_DEBUG);
		log_debug("starting");
	}
	if (o.check)
		return run_check();
	/* The snapshot memory file's digest, made ready before the jail (mem_copy_to_fd). */
	if (mem_digest_init() < 0)
		log_warn("no SHA-256 from OpenSSL: snapshots of this VM will fail");

	/* docs/style.md rule 10: a VMM without its sandbox says so at every start. */
	if (!o.jail_arg)
		log_warn("no --jail: this VMM runs with its full privileges");
	if (o.jail_arg) {
		char msg[256];

		if (jail_check_root(o.jail.root, msg, sizeof(msg)) < 0) {
			log_error("--jail: %s", msg);
			return VM_EXIT_BAD_INPUT;
		}
		/* JAIL_FD_KVM and up are where the filters name KVM's fds (vm_place_fds). */
		if (o.lifeline_fd >= JAIL_FD_KVM) {
			log_error("--lifeline %d: under --jail, give an fd below %d", o.lifeline_fd,
				  JAIL_FD_KVM);
			return VM_EXIT_BAD_INPUT;
		}
		/* Kill or log (SANDBOX_SECCOMP), decided before anything runs. */
		seccomp_decide_action();
		/* Nothing inherited goes into the jail but stdin, stdout, stderr, the
		 * lifeline and a restore's checked state and memory. */
		if ((status = close_inherited(&o)) != 0)
			return status;
		if ((err = jail_pid_namespace(&o.jail)) < 0) {
			log_error("--jail: cannot make a pid namespace: %s", strerror(-err));
			return VM_EXIT_VMM_ERROR;
		}
	}

	/* Signals we wait for are taken through a signalfd: block them before any thread. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* The tap first: entering its namespace must happen while this is the only thread. */
	if (o.has_net) {
		char msg[256];

		if (net_tap_open(o.net.tap, o.net.netns, &tap_fd, msg, sizeof(msg)) < 0) {
			log_error("--net: %s", msg);
			return VM_EXIT_BAD_INPUT;
		}
		/* Where the filters name it (before the device adds it to the event loop). */
		if (o.jail_arg && (err = jail_place_fd(&tap_fd, JAIL_FD_TAP)) < 0) {
			log_error("--jail: cannot move the tap's fd to %d: %s", JAIL_FD_TAP,
				  strerror(-err));
			close(tap_fd);
			return VM_EXIT_VMM_ERROR;
		}
	}
	if (strlen(o.boot.cmdline) >= sizeof(cmdline)) {
		log_error("kernel command line too long: %zu bytes", strlen(o.boot.cmdline));
		return VM_EXIT_BAD_INPUT;
	}
	strcpy(cmdline, o.boot.cmdline);
	o.boot.cmdline = cmdline; /* the devices append their virtio_mmio.device= words */
	status = open_disks(&o, disks);
	if (status)
		return status;
	if (o.restore_dir && (status = open_snapshot(o.restore_dir, &img, &o))) {
		for (unsigned i = 0; i < o.ndisks; i++)
			disk_close(disks[i]);
		return status;
	}
	console_fd = open_console(o.console_path);
	if (console_fd < 0 ||
	    vm_create_from(&vm, o.memory_mib << 20, o.boot.ncpus, o.restore_memory_fd,
			   (const char *const *)img_memory, img_nmemory) < 0) {
		for (unsigned i = 0; i < o.ndisks; i++)
			disk_close(disks[i]);
		snap_image_close(&img);
		return console_fd < 0 || o.restore_dir ? VM_EXIT_BAD_INPUT : VM_EXIT_VMM_ERROR;
	}
	if (o.restore_pager_fd >= 0) {
		err = mem_pager_attach(&vm.mem, o.restore_pager_fd);
		o.restore_pager_fd = -1; /* the VM's now (closed with it) */
		/* the snapshot's disk layers come from the same pager, as they are read */
		for (unsigned i = 0; i < o.ndisks && err == 0; i++)
			err = disk_set_fetch(disks[i], mem_pager_fetch, &vm.mem);
		if (err < 0) {
			status = VM_EXIT_VMM_ERROR;
			for (unsigned i = 0; i < o.ndisks; i++)
				disk_close(disks[i]);
			goto out;
		}
	}
	log_debug("VM created");
	/* Jailed: the devices made from here know it (virtio-blk takes no io_uring it cannot
	 * restrict), and each thread installs its filter. */
	vm.seccomp = o.jail_arg != NULL;
	if ((err = serial_create(&vm, console_fd, &vm.serial)) ||
	    (err = i8042_create(&vm, &vm.i8042))) {
		log_error("cannot create the legacy devices: %s", strerror(-err));
		status = VM_EXIT_VMM_ERROR;
		for (unsigned i = 0; i < o.ndisks; i++)
			disk_close(disks[i]);
		goto out;
	}
	status = add_disks(&vm, &o, disks, cmdline, sizeof(cmdline));
	if (status)
		goto out;
	if (o.vsock_path && (err = vsock_add(&vm, o.vsock_path, cmdline, sizeof(cmdline),
					     &(struct virtio_dev *){NULL})) < 0) {
		log_error("cannot add --vsock %s: %s", o.vsock_path, strerror(-err));
		status = err == -E2BIG || err == -ENAMETOOLONG ? VM_EXIT_BAD_INPUT
							       : VM_EXIT_VMM_ERROR;
		goto out;
	}
	if (tap_fd >= 0) {
		/* The device owns the fd from here, even when adding it fails. */
		err = net_add(&vm, tap_fd, o.net.mac, cmdline, sizeof(cmdline),
			      &(struct virtio_dev *){NULL});
		tap_fd = -1;
		if (err < 0) {
			log_error("cannot add --net tap=%s: %s", o.net.tap, strerror(-err));
			status = err == -E2BIG ? VM_EXIT_BAD_INPUT : VM_EXIT_VMM_ERROR;
			goto out;
		}
	}
	if (!o.restore_dir && (status = boot_guest(&vm, &o)) != 0)
		goto out;
	/* A restored VM's vCPUs are made before the jail, as a booted one's: KVM_CREATE_VCPU is
	 * not among the filters' calls, and their fds go where the filters name them. */
	if (o.restore_dir && vm_restore_vcpus(&vm, &img) < 0) {
		log_error("--restore %s: %s", o.restore_dir, img.r.msg);
		status = VM_EXIT_VMM_ERROR;
		goto out;
	}
	if (o.api_path && api_create(&vm, o.api_path, &api) < 0) {
		status = VM_EXIT_BAD_INPUT;
		goto out;
	}
	if (o.jail_arg && (status = enter_jail(&vm, &o, disks)) != 0)
		goto out;
	/* The first filter, while this is the only thread: a snapshot's state is applied jailed
	 * and filtered (a VMM that may have been compromised wrote it), under the base plus its
	 * KVM_SET_* calls; then the base alone. */
	if (o.jail_arg &&
	    (err = o.restore_dir ? seccomp_install_restore(&vm) : seccomp_install_base(&vm)) < 0) {
		log_error("--jail: cannot install the %s seccomp filter: %s",
			  o.restore_dir ? "restore" : "base", strerror(-err));
		status = VM_EXIT_VMM_ERROR;
		goto out;
	}
	if (o.restore_dir) {
		if (vm_restore(&vm, &img) < 0) {
			log_error("--restore %s: %s", o.restore_dir, img.r.msg);
			status = VM_EXIT_BAD_INPUT;
			goto out;
		}
		log_debug("restored %s: %u vCPU(s), %llu MiB", o.restore_dir, o.boot.ncpus,
			  (unsigned long long)o.memory_mib);
		if (o.jail_arg && (err = seccomp_install_base(&vm)) < 0) {
			log_error("--jail: cannot install the base seccomp filter: %s",
				  strerror(-err));
			status = VM_EXIT_VMM_ERROR;
			goto out;
		}
	}
	if (o.jail_arg)
		log_debug("seccomp: the base filter is in");
	/* Jailed, each vCPU thread starts under the base, loads its own and waits; the I/O
	 * thread's goes in before the devices serve guest input, then the vCPUs are let go
	 * (docs/hardening.md, "What the jail costs"). */
	started = vcpu_start_all(&vm);
	if (started == 0 && vm.seccomp && (err = seccomp_install_io(&vm)) < 0)
		vm_request_stop(&vm, VM_EXIT_VMM_ERROR,
				"cannot install the I/O thread's seccomp filter: %s",
				strerror(-err));
	else if (started == 0 && vm.seccomp)
		log_debug("seccomp: the I/O thread's filter is in");
	if (started == 0 && o.restore_dir)
		vm_restore_devices_resume(&vm);
	vcpu_release_all(&vm);
	if (started == 0 && !atomic_load(&vm.stopping))
		main_loop(&vm, o.timeout_s, o.lifeline_fd);
	vcpu_stop_all(&vm);
	api_destroy(api);
	api = NULL;
	status = atomic_load(&vm.exit_status);
	if (status < 0)
		status = VM_EXIT_VMM_ERROR;
	if (status == VM_EXIT_SHUTDOWN)
		log_debug("%s", vm.exit_reason);
	else
		log_error("%s", vm.exit_reason);
out:
	if (tap_fd >= 0)
		close(tap_fd);
	api_destroy(api);
	vm_destroy(&vm);
	snap_image_close(&img);
	if (console_fd != STDOUT_FILENO)
		close(console_fd);
	return status;
}
