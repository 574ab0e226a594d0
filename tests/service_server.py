"""A tf.data service dispatcher or worker in a process of its own, for tests
and `benchmarks/service.py` (`loopback.tf_data_service` starts them).

    python service_server.py dispatcher PORT WORKER_PORT,WORKER_PORT,... LIFETIME
    python service_server.py worker DISPATCHER_PORT WORKER_PORT LIFETIME

The dispatcher knows its workers' addresses, as static sharding
(`ShardingPolicy.FILE`) needs.

Listens on loopback only and exits by itself after `LIFETIME` seconds, or
as soon as its parent closes its stdin, so a test never leaves one behind.
"""

import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402


def main(role, port, workers, lifetime):
    service = tf.data.experimental.service
    if role == "dispatcher":
        addresses = [f"127.0.0.1:{p}" for p in workers.split(",")]
        config = service.DispatcherConfig(port=port, worker_addresses=addresses)
        server = service.DispatchServer(config)
    else:
        server = service.WorkerServer(
            service.WorkerConfig(
                dispatcher_address=f"127.0.0.1:{port}",
                worker_address="127.0.0.1:%port%",
                port=int(workers),
            )
        )
    print("ready", flush=True)
    closed = threading.Event()
    threading.Thread(
        target=lambda: (sys.stdin.read(), closed.set()), daemon=True
    ).start()
    closed.wait(lifetime)
    del server
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
