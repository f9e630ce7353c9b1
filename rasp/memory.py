"""Free host memory, for commands that refuse work which cannot fit (``rasp tasks sample`` at a huge
length; ``rasp verify --find-limit``'s memory budget on CPU)."""
from __future__ import annotations

import os
from pathlib import Path


def _cgroup_free() -> int | None:
    """Bytes left under this process's cgroup (v2) memory limit, or None without a limit."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(0, int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text()))
    except (OSError, ValueError):
        return None


def free_host_bytes() -> int:
    """Bytes this process may still allocate: MemAvailable, or less under a cgroup memory limit."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if avail is None:
        avail = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    cg = _cgroup_free()
    return avail if cg is None else min(avail, cg)
