// SPDX-License-Identifier: GPL-2.0
/*
 * mpa-trickle: slow MPA initiators on plain TCP, against an iWARP listener. Every connection
 * accepted by an iWARP device is in its MPA exchange until the Request frame is complete, and
 * the device must end such exchanges on its own (at its deadline) and when it goes away.
 *
 *   mpa-trickle [--hold] ADDR PORT CONNS INTERVAL_MS [MAX_S]
 *
 * Opens CONNS TCP connections to ADDR:PORT, then every INTERVAL_MS sends the next byte of an
 * MPA Request frame (RFC 5044 section 7.1: the key "MPA ID Req Frame", then flags 0 (no
 * markers, no CRC), revision 1 and a private data length of 0) on each connection still open,
 * in turn. The frame's last byte is never sent, so no exchange completes: each can only end by
 * the peer closing the connection. Every connection is watched for that (the end of the
 * stream, a reset, or a send refused with EPIPE or ECONNRESET), and each is printed as it
 * happens, with its time since the connections were open.
 *
 * Without --hold the run ends when the peer has closed every connection (exit 0) or after
 * MAX_S seconds (120 by default; exit 1). With --hold it goes on until SIGTERM or SIGINT (exit
 * 0), or MAX_S (exit 1): for a caller that removes the device under the exchanges and then
 * counts the closes. Either way the last line is "mpa-trickle: K of CONNS connections closed by
 * the peer, the last after X.Y s". A connection that cannot be opened exits 1 at once; a bad
 * command line exits 2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FRAME_LEN 20		/* key, flags, revision, private data length */
#define MAX_CONNS 1000
#define CONNECT_TIMEOUT_S 10

struct conn {
	int fd;			/* -1 once closed */
	int sent;		/* bytes of the frame sent */
	long received;		/* bytes the peer sent (an MPA Reply or Reject, a TERMINATE) */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: mpa-trickle [--hold] ADDR PORT CONNS INTERVAL_MS [MAX_S]\n");
	exit(2);
}

static long number(const char *s, long min, long max)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || end == s || v < min || v > max)
		usage();
	return v;
}

