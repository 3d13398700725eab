/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl's command table, as kvmtool's builtins: one row a command with its function, the
 * line `sandboxctl --help` lists, its help (CMD --help, on stdout) and its usage (a usage
 * error's, on stderr), and all those texts. A command's parser (cmd_*.c) says only
 * ctl_help(NAME) or ctl_usage(NAME); the one-line errors naming an option are its own.
 * Not here: the general usage (main.c). tests/golden/sandboxctl/ pins every text's bytes
 * (docs/sandboxctl.md is the contract).
 */
#include <stdio.h>
#include <string.h>

#include "sandboxctl.h"

#define STR_(x) #x
#define STR(x)	STR_(x)

/* A command's usage error prints its help (one string, X_usage), but for pause, resume,
 * snapshot, restore and fork: only their synopsis (X_USAGE, the first line of X_help). */

static const char create_usage[] =
	"usage: sandboxctl create [--image NAME] [--cpus N] [--memory MiB] [--disk-size G]\n"
	"                         [--name NAME] [--timeout SEC] [--console PATH] [--no-wait]\n"
	"                         [--disk PATH[:ro]]... [--cold] [--network none|proxy]\n"
	"                         [--policy FILE] [--allow DOMAIN]... [--deny DOMAIN]...\n"
	"                         [--allow-cidr CIDR]... [--allow-port N]... [--deny-all]\n"
	"                         [--credential HOST:HEADER=ENVVAR]... [--egress-bytes N]\n"
	"                         [--resolver IP[:PORT]] [--ca-file FILE] [--ttl DURATION]\n"
	"\n"
	"Create a sandbox from an image (default: " CREATE_DEFAULT_IMAGE "), start its VM and\n"
	"print its id once the guest agent answers.\n"
	"  --image NAME     an installed image (sandboxctl images)\n"
	"  --cpus N         vCPUs, 1-32 (default 1)\n"
	"  --memory MiB     guest RAM, 64-65536 (default 512)\n"
	"  --disk-size G    the root disk's size in GiB (default: the image's); the guest's\n"
	"                   root file system grows to fill it at boot\n"
	"  --name NAME      a name usable instead of the id ([A-Za-z0-9][A-Za-z0-9._-]*, unique)\n"
	"  --timeout SEC    how long to wait for the agent (default 60)\n"
	"  --console PATH   the VMM's output (the guest console) there instead of console.log\n"
	"  --no-wait        print the id once the VMM is started, without waiting for the agent\n"
	"  --ttl DURATION   the sandbox's lifetime (90s, 10m, 2h, up to 7d): its VM is stopped\n"
	"                   then (it shows dead); a start after a stop gets what is left\n"
	"  --cold           boot, even where a ready snapshot of the image could be restored\n"
	"                   (create restores one when there is one for these options; --disk\n"
	"                   and --no-wait always boot: docs/snapshots.md)\n"
	"  --disk PATH[:ro] an extra disk, /dev/vdb then vdc, vdd (up to 3): a layer file\n"
	"                   (sandbox-disk create) or a raw image (always read-only); :ro makes\n"
	"                   it read-only for the guest\n"
	"  --network MODE   proxy (default): a NIC whose every connection goes through the\n"
	"                   sandbox's egress proxy and its policy; none: no NIC\n"
	"  --policy FILE    the proxy's policy (YAML, docs/network.md); the options below add\n"
	"                   to it. Default: public names on ports 80 and 443\n"
	"  --allow DOMAIN   allow a name (*.example.com: the names below it); --deny refuses one\n"
	"  --allow-cidr C   allow raw addresses (and names resolving) in C\n"
	"  --allow-port N   allow port N (default 80 and 443)\n"
	"  --deny-all       nothing but the allow lists\n"
	"  --credential HOST:HEADER=ENVVAR  the proxy sets HEADER on HOST's requests to the value\n"
	"                   of ENVVAR (read now; the guest never sees it)\n"
	"  --egress-bytes N the most bytes the guest may send out\n"
	"  --resolver IP[:PORT]  the DNS server the proxy asks (default: the host's)\n"
	"  --ca-file FILE   what the proxy trusts upstream for opened TLS (default: the host's)\n"
	"Environment: SANDBOX_VMM, the sandbox-vmm binary (default: beside sandboxctl in the\n"
	"build tree or installed, else on PATH); SANDBOX_SKIP_HOST_CHECK=1 boots even on a\n"
	"host whose KVM cannot boot Linux (kvm-pvm: exit status 125 without it).\n";

static const char exec_usage[] =
	"usage: sandboxctl exec ID [-i] [-t] [--env K=V]... [--cwd DIR] [--user UID[:GID]]\n"
	"                          [--timeout SEC] [-- CMD...]\n"
	"\n"
	"Run CMD in the sandbox ID (id, unique id prefix or name), streaming its stdout and\n"
	"stderr to ours as it runs, and exit with its status. Without CMD, the image's\n"
	"Entrypoint and Cmd (an image imported with images import --oci).\n"
	"  -i, --interactive  forward our stdin to the command (EOF closes its stdin)\n"
	"  -t, --tty          run it on a pseudo-terminal (stdout carries both streams); with -i\n"
	"                     and a terminal on our stdin, ours goes raw and its size follows\n"
	"  -e, --env K=V      set a variable (repeatable); PATH, HOME and LANG have defaults,\n"
	"                     an imported image's Env comes between\n"
	"  -w, --cwd DIR      its working directory (default the image's WorkingDir, else /)\n"
	"  -u, --user UID[:GID]  run as these numeric ids (root: 0:0; GID defaults to UID);\n"
	"                     default the image's User, else root\n"
	"  --timeout SEC      kill it (its whole process group) after SEC seconds: status 124\n"
	"SIGINT, SIGTERM, SIGHUP and SIGQUIT go to the command. A second SIGINT, SIGTERM or\n"
	"SIGHUP, or 5 s after a SIGTERM or SIGHUP the command did not end on, ends exec at once\n"
	"(the command is killed) with 128+N, as a shell does.\n"
	"Exit status: the command's; 128+N when signal N killed it; 124 timeout; 126 it could\n"
	"not be started (bad --cwd, ...); 127 not found; 125 the sandbox is unusable.\n";

static const char cp_usage[] =
	"usage: sandboxctl cp [--timeout SEC] FILE ID:PATH\n"
	"       sandboxctl cp [--timeout SEC] ID:PATH FILE\n"
	"\n"
	"Copy a regular file into or out of a running sandbox (ID: id, unique prefix or name).\n"
	"A PATH or FILE that is a directory (or ends in /) receives the file under its own\n"
	"name. FILE - is stdin or stdout. The mode's permission bits are kept.\n"
	"Out of a sandbox, no more is taken than the size the guest gives for the file (64 MiB\n"
	"for one that says 0 bytes, as /proc's do, or a symlink). A copy stops with an error\n"
	"after 60 s plus 1 s per MiB, or after --timeout SEC; nothing is left under FILE.\n";

static const char run_usage[] =
	"usage: sandboxctl run [--keep] [--json] [--junit FILE] [--artifacts DIR] [--no-cache]\n"
	"                      [--cache-max GIB] JOB.yaml\n"
	"       sandboxctl run --check JOB.yaml\n"
	"\n"
	"Create a sandbox for the job spec, run its steps in order (each as sh -c, stopping at\n"
	"the first that fails), then remove the sandbox (--keep: leave it running). Without\n"
	"--keep the sandbox's VM stops when this command ends, however it ends. SIGINT, SIGTERM\n"
	"and SIGHUP go to the running step; a second one (or 5 s after a SIGTERM) ends the job\n"
	"with 128+N and the sandbox is removed.\n"
	"--check only parses the spec and prints it normalised (exit 0), or its error (exit 2).\n"
	"--json: events on stdout, one JSON object a line (job-started, step-started, output,\n"
	"step-ended, cache, artifact, job-ended) instead of the steps' output. --junit FILE: a\n"
	"JUnit report, a test case a step. Secrets' values are masked (***) in all output.\n"
	"Spec keys (docs/jobspec.md): image, cpus, memory (MiB), disk (GiB), timeout (s, the\n"
	"whole job), env, network (none or a policy), secrets (credential rules), files (copied\n"
	"in first), steps (name, run, timeout, env, workdir, continue-on-error), artifacts\n"
	"(copied out at the end, also after a failed step, under DIR at their guest paths;\n"
	"default ./artifacts), cache (a step's name: the state after it is snapshotted, and the\n"
	"next run of the same spec, files and image restores it and skips the steps up to it;\n"
	"--no-cache runs them all and keeps nothing; the job snapshots take at most\n"
	"--cache-max GiB, default 16, the least recently used evicted). Exit status: the first\n"
	"failing step's\n"
	"(but for continue-on-error), 0 when all pass, 124 on a timeout, 2 for a spec error\n"
	"(FILE:LINE:COLUMN: what), 125 when the sandbox cannot be created.\n";

static const char ls_usage[] =
	"usage: sandboxctl ls [--json]\n"
	"\n"
	"List sandboxes: id, name, state (running, paused, stopped, dead:\n"
	"its VMM is gone without a stop), image, cpus, memory, uptime, and\n"
	"from its cgroup the CPU time and memory used (sandboxctl stats), and what\n"
	"is left of its lifetime (create --ttl; - for none).\n";

static const char stats_usage[] =
	"usage: sandboxctl stats ID [--json]\n"
	"\n"
	"Print what the sandbox's cgroup counted (its VMM, proxy and port forwarders):\n"
	"CPU time used, memory now, at its peak and its limit, bytes read and written,\n"
	"processes and threads. Nothing to print for a sandbox without a cgroup (stopped,\n"
	"or a host without usable cgroups: exit status 1).\n";

static const char logs_usage[] = "usage: sandboxctl logs ID\n"
				 "\n"
				 "Print the sandbox's console.log: the guest's serial console and\n"
				 "the VMM's messages.\n";

/* pause and resume are one function (cmd_pause.c) and a row each. */
#define PAUSE_USAGE  "usage: sandboxctl pause ID\n"
#define RESUME_USAGE "usage: sandboxctl resume ID\n"
static const char pause_help[] = PAUSE_USAGE /* (its usage), then: */
	"\n"
	"Stop the sandbox's vCPUs at a clean point; a paused sandbox uses no CPU.\n";
static const char resume_help[] = RESUME_USAGE /* (its usage), then: */
	"\n"
	"Run a paused sandbox's vCPUs again, or restore a suspended one.\n";

static const char stop_usage[] = "usage: sandboxctl stop ID\n"
				 "\n"
				 "Stop the sandbox's VM: the guest syncs its disk, the VMM shuts\n"
				 "down (SIGTERM, then SIGKILL, when it does not within 10 s).\n"
				 "The sandbox stays (state stopped) until sandboxctl rm.\n";

static const char start_usage[] =
	"usage: sandboxctl start [--timeout SEC] ID\n"
	"\n"
	"Boot a stopped (or dead) sandbox again from its own root disk and print its id once\n"
	"the guest agent answers (within SEC seconds, default 60).\n";

static const char rm_usage[] = "usage: sandboxctl rm [-f] ID...\n"
			       "\n"
			       "Remove sandboxes: their directory, disk and sockets. A running or\n"
			       "paused sandbox is refused unless -f (then its VMM is killed).\n";

/* Snapshots (cmd_snapshot.c). */
#define SNAPSHOT_USAGE "usage: sandboxctl snapshot ID NAME\n"
static const char snapshot_help[] = SNAPSHOT_USAGE
	"       sandboxctl snapshot rm [-f] NAME\n"
	"\n"
	"Snapshot a running or paused sandbox (its memory, devices and disk) as NAME;\n"
	"it runs on. rm removes one (refused while a sandbox or another snapshot\n"
	"depends on it, unless -f).\n";

static const char snapshot_rm_usage[] = "usage: sandboxctl snapshot rm [-f] NAME\n";

#define RESTORE_USAGE "usage: sandboxctl restore [--name NAME] SNAPSHOT\n"
static const char restore_help[] = RESTORE_USAGE /* (its usage), then: */
	"\n"
	"A new sandbox from a snapshot, running from where it was taken; print its\n"
	"id once its agent answers.\n";

#define FORK_USAGE    "usage: sandboxctl fork [-n N] ID\n"
#define FORK_MAX_TEXT STR(FORK_MAX)
static const char fork_help[] = FORK_USAGE
	"\n"
	"N (1-" FORK_MAX_TEXT ", default 1) copies of a running sandbox, each going on from its\n"
	"state now with its own disk layer and identity; the parent runs on.\n"
	"Prints the children's ids, one per line.\n";

static const char suspend_usage[] =
	"usage: sandboxctl suspend ID\n"
	"\n"
	"Snapshot a sandbox to disk and end its VM: it holds no memory and no CPU\n"
	"until `sandboxctl resume ID`.\n";

static const char snapshots_usage[] =
	"usage: sandboxctl snapshots [--json] [--all]\n"
	"\n"
	"List snapshots (--all: also a fork's and a suspended sandbox's).\n";

static const char images_usage[] =
	"usage: sandboxctl images [ls]\n"
	"       sandboxctl images import NAME --kernel PATH --initrd PATH --rootfs PATH\n"
	"       sandboxctl images import NAME --oci ARCHIVE [--kernel PATH --initrd PATH]\n"
	"       sandboxctl images pull NAME REF [--user U --password-stdin] [--insecure]\n"
	"                [--ca-file FILE] [--timeout SECONDS] [--kernel PATH --initrd PATH]\n"
	"\n"
	"ls       list the installed images (the default)\n"
	"import   install (or update) image NAME from a guest kernel, an initramfs holding\n"
	"         sandbox-init, and a raw ext4 root image; a rootfs on the same file system is\n"
	"         hard-linked, others are copied sparsely\n"
	"  --oci  the root file system from an OCI image layout (a directory or a tar of one) or\n"
	"         a docker save archive: its linux/amd64 image's layers, checked by their\n"
	"         digests; its Env, WorkingDir, User, Entrypoint and Cmd become exec's and run's\n"
	"         defaults (exec.conf). The kernel and initrd default to the debian image's, else\n"
	"         busybox's. Everything in the archive is checked: see docs/images.md\n"
	"pull     install (or update) image NAME from a registry (HTTP API v2): REF is\n"
	"         [http://|https://]HOST[:PORT]/REPO[:TAG|@sha256:HEX] (Docker Hub without a\n"
	"         HOST); its linux/amd64 image, every blob checked by its digest, imported\n"
	"         as --oci. --user with --password-stdin: the password is read from stdin\n"
	"         (for the registry's token server, or its Basic auth). https, but http://\n"
	"         to a loopback host; --insecure allows http:// to others. --ca-file: the CAs\n"
	"         to trust instead of the system's. --timeout: the whole pull (default 3600 s;\n"
	"         a registry silent for 30 s fails sooner). Runs sandbox-pull ($SANDBOX_PULL)\n";

static const char net_usage[] =
	"usage: sandboxctl net policy ID\n"
	"       sandboxctl net log ID [--follow]\n"
	"\n"
	"policy: the policy the sandbox's proxy enforces (normalised, without secret values).\n"
	"log: the proxy's audit log, one JSON object per connection attempt or DNS query\n"
	"(time, proto, name, addr, port, decision, rule, bytes each way); --follow waits for\n"
	"more until the sandbox stops (or ^C).\n";

static const char port_usage[] =
	"usage: sandboxctl port ID GUESTPORT [HOSTPORT]\n"
	"\n"
	"Forward 127.0.0.1:HOSTPORT (default GUESTPORT) on the host to the guest's TCP port\n"
	"GUESTPORT, until the sandbox stops. Prints the host address.\n";

static const char push_usage[] =
	"usage: sandboxctl push ID URL [--name NAME] [--keep] [--key-file FILE] [--wait SEC]\n"
	"\n"
	"Send the sandbox ID to the sandbox service at URL (a fleet with an object store),\n"
	"running: its memory, processes and disk go on there, under NAME (default ID); then\n"
	"remove it here. Only the chunks the service lacks are sent, through its API with\n"
	"your key; its network there is the service's (its policy and credentials stay here).\n"
	"  --name NAME      its name on the service\n"
	"  --keep           keep the sandbox here too (a copy)\n"
	"  --key-file FILE  the API key, on the file's first line (default $SANDBOX_API_KEY,\n"
	"                   else $LANGSMITH_API_KEY)\n"
	"  --wait SEC       for it to run there (default 600)\n";

static const char pull_usage[] =
	"usage: sandboxctl pull NAME URL [--as LOCAL] [--keep] [--key-file FILE] [--wait SEC]\n"
	"\n"
	"Bring the sandbox NAME (name or id) of the sandbox service at URL here: stopped there\n"
	"into its store, fetched through its API with your key (every chunk checked), and\n"
	"restored here, running, under LOCAL (default NAME) with this host's default network\n"
	"policy; then delete it there.\n"
	"  --as LOCAL       its name here\n"
	"  --keep           keep it there too, stopped\n"
	"  --key-file FILE  the API key, as push's\n"
	"  --wait SEC       for its stop there (default 600)\n";

const struct ctl_command ctl_commands[] = {
	{"create", cmd_create, "create a sandbox and print its id once its agent answers",
	 create_usage, create_usage},
	{"exec", cmd_exec, "run a command in a sandbox, streaming its output", exec_usage,
	 exec_usage},
	{"cp", cmd_cp, "copy a file into or out of a sandbox", cp_usage, cp_usage},
	{"run", cmd_run, "run a job spec (YAML) in a fresh sandbox", run_usage, run_usage},
	{"ls", cmd_ls, "list sandboxes", ls_usage, ls_usage},
	{"stats", cmd_stats, "a sandbox's CPU, memory and I/O used, and its limits", stats_usage,
	 stats_usage},
	{"logs", cmd_logs, "print a sandbox's console", logs_usage, logs_usage},
	{"pause", cmd_pause, "stop a sandbox's vCPUs", pause_help, PAUSE_USAGE},
	{"resume", cmd_pause, "run a paused sandbox's vCPUs again", resume_help, RESUME_USAGE},
	{"stop", cmd_stop, "stop a sandbox's VM (its disk stays)", stop_usage, stop_usage},
	{"start", cmd_start, "boot a stopped sandbox again, from its own disk", start_usage,
	 start_usage},
	{"rm", cmd_rm, "remove a sandbox", rm_usage, rm_usage},
	{"snapshot", cmd_snapshot, "snapshot a sandbox (memory, devices, disk) under a name",
	 snapshot_help, SNAPSHOT_USAGE},
	{"restore", cmd_restore, "a new sandbox from a snapshot, running where it was",
	 restore_help, RESTORE_USAGE},
	{"fork", cmd_fork, "copies of a running sandbox, each going on from its state", fork_help,
	 FORK_USAGE},
	{"suspend", cmd_suspend, "snapshot a sandbox to disk and end its VM (resume ID)",
	 suspend_usage, suspend_usage},
	{"snapshots", cmd_snapshots, "list snapshots", snapshots_usage, snapshots_usage},
	{"images", cmd_images, "list, import or pull images", images_usage, images_usage},
	{"net", cmd_net, "a sandbox's network policy and audit log", net_usage, net_usage},
	{"port", cmd_port, "forward a host port on 127.0.0.1 to a sandbox's port", port_usage,
	 port_usage},
	{"push", cmd_push, "send a running sandbox to a sandbox service (a fleet)", push_usage,
	 push_usage},
	{"pull", cmd_pull, "bring a sandbox of a sandbox service here, running", pull_usage,
	 pull_usage},
	/* A subcommand's own usage: no function, not listed. */
	{"snapshot rm", NULL, NULL, snapshot_rm_usage, snapshot_rm_usage},
	{NULL, NULL, NULL, NULL, NULL},
};

const struct ctl_command *ctl_command_find(const char *name)
{
	for (const struct ctl_command *c = ctl_commands; c->name; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

/* A name not in the table is this program's bug: said, rather than a crash. */
static const struct ctl_command *ctl_row(const char *name)
{
	const struct ctl_command *c = ctl_command_find(name);

	if (!c)
		errmsg("no usage text for '%s' (tools/sandboxctl/commands.c)", name);
	return c;
}

int ctl_help(const char *name)
{
	const struct ctl_command *c = ctl_row(name);

	if (!c)
		return EXIT_ERR;
	fputs(c->help, stdout);
	return EXIT_OK;
}

int ctl_usage(const char *name)
{
	const struct ctl_command *c = ctl_row(name);

	if (c)
		fputs(c->usage, stderr);
	return EXIT_USAGE;
}
