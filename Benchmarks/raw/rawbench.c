/*
 * rawbench: the raw limit for PeerKit's wire shape on this machine.
 *
 * Frames are what PeerKit puts on the wire, minus everything PeerKit does:
 *
 *   +----------------------+---------------------+
 *   | length (u32, BE)     | body (length bytes) |
 *   +----------------------+---------------------+
 *
 * The body is opaque bytes (no JSON). A zero-length frame ends a throughput run.
 *
 *   rawbench sink   [--port P] [--timeout S]
 *   rawbench source --connect HOST:PORT --size BYTES --count N [--batch FRAMES]
 *   rawbench echo   [--port P] [--timeout S]
 *   rawbench ping   --connect HOST:PORT --size BYTES --count N [--warmup N]
 *   rawbench mesh   --index I --ports P0,P1,...,PN-1 [--threads T] [--timeout S]
 *
 * Servers bind 127.0.0.1 (port 0 picks one) and print {"event":"ready","port":P} on stdout.
 * The process that measures prints one JSON object on stdout with the result. Every process
 * gives up after --timeout seconds (default 60) through alarm(2), so nothing outlives a run.
 *
 * `mesh` is one node of an idle full mesh, the floor of PeerKit's idle-mesh figures (the
 * harness measures its CPU from outside, as it does `peerkit node`'s): node I listens on
 * 127.0.0.1:PI, dials P0 ... P(I-1) and prints {"event":"ready"} once it holds a connection to
 * each of the other N-1 nodes. Its T threads (default: the online CPUs, as many as the event
 * loops of NIO's default group) each watch a share of the connections with epoll(7) and wake at
 * whole multiples of the heartbeat interval (1.25 s) on CLOCK_MONOTONIC, as PeerKit's heartbeat
 * does: then each connection the node dialled carries a ping, which the other node answers with
 * a pong at once. The frames are the size of PeerKit's ping and pong; their bodies are opaque.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

enum { READ_BUFFER = 1 << 20, MAX_BODY = 64 << 20 };

static void die(const char *what) {
    fprintf(stderr, "rawbench: %s failed: %s.\n", what, strerror(errno));
    exit(1);
}

static void usage(const char *problem) {
    fprintf(stderr, "rawbench: %s. Usage: rawbench sink|source|echo|ping|mesh [--port P] [--connect HOST:PORT] "
                    "[--size BYTES] [--count N] [--batch FRAMES] [--warmup N] [--index I] [--ports P0,P1,...] [--threads T] [--timeout S]\n", problem);
    exit(2);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set_nodelay(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) die("setsockopt(TCP_NODELAY)");
}

static void write_all(int fd, const uint8_t *bytes, size_t length) {
    while (length > 0) {
        ssize_t n = write(fd, bytes, length);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("write");
        }
        bytes += n;
        length -= (size_t)n;
    }
}

/* Reads exactly `length` bytes; returns 0 at a clean end of stream before the first byte. */
static int read_exact(int fd, uint8_t *bytes, size_t length) {
    size_t got = 0;
    while (got < length) {
        ssize_t n = read(fd, bytes + got, length - got);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("read");
        }
        if (n == 0) {
            if (got == 0) return 0;
            fprintf(stderr, "rawbench: the peer closed the connection in the middle of a frame.\n");
            exit(1);
        }
        got += (size_t)n;
    }
    return 1;
}

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

static uint32_t get_u32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static int listen_and_accept(int port) {
    int server = socket(AF_INET, SOCK_STREAM, 0);
    if (server < 0) die("socket");
    int one = 1;
    setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(server, (struct sockaddr *)&address, sizeof address) < 0) die("bind");
    if (listen(server, 1) < 0) die("listen");
    socklen_t size = sizeof address;
    if (getsockname(server, (struct sockaddr *)&address, &size) < 0) die("getsockname");
    printf("{\"event\":\"ready\",\"port\":%d}\n", ntohs(address.sin_port));
    fflush(stdout);
    int fd = accept(server, NULL, NULL);
    if (fd < 0) die("accept");
    close(server);
    set_nodelay(fd);
    return fd;
}

static int connect_to(const char *endpoint) {
    const char *colon = strrchr(endpoint, ':');
    if (!colon) usage("--connect needs HOST:PORT");
    char host[256];
    size_t hostLength = (size_t)(colon - endpoint);
    if (hostLength == 0 || hostLength >= sizeof host) usage("the host in --connect is empty or too long");
    memcpy(host, endpoint, hostLength);
    host[hostLength] = 0;
    struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1)) };
    if (inet_pton(AF_INET, host, &address.sin_addr) != 1) usage("--connect needs an IPv4 address");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) die("connect");
    set_nodelay(fd);
    return fd;
}

