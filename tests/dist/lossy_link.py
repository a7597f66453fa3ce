"""A point-to-point link with delay and loss, in user space, for kernels without tc netem
(tests/dist/hosts_netns.sh): two TUN devices whose IP packets this process carries across, each
held back DELAY ms and dropped with probability LOSS (a seeded generator: the same drops for the
same packet order). The caller moves each device into a host's network namespace and gives them
addresses; TCP above sees a real lossy, slow link and retransmits. On SIGTERM it prints what it
carried and dropped, and exits.
Usage: lossy_link.py DEV_A DEV_B --delay-ms 50 --loss 0.01 --seed 1"""
import argparse
import fcntl
import heapq
import os
import random
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def tun(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    os.set_blocking(fd, False)
    return fd


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--delay-ms", type=float, default=50)
    p.add_argument("--loss", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    a, b = tun(args.a), tun(args.b)
    other = {a: b, b: a}
    draws = random.Random(args.seed)
    delay = args.delay_ms / 1000.0
    queue = []  # (due, order, fd to write, packet)
    counts = {"carried": 0, "dropped": 0}
    order = 0
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    print("lossy_link: ready", flush=True)
    while not stop:
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, fd, packet = heapq.heappop(queue)
            try:
                os.write(fd, packet)
                counts["carried"] += 1
            except OSError:
                pass  # the device is down (a link cut): the packet is lost
        timeout = max(0.0, queue[0][0] - now) if queue else 0.2
        try:
            ready, _, _ = select.select([a, b], [], [], timeout)
        except InterruptedError:
            continue
        for fd in ready:
            while True:
                try:
                    packet = os.read(fd, 65536)
                except (BlockingIOError, OSError):
                    break
                if draws.random() < args.loss:
                    counts["dropped"] += 1
                    continue
                order += 1
                heapq.heappush(queue, (time.monotonic() + delay, order, other[fd], packet))
    print("lossy_link: carried %d packets, dropped %d" % (counts["carried"], counts["dropped"]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
