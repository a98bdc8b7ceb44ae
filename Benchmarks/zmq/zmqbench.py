#!/usr/bin/env python3
"""The peer-library baseline: ZeroMQ through pyzmq, over TCP loopback.

    zmqbench.py pull --size BYTES [--json]                   PULL side of one-way throughput
    zmqbench.py push --connect HOST:PORT --size BYTES --count N [--json]
    zmqbench.py rep  --size BYTES [--json]                   REP side of request/reply
    zmqbench.py req  --connect HOST:PORT --size BYTES --count N [--warmup N] [--json]
    zmqbench.py pub  --subscribers N --size BYTES --count M  PUB side of fan-out (XPUB: waits for N subscriptions)
    zmqbench.py sub  --connect HOST:PORT --subscribers N     N SUB sockets in one process; the slowest one's rate

Without --json every message is `size` opaque bytes (send/recv). With --json every message is
the same envelope PeerKit puts on the wire, {"type": "BenchPayload", "payload": {"text": ..., "seq": n}},
sent with send_json/recv_json, so the JSON cost is paid on both sides as in PeerKit.

Servers bind tcp://127.0.0.1:* and print {"event": "ready", "port": P}. The measuring side prints
one JSON object with the result. Every process gives up after --timeout seconds (SIGALRM).
"""

import argparse
import json
import signal
import sys
import time

import zmq

# The JSON text of {"text":"","seq":1234567} is 25 bytes; the text fills the rest of `size`.
PAYLOAD_OVERHEAD = 25


def envelope(size, seq):
    return {"type": "BenchPayload", "payload": {"text": "x" * max(size - PAYLOAD_OVERHEAD, 0), "seq": seq}}


def ready(socket):
    endpoint = socket.getsockopt(zmq.LAST_ENDPOINT).decode()
    print(json.dumps({"event": "ready", "port": int(endpoint.rsplit(":", 1)[1])}), flush=True)


def pull(args, context):
    socket = context.socket(zmq.PULL)
    socket.bind("tcp://127.0.0.1:*")
    ready(socket)
    count = 0
    received_bytes = 0
    first = None
    if args.json:
        while True:
            message = socket.recv_json()
            if first is None:
                first = time.perf_counter()
            if message.get("type") == "end":
                break
            count += 1
            received_bytes += len(message["payload"]["text"]) + PAYLOAD_OVERHEAD
    else:
        while True:
            message = socket.recv(copy=True)
            if first is None:
                first = time.perf_counter()
            if not message:
                break
            count += 1
            received_bytes += len(message)
    elapsed = time.perf_counter() - first
    print(json.dumps({"messages": count, "seconds": elapsed, "msgsPerSec": count / elapsed,
                      "MBps": received_bytes / elapsed / 1e6}), flush=True)
    socket.close(linger=0)


def push(args, context):
    socket = context.socket(zmq.PUSH)
    socket.connect("tcp://" + args.connect)
    if args.json:
        for seq in range(args.count):
            socket.send_json(envelope(args.size, seq))
        socket.send_json({"type": "end", "payload": {}})
    else:
        body = b"z" * args.size
        for _ in range(args.count):
            socket.send(body, copy=len(body) < 65536)
        socket.send(b"")
    socket.close(linger=30_000)


def rep(args, context):
    socket = context.socket(zmq.REP)
    socket.bind("tcp://127.0.0.1:*")
    ready(socket)
    if args.json:
        while True:
            message = socket.recv_json()
            if message.get("type") == "end":
                socket.send_json({"type": "end", "payload": {}})
                break
            socket.send_json({"type": "BenchPayload", "replyTo": message.get("id"), "payload": message["payload"]})
    else:
        while True:
            message = socket.recv()
            socket.send(message)
            if not message:
                break
    socket.close(linger=0)


def req(args, context):
    socket = context.socket(zmq.REQ)
    socket.connect("tcp://" + args.connect)
    samples = []
    body = b"z" * args.size
    for i in range(args.warmup + args.count):
        begin = time.perf_counter()
        if args.json:
            message = envelope(args.size, i)
            message["id"] = str(i)
            socket.send_json(message)
            socket.recv_json()
        else:
            socket.send(body)
            socket.recv()
        if i >= args.warmup:
            samples.append((time.perf_counter() - begin) * 1e6)
    if args.json:
        socket.send_json({"type": "end", "payload": {}})
        socket.recv_json()
    else:
        socket.send(b"")
        socket.recv()
    samples.sort()
    print(json.dumps({"roundTrips": len(samples), "p50us": samples[len(samples) // 2],
                      "p99us": samples[int(len(samples) * 0.99)], "meanus": sum(samples) / len(samples),
                      "minus": samples[0], "maxus": samples[-1]}), flush=True)
    socket.close(linger=0)


def pub(args, context):
    # XPUB, so that sending starts only once every subscription has arrived (no "slow joiner"
    # losses), and no high-water mark, so that nothing is dropped: the same delivery PeerKit gives.
    socket = context.socket(zmq.XPUB)
    socket.setsockopt(zmq.SNDHWM, 0)
    socket.setsockopt(zmq.XPUB_VERBOSE, 1)  # every subscription, not only the first of a topic
    socket.bind("tcp://127.0.0.1:*")
    ready(socket)
    for _ in range(args.subscribers):
        socket.recv()  # b"\x01" + topic: one subscription
    body = b"z" * args.size
    for _ in range(args.count):
        socket.send(body, copy=len(body) < 65536)
    socket.send(b"")
    # Stay until the subscribers hang up (the harness ends this process after the result).
    time.sleep(args.timeout)


def sub(args, context):
    sockets = []
    for _ in range(args.subscribers):
        socket = context.socket(zmq.SUB)
        socket.setsockopt(zmq.RCVHWM, 0)
        socket.setsockopt(zmq.SUBSCRIBE, b"")
        socket.connect("tcp://" + args.connect)
        sockets.append(socket)
    poller = zmq.Poller()
    for socket in sockets:
        poller.register(socket, zmq.POLLIN)
    counts = {socket: 0 for socket in sockets}
    finished = set()
    first = None
    while len(finished) < len(sockets):
        for socket, _ in poller.poll():
            while True:
                try:
                    message = socket.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if first is None:
                    first = time.perf_counter()
                if not message:
                    finished.add(socket)
                    poller.unregister(socket)
                    break
                counts[socket] += 1
    elapsed = time.perf_counter() - first
    slowest = min(counts.values())
    print(json.dumps({"messages": slowest, "seconds": elapsed, "msgsPerSec": slowest / elapsed}), flush=True)
    for socket in sockets:
        socket.close(linger=0)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["pull", "push", "rep", "req", "pub", "sub"])
    parser.add_argument("--connect", help="HOST:PORT of the bound side")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--subscribers", type=int, default=1)
    parser.add_argument("--timeout", type=int, default=60)
    args = parser.parse_args()
    if args.mode in ("push", "req", "sub") and not args.connect:
        parser.error(f"{args.mode} needs --connect HOST:PORT.")
    signal.alarm(args.timeout)
    context = zmq.Context()
    {"pull": pull, "push": push, "rep": rep, "req": req, "pub": pub, "sub": sub}[args.mode](args, context)
    context.term()


if __name__ == "__main__":
    sys.exit(main())
