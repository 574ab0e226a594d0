"""Servers on loopback, in processes of their own: free ports for them, and
a tf.data service in a `service_server.py` process.
"""

import contextlib
import os
import select
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
START_TIMEOUT = 120
LIFETIME = 600


def free_ports(count):
    """`count` distinct free TCP ports on 127.0.0.1, for servers of a test."""
    probes = [socket.socket() for _ in range(count)]
    for probe in probes:
        probe.bind(("127.0.0.1", 0))
    ports = [probe.getsockname()[1] for probe in probes]
    for probe in probes:
        probe.close()
    return ports


@contextlib.contextmanager
def tf_data_service(num_workers, lifetime=LIFETIME):
    """A dispatcher and `num_workers` workers, each a server on a port of its
    own, all in one process of their own; yields the dispatcher's address and
    stops them. The process also exits by itself after `lifetime` seconds, so
    that none is ever left behind."""
    port, *worker_ports = free_ports(1 + num_workers)
    process = subprocess.Popen(
        [
            sys.executable,
            "service_server.py",
            str(port),
            ",".join(map(str, worker_ports)),
            str(lifetime),
        ],
        cwd=HERE,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        line = ""
        while not line:
            # Wait for output without blocking past the deadline.
            remaining = deadline - time.monotonic()
            if (
                remaining <= 0
                or not select.select([process.stdout], [], [], remaining)[0]
            ):
                break
            line = process.stdout.readline().strip()
            if not line and process.poll() is not None:
                break  # exited without saying ready
        assert line == "ready", "the tf.data service process did not start"
        yield f"grpc://127.0.0.1:{port}"
    finally:
        process.stdin.close()  # the servers exit when their stdin closes
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