/* Counts frames until the zero-length end frame; parses lengths out of large reads, as a real
 * decoder would, and touches every body byte once (a checksum) so the work is not skipped. */
static void run_sink(int port) {
    int fd = listen_and_accept(port);
    uint8_t *buffer = malloc(READ_BUFFER + MAX_BODY);
    if (!buffer) die("malloc");
    size_t start = 0, end = 0;
    long frames = 0;
    uint64_t bytes = 0, checksum = 0;
    double first = 0;
    for (;;) {
        /* Parse every complete frame in the buffer. */
        while (end - start >= 4) {
            uint32_t length = get_u32(buffer + start);
            if (length > MAX_BODY) { fprintf(stderr, "rawbench: a frame of %u bytes is too long.\n", length); exit(1); }
            if (end - start < 4 + (size_t)length) break;
            if (length == 0) {
                double elapsed = now() - first;
                printf("{\"frames\":%ld,\"bytes\":%llu,\"seconds\":%.6f,\"msgsPerSec\":%.1f,\"MBps\":%.3f,\"checksum\":%llu}\n",
                       frames, (unsigned long long)bytes, elapsed, frames / elapsed, bytes / elapsed / 1e6,
                       (unsigned long long)checksum);
                fflush(stdout);
                close(fd);
                free(buffer);
                return;
            }
            const uint8_t *body = buffer + start + 4;
            checksum += body[0] + body[length - 1];
            frames += 1;
            bytes += length;
            start += 4 + (size_t)length;
        }
        if (start > 0) {
            memmove(buffer, buffer + start, end - start);
            end -= start;
            start = 0;
        }
        ssize_t n = read(fd, buffer + end, READ_BUFFER + MAX_BODY - end);
        if (n < 0) { if (errno == EINTR) continue; die("read"); }
        if (n == 0) { fprintf(stderr, "rawbench: the source closed before its end frame.\n"); exit(1); }
        if (first == 0) first = now();
        end += (size_t)n;
    }
}

/* Sends `count` frames of `size` bytes, `batch` frames per write(2), then the end frame. */
static void run_source(const char *endpoint, long size, long count, long batch) {
    int fd = connect_to(endpoint);
    size_t frame = 4 + (size_t)size;
    uint8_t *buffer = malloc(frame * (size_t)batch);
    if (!buffer) die("malloc");
    for (long i = 0; i < batch; i++) {
        put_u32(buffer + i * frame, (uint32_t)size);
        memset(buffer + i * frame + 4, 'a' + (int)(i % 26), (size_t)size);
    }
    long sent = 0;
    while (sent < count) {
        long n = count - sent < batch ? count - sent : batch;
        write_all(fd, buffer, frame * (size_t)n);
        sent += n;
    }
    uint8_t endFrame[4] = {0, 0, 0, 0};
    write_all(fd, endFrame, 4);
    /* Wait for the sink to close so the process outlives the data in flight. */
    uint8_t ignored[16];
    while (read(fd, ignored, sizeof ignored) > 0) {}
    close(fd);
    free(buffer);
}

