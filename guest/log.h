/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Console logging for sandbox-init. Every line goes to stderr (the console, /dev/console on the
 * guest's serial port) as one write(), prefixed "sandbox-init: ", so host-side tests can grep
 * the console log line by line. Lines longer than LOG_LINE_MAX are truncated, never split.
 * All functions preserve errno and are safe to call before the console is open (the write
 * then fails silently).
 */
#ifndef SANDBOX_GUEST_LOG_H
#define SANDBOX_GUEST_LOG_H

#define LOG_PREFIX   "sandbox-init: "
#define LOG_LINE_MAX 512

/* Print "sandbox-init: <message>\n": progress and the readiness banner. */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "sandbox-init: warning: <message>\n": something optional failed, init goes on. */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "sandbox-init: error: <message>\n": something the guest needs failed. */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* SANDBOX_GUEST_LOG_H */
