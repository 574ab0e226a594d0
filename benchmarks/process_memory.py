"""The benchmarks' reading of this process's memory (Linux)."""


def rss(field="VmRSS"):
    """A memory field of /proc/self/status, in bytes: `"VmRSS"` (resident
    now) or `"VmHWM"` (the peak)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")
