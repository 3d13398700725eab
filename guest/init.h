/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-init, PID 1 of the guest: what init.c offers the rest of the guest agent.
 *
 * Signals: init blocks SIGCHLD for the whole life of the process (it is taken with
 * sigsuspend() while init waits, and the agent's event loop can take it through a signalfd
 * instead). The blocked mask is inherited across fork and exec: a child must restore an empty
 * mask (sigprocmask(SIG_SETMASK, &empty, NULL)) before it execs a user's program.
 */
#ifndef SANDBOX_GUEST_INIT_H
#define SANDBOX_GUEST_INIT_H

/*
 * Reap every child that has exited, without blocking: a waitpid(-1, WNOHANG) loop. PID 1
 * inherits every orphan in the guest, so this runs whenever SIGCHLD arrives. Async-signal-safe
 * and preserves errno. Returns the number of children reaped (0 if none, or no children at
 * all), or -errno if waitpid failed for a reason other than having no children.
 */
int init_reap_children(void) __attribute__((warn_unused_result));

#endif /* SANDBOX_GUEST_INIT_H */