static double since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) / 1e9;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *ai;
	struct conn conns[MAX_CONNS];
	struct pollfd pfds[MAX_CONNS];
	int map[MAX_CONNS];
	unsigned char frame[FRAME_LEN];
	int hold = 0, nconns, interval_ms, open_conns, by_peer = 0, gone = 0, arg = 1, rc;
	double max_s, last_close = 0, next_tick = 0;
	struct timespec t0;
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block, unblocked;

	if (argc > 1 && !strcmp(argv[1], "--hold"))
		hold = 1, arg++;
	if (argc - arg != 4 && argc - arg != 5)
		usage();
	nconns = number(argv[arg + 2], 1, MAX_CONNS);
	interval_ms = number(argv[arg + 3], 1, 3600000);
	max_s = argc - arg == 5 ? number(argv[arg + 4], 1, 86400) : 120;

	memcpy(frame, "MPA ID Req Frame", 16);
	frame[16] = 0;		/* M, C, R: no markers, no CRC, not a reject */
	frame[17] = 1;		/* revision 1 */
	frame[18] = 0;		/* private data length, big-endian: 0 */
	frame[19] = 0;

	/* SIGTERM and SIGINT are taken only in ppoll(), so none is missed between checks. */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &unblocked);
	sigdelset(&unblocked, SIGTERM);
	sigdelset(&unblocked, SIGINT);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	rc = getaddrinfo(argv[arg], argv[arg + 1], &hints, &ai);
	if (rc) {
		fprintf(stderr, "FAIL: %s port %s: %s\n", argv[arg], argv[arg + 1], gai_strerror(rc));
		return 1;
	}
	for (int i = 0; i < nconns; i++) {
		struct timeval tv = { .tv_sec = CONNECT_TIMEOUT_S };
		int one = 1, fd = socket(ai->ai_family, SOCK_STREAM, 0);

		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
		    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
		    connect(fd, ai->ai_addr, ai->ai_addrlen)) {
			fprintf(stderr, "FAIL: connection %d of %d: %s\n", i + 1, nconns,
				strerror(errno));
			return 1;
		}
		conns[i] = (struct conn){ .fd = fd };
	}
	freeaddrinfo(ai);
	open_conns = nconns;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	printf("mpa-trickle: %d connections open, a byte on each every %d ms%s\n", nconns,
	       interval_ms, hold ? ", held until SIGTERM" : "");
	fflush(stdout);

	while (!stop && (hold || open_conns) && since(&t0) < max_s) {
		double now = since(&t0);
		int n = 0;

		/* The next byte on each connection, in turn. */
		if (now >= next_tick) {
			for (int i = 0; i < nconns; i++) {
				struct conn *c = &conns[i];

				if (c->fd < 0 || c->sent >= FRAME_LEN - 1)
					continue;
				if (send(c->fd, &frame[c->sent], 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
					c->sent++;
				} else if (errno != EAGAIN && errno != EINTR) {
					int peer = errno == EPIPE || errno == ECONNRESET;

					printf("connection %d %s after %.1f s (send: %s, %d bytes sent)\n",
					       i + 1, peer ? "closed by the peer" : "failed", since(&t0),
					       strerror(errno), c->sent);
					close(c->fd);
					c->fd = -1;
					open_conns--;
					if (peer)
						by_peer++, last_close = since(&t0);
					else
						gone++;
				}
			}
			fflush(stdout);
			/* Late (a slow machine): the next byte one interval from now, not sooner. */
			next_tick += interval_ms / 1000.0;
			if (next_tick < now)
				next_tick = now + interval_ms / 1000.0;
		}

		/* Until the next byte is due: the peer's closes. */
		for (int i = 0; i < nconns; i++) {
			if (conns[i].fd < 0)
				continue;
			pfds[n] = (struct pollfd){ .fd = conns[i].fd, .events = POLLIN | POLLRDHUP };
			map[n++] = i;
		}
		double wait_s = next_tick - since(&t0);

		if (wait_s > max_s - since(&t0))
			wait_s = max_s - since(&t0);
		if (wait_s < 0)
			wait_s = 0;
		struct timespec ts = { .tv_sec = (time_t)wait_s,
				       .tv_nsec = (long)((wait_s - (time_t)wait_s) * 1e9) };

		if (ppoll(pfds, n, &ts, &unblocked) < 0) {
			if (errno == EINTR)
				continue;
			perror("FAIL: ppoll");
			return 1;
		}
		for (int k = 0; k < n; k++) {
			struct conn *c = &conns[map[k]];
			char b[512];
			ssize_t r;

			if (!pfds[k].revents)
				continue;
			r = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);
			if (r > 0) {
				c->received += r;
				continue;
			}
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			int peer = !r || errno == ECONNRESET || errno == EPIPE;

			printf("connection %d %s after %.1f s (%s, %d bytes sent, %ld received)\n",
			       map[k] + 1, peer ? "closed by the peer" : "failed", since(&t0),
			       r ? strerror(errno) : "end of stream", c->sent, c->received);
			close(c->fd);
			c->fd = -1;
			open_conns--;
			if (peer)
				by_peer++, last_close = since(&t0);
			else
				gone++;
		}
		fflush(stdout);
	}

	printf("mpa-trickle: %d of %d connections closed by the peer", by_peer, nconns);
	if (by_peer)
		printf(", the last after %.1f s", last_close);
	if (gone)
		printf(", %d failed otherwise", gone);
	printf(" (%s)\n", stop ? "stopped by a signal" : !open_conns ? "none left open" :
	       "the time limit passed");
	if (hold)
		return stop ? 0 : 1;
	return by_peer == nconns ? 0 : 1;
}
