"""Servers on loopback, each in a process of its own: free ports for them, and
a tf.data service of `service_server.py` processes.

The tests start theirs here, and so does `benchmarks/service.py`.
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
    """A dispatcher and `num_workers` workers, each in its own process; yields
    the dispatcher's address and stops them all. Every process also exits by
    itself after `lifetime` seconds, so that none is ever left behind."""
    port, *worker_ports = free_ports(1 + num_workers)
    processes = []

    def start(role, *arguments):
        process = subprocess.Popen(
            [sys.executable, "service_server.py", role, *map(str, arguments)],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        processes.append(process)
        return process

    try:
        start("dispatcher", port, ",".join(map(str, worker_ports)), lifetime)
        workers = [
            start("worker", port, worker_port, lifetime) for worker_port in worker_ports
        ]
        deadline = time.monotonic() + START_TIMEOUT
        for process in [processes[0], *workers]:
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
            assert line == "ready", "a tf.data service process did not start"
        yield f"grpc://127.0.0.1:{port}"
    finally:
        for process in processes:
            process.stdin.close()  # the server exits when its stdin closes
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