static void run_echo(int port) {
    int fd = listen_and_accept(port);
    uint8_t *buffer = malloc(4 + MAX_BODY);
    if (!buffer) die("malloc");
    for (;;) {
        if (!read_exact(fd, buffer, 4)) break;
        uint32_t length = get_u32(buffer);
        if (length > MAX_BODY) { fprintf(stderr, "rawbench: a frame of %u bytes is too long.\n", length); exit(1); }
        if (!read_exact(fd, buffer + 4, length)) break;
        write_all(fd, buffer, 4 + (size_t)length);
    }
    close(fd);
    free(buffer);
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One frame out, the same frame back, `count` times after `warmup` untimed round trips. */
static void run_ping(const char *endpoint, long size, long count, long warmup) {
    int fd = connect_to(endpoint);
    uint8_t *frame = malloc(4 + (size_t)size);
    uint8_t *reply = malloc(4 + (size_t)size);
    double *samples = malloc(sizeof(double) * (size_t)count);
    if (!frame || !reply || !samples) die("malloc");
    put_u32(frame, (uint32_t)size);
    memset(frame + 4, 'p', (size_t)size);
    for (long i = 0; i < warmup + count; i++) {
        double begin = now();
        write_all(fd, frame, 4 + (size_t)size);
        if (!read_exact(fd, reply, 4 + (size_t)size)) { fprintf(stderr, "rawbench: the echo server closed early.\n"); exit(1); }
        if (i >= warmup) samples[i - warmup] = (now() - begin) * 1e6;
    }
    close(fd);
    qsort(samples, (size_t)count, sizeof(double), compare_doubles);
    double sum = 0;
    for (long i = 0; i < count; i++) sum += samples[i];
    printf("{\"roundTrips\":%ld,\"p50us\":%.2f,\"p99us\":%.2f,\"meanus\":%.2f,\"minus\":%.2f,\"maxus\":%.2f}\n",
           count, samples[count / 2], samples[(long)(count * 0.99)], sum / count, samples[0], samples[count - 1]);
    fflush(stdout);
    free(frame); free(reply); free(samples);
}

/* ---- mesh: one node of an idle full mesh */

enum { MESH_MAX_NODES = 1024, MESH_MAX_THREADS = 64, HEARTBEAT_NS = 1250000000L };

/* The sizes of PeerKit's `{"type":"peerkit.ping","id":"ping-7","payload":{}}` and its pong. */
enum { PING_BODY = 50, PONG_BODY = 55 };

struct mesh_connection {
    int fd;
    int dialled;
    size_t buffered;
    uint8_t buffer[512];
};

struct mesh_node {
    struct mesh_connection connections[MESH_MAX_NODES];
    int count;
    int threads;
    int epolls[MESH_MAX_THREADS];
    uint8_t ping[4 + PING_BODY], pong[4 + PONG_BODY];
};

static struct mesh_node node;

static void mesh_watch(int thread, int fd, uint64_t tag) {
    struct epoll_event event = { .events = EPOLLIN, .data.u64 = tag };
    if (epoll_ctl(node.epolls[thread], EPOLL_CTL_ADD, fd, &event) < 0) die("epoll_ctl");
}

/* Connection c belongs to thread c % threads, which alone reads and pings it. */
static void mesh_add(int fd, int dialled) {
    if (node.count == MESH_MAX_NODES) { fprintf(stderr, "rawbench: more than %d connections.\n", MESH_MAX_NODES); exit(1); }
    set_nodelay(fd);
    struct mesh_connection *connection = &node.connections[node.count];
    connection->fd = fd;
    connection->dialled = dialled;
    connection->buffered = 0;
    mesh_watch(node.count % node.threads, fd, (uint64_t)node.count);
    node.count += 1;
}

/* Reads what arrived and answers each ping in it; a frame's first body byte tells ping from pong. */
static void mesh_read(struct mesh_connection *connection) {
    ssize_t n = read(connection->fd, connection->buffer + connection->buffered, sizeof connection->buffer - connection->buffered);
    if (n < 0) { if (errno == EINTR || errno == EAGAIN) return; die("read"); }
    if (n == 0) { fprintf(stderr, "rawbench: a mesh peer closed its connection.\n"); exit(1); }
    connection->buffered += (size_t)n;
    size_t start = 0;
    while (connection->buffered - start >= 4) {
        uint32_t length = get_u32(connection->buffer + start);
        if (length > sizeof connection->buffer - 4) { fprintf(stderr, "rawbench: a mesh frame of %u bytes is too long.\n", length); exit(1); }
        if (connection->buffered - start < 4 + (size_t)length) break;
        if (length > 0 && connection->buffer[start + 4] == 'p') write_all(connection->fd, node.pong, sizeof node.pong);
        start += 4 + (size_t)length;
    }
    memmove(connection->buffer, connection->buffer + start, connection->buffered - start);
    connection->buffered -= start;
}

/* The beat's tag in the epoll sets; a connection's is its index. */
enum { TAG_BEAT = -1 };

static void *mesh_loop(void *argument) {
    int thread = (int)(intptr_t)argument;
    int beat = timerfd_create(CLOCK_MONOTONIC, 0);
    if (beat < 0) die("timerfd_create");
    struct timespec clock;
    clock_gettime(CLOCK_MONOTONIC, &clock);
    long long first = ((long long)clock.tv_sec * 1000000000LL + clock.tv_nsec) / HEARTBEAT_NS * HEARTBEAT_NS + HEARTBEAT_NS;
    struct itimerspec beats = {
        .it_value = { .tv_sec = first / 1000000000LL, .tv_nsec = first % 1000000000LL },
        .it_interval = { .tv_sec = HEARTBEAT_NS / 1000000000L, .tv_nsec = HEARTBEAT_NS % 1000000000L },
    };
    if (timerfd_settime(beat, TFD_TIMER_ABSTIME, &beats, NULL) < 0) die("timerfd_settime");
    mesh_watch(thread, beat, (uint64_t)(int64_t)TAG_BEAT);
    struct epoll_event events[64];
    for (;;) {
        int ready = epoll_wait(node.epolls[thread], events, 64, -1);
        if (ready < 0) { if (errno == EINTR) continue; die("epoll_wait"); }
        for (int i = 0; i < ready; i++) {
            int64_t tag = (int64_t)events[i].data.u64;
            if (tag == TAG_BEAT) {
                uint64_t expirations;
                if (read(beat, &expirations, sizeof expirations) < 0 && errno != EINTR) die("read(timerfd)");
                for (int c = thread; c < node.count; c += node.threads)
                    if (node.connections[c].dialled) write_all(node.connections[c].fd, node.ping, sizeof node.ping);
            } else {
                mesh_read(&node.connections[tag]);
            }
        }
    }
    return NULL;
}

/* Every connection is made before the threads start, so that they share `node` read-only. */
static void run_mesh(long index, const char *portList, long threads) {
    int ports[MESH_MAX_NODES], count = 0;
    for (const char *p = portList; p && *p && count < MESH_MAX_NODES; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        ports[count++] = atoi(p);
    if (count < 2 || index < 0 || index >= count) usage("mesh needs --ports with two or more ports and an --index among them");
    node.threads = threads > 0 ? (int)threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (node.threads < 1 || node.threads > MESH_MAX_THREADS) usage("--threads must be between 1 and 64");
    for (int t = 0; t < node.threads; t++)
        if ((node.epolls[t] = epoll_create1(0)) < 0) die("epoll_create1");
    put_u32(node.ping, PING_BODY);
    memset(node.ping + 4, 'p', PING_BODY);
    put_u32(node.pong, PONG_BODY);
    memset(node.pong + 4, 'o', PONG_BODY);

    int server = socket(AF_INET, SOCK_STREAM, 0);
    if (server < 0) die("socket");
    int one = 1;
    setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t)ports[index]) };
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(server, (struct sockaddr *)&address, sizeof address) < 0) die("bind");
    if (listen(server, MESH_MAX_NODES) < 0) die("listen");
    /* Dial the nodes before this one, each as soon as it listens. */
    for (long i = 0; i < index; i++) {
        struct sockaddr_in peer = address;
        peer.sin_port = htons((uint16_t)ports[i]);
        for (;;) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            if (fd < 0) die("socket");
            if (connect(fd, (struct sockaddr *)&peer, sizeof peer) == 0) { mesh_add(fd, 1); break; }
            if (errno != ECONNREFUSED) die("connect");
            close(fd);
            usleep(20000);
        }
    }
    while (node.count < count - 1) {
        int fd = accept(server, NULL, NULL);
        if (fd < 0) { if (errno == EINTR) continue; die("accept"); }
        mesh_add(fd, 0);
    }
    printf("{\"event\":\"ready\"}\n");
    fflush(stdout);
    for (long t = 1; t < node.threads; t++) {
        pthread_t handle;
        if (pthread_create(&handle, NULL, mesh_loop, (void *)(intptr_t)t) != 0) die("pthread_create");
    }
    mesh_loop((void *)0);
}

