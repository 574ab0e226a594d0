"""A tf.data service on loopback, in a process of its own, for the tests
(`loopback.tf_data_service` starts it).

    python service_server.py DISPATCHER_PORT WORKER_PORT,WORKER_PORT,... LIFETIME

One process serves the dispatcher and every worker: each is a server of
its own on its own port, as in a real cluster, and the clients reach them
over gRPC alike, while the test pays for one TensorFlow start, not one per
server. The dispatcher knows its workers' addresses, as static sharding
(`ShardingPolicy.FILE`) needs.

Listens on loopback only and exits by itself after `LIFETIME` seconds, or
as soon as its parent closes its stdin, so a test never leaves one behind.
"""

import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402


def main(port, worker_ports, lifetime):
    service = tf.data.experimental.service
    ports = [int(p) for p in worker_ports.split(",")]
    addresses = [f"127.0.0.1:{p}" for p in ports]
    config = service.DispatcherConfig(port=port, worker_addresses=addresses)
    servers = [service.DispatchServer(config)]  # kept: they serve while held
    for worker_port in ports:
        servers.append(
            service.WorkerServer(
                service.WorkerConfig(
                    dispatcher_address=f"127.0.0.1:{port}",
                    worker_address="127.0.0.1:%port%",
                    port=worker_port,
                )
            )
        )
    print("ready", flush=True)
    closed = threading.Event()
    threading.Thread(
        target=lambda: (sys.stdin.read(), closed.set()), daemon=True
    ).start()
    closed.wait(lifetime)
    # Out at once: shutting the servers down one by one waits on their
    # jobs, and nothing of theirs needs to outlive the test.
    os._exit(0)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]))