int main(int argc, char **argv) {
    if (argc < 2) usage("a mode is required");
    const char *mode = argv[1];
    const char *endpoint = NULL;
    const char *ports = NULL;
    long port = 0, size = 100, count = 100000, batch = 1, warmup = 1000, timeout = 60, index = -1, threads = 0;
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc) usage("every option takes a value");
        const char *option = argv[i], *value = argv[++i];
        if (!strcmp(option, "--port")) port = atol(value);
        else if (!strcmp(option, "--connect")) endpoint = value;
        else if (!strcmp(option, "--size")) size = atol(value);
        else if (!strcmp(option, "--count")) count = atol(value);
        else if (!strcmp(option, "--batch")) batch = atol(value);
        else if (!strcmp(option, "--warmup")) warmup = atol(value);
        else if (!strcmp(option, "--timeout")) timeout = atol(value);
        else if (!strcmp(option, "--index")) index = atol(value);
        else if (!strcmp(option, "--ports")) ports = value;
        else if (!strcmp(option, "--threads")) threads = atol(value);
        else usage("unknown option");
    }
    if (size < 1 || size > MAX_BODY) usage("--size must be between 1 and 67108864");
    if (count < 1 || batch < 1 || warmup < 0 || port < 0 || port > 65535) usage("a count, batch, warmup or port is out of range");
    alarm((unsigned)timeout);
    if (!strcmp(mode, "sink")) run_sink((int)port);
    else if (!strcmp(mode, "echo")) run_echo((int)port);
    else if (!strcmp(mode, "source")) { if (!endpoint) usage("source needs --connect"); run_source(endpoint, size, count, batch); }
    else if (!strcmp(mode, "ping")) { if (!endpoint) usage("ping needs --connect"); run_ping(endpoint, size, count, warmup); }
    else if (!strcmp(mode, "mesh")) { if (!ports) usage("mesh needs --ports"); run_mesh(index, ports, threads); }
    else usage("unknown mode");
    return 0;
}
