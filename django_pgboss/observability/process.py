"""This process's vitals for the instance registry's ``metrics`` (pg-boss 12.38's nurse).

What a registered process uses and what it is allowed, taken on each registry heartbeat. Inside a
container the host-wide figures are the wrong ones (the machine's memory and CPUs, not the
container's), so limits and container usage are read from the cgroup files this process is
charged to, found through /proc/self/cgroup and /proc/self/mountinfo: cgroup v1 and v2, a private
or the host's cgroup namespace alike, as pg-boss reads them. Off Linux, or where a file cannot be
read, the limits fall back to the host's and the container-only figures are None. Nothing here
raises: a figure that cannot be read is None, and the heartbeat goes out regardless.

A Python process has no V8 heap and no Node event loop, so those figures are None.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass

from django_pgboss.records import InstanceMetrics

#: cgroup v1 writes "no limit" as the largest page-aligned int64, not as a word.
_V1_UNLIMITED = 2**60
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Cgroup:
    """The cgroup this process is charged to: its version and, for the cpu and memory controllers,
    the directories from its own cgroup up to the mount's root (a limit may sit on any of them)."""

    version: int
    cpu_dirs: tuple[str, ...]
    memory_dirs: tuple[str, ...]


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read().strip()
    except OSError:
        return None


def _unescape(path: str) -> str:
    # mountinfo spells spaces and other awkward characters in paths as \NNN (octal).
    return _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), path)


def _mounts(prefix: str, entries: list[tuple[str, list[str], str]]) -> list[tuple[str, str, str, list[str]]]:
    """(root, mount point, file system type, super options) of each mount."""
    text = _read(prefix + "/proc/self/mountinfo")
    if text is None:
        # A sandbox may refuse mountinfo and allow the rest: assume each hierarchy is mounted
        # whole under /sys/fs/cgroup, as pg-boss does.
        return [
            ("/", "/sys/fs/cgroup/" + ",".join(controllers), "cgroup", controllers)
            if controllers
            else ("/", "/sys/fs/cgroup", "cgroup2", [])
            for _, controllers, _ in entries
        ]
    mounts = []
    for line in text.splitlines():
        before, separator, after = line.partition(" - ")
        pre, post = before.split(" "), after.split(" ")
        if not separator or len(pre) < 5 or len(post) < 3:
            continue
        mounts.append((_unescape(pre[3]), _unescape(pre[4]), post[0], post[2].split(",")))
    return mounts


def _hierarchy(prefix: str, root: str, mount_point: str, path: str) -> tuple[str, ...]:
    # A mount's root is the part of the hierarchy it shows: "/" for a whole hierarchy or a private
    # namespace, the container's own cgroup for Docker on cgroup v1.
    relative = path
    if root != "/":
        relative = path[len(root) :] if path == root or path.startswith(root + "/") else ""
    parts = [part for part in relative.split("/") if part]
    base = prefix + mount_point
    return tuple("/".join([base, *parts[:index]]) for index in range(len(parts), -1, -1))


def find_cgroup(prefix: str = "") -> Cgroup | None:
    """The cgroup of this process, or None off Linux. ``prefix`` is prepended to every path read
    (for tests)."""
    text = _read(prefix + "/proc/self/cgroup")
    if text is None:
        return None
    entries = []
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) == 3:
            entries.append((fields[0], [c for c in fields[1].split(",") if c], fields[2]))
    mounts = _mounts(prefix, entries)

    def v1(controller: str) -> tuple[str, ...] | None:
        # A v1 hierarchy wins over v2: on a hybrid host the cpu and memory controllers stay on v1.
        entry = next((e for e in entries if controller in e[1]), None)
        mount = next((m for m in mounts if m[2] == "cgroup" and controller in m[3]), None)
        return _hierarchy(prefix, mount[0], mount[1], entry[2]) if entry and mount else None

    cpu, memory = v1("cpu"), v1("memory")
    if cpu or memory:
        return Cgroup(1, cpu or (), memory or ())
    unified = next((e for e in entries if e[0] == "0" and not e[1]), None)
    mount = next((m for m in mounts if m[2] == "cgroup2"), None)
    if unified and mount:
        dirs = _hierarchy(prefix, mount[0], mount[1], unified[2])
        return Cgroup(2, dirs, dirs)
    return None


def _integer(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def _cpu_quota(cgroup: Cgroup) -> tuple[float, str] | None:
    """The tightest CPU quota in cores on this cgroup or a parent, and where it is set."""
    best: tuple[float, str] | None = None
    for directory in cgroup.cpu_dirs:
        cores = None
        if cgroup.version == 2:
            quota, _, period = (_read(directory + "/cpu.max") or "").partition(" ")
            if quota and quota != "max" and period.isdigit() and int(period) > 0:
                cores = int(quota) / int(period)
        else:
            quota_us = _integer(_read(directory + "/cpu.cfs_quota_us"))
            period_us = _integer(_read(directory + "/cpu.cfs_period_us"))
            if quota_us and period_us and quota_us > 0 and period_us > 0:
                cores = quota_us / period_us
        if cores is not None and cores > 0 and (best is None or cores < best[0]):
            best = (cores, directory)
    return best


def _memory_limit(cgroup: Cgroup) -> tuple[int, str] | None:
    """The tightest memory limit in bytes on this cgroup or a parent, and where it is set."""
    best: tuple[int, str] | None = None
    name = "/memory.max" if cgroup.version == 2 else "/memory.limit_in_bytes"
    for directory in cgroup.memory_dirs:
        text = _read(directory + name)
        if not text or not text.isdigit():
            continue
        limit = int(text)
        if 0 < limit < _V1_UNLIMITED and (best is None or limit < best[0]):
            best = (limit, directory)
    return best


def _stat_field(text: str | None, key: str) -> int | None:
    match = re.search(rf"^{key} (\d+)$", text or "", re.MULTILINE)
    return int(match.group(1)) if match else None


def _working_set(cgroup: Cgroup, directory: str) -> int | None:
    # Memory in use less the inactive file cache: what container runtimes and the kubelet compare
    # against the limit, since inactive cache is reclaimed before anything is killed.
    usage = _read(directory + ("/memory.current" if cgroup.version == 2 else "/memory.usage_in_bytes"))
    if not usage or not usage.isdigit():
        return None
    key = "inactive_file" if cgroup.version == 2 else "total_inactive_file"
    inactive = _stat_field(_read(directory + "/memory.stat"), key) or 0
    return max(0, int(usage) - inactive)


def _allowed_cpus() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _rss() -> int | None:
    statm = _read("/proc/self/statm")
    try:
        return int(statm.split()[1]) * os.sysconf("SC_PAGE_SIZE") if statm else None
    except (ValueError, IndexError, OSError):
        return None


def _host_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def process_started_at() -> float:
    """When this process started, as a Unix time: from /proc on Linux (its start in clock ticks
    after boot), else when django_pgboss was first imported, which is close for a command."""
    stat, boot = _read("/proc/self/stat"), _read("/proc/stat")
    try:
        if stat and boot:
            # The command name (field 2) may hold spaces and parentheses: count from the last ")".
            ticks = int(stat.rpartition(")")[2].split()[19])
            booted = _stat_field(boot, "btime")
            if booted is not None:
                return booted + ticks / os.sysconf("SC_CLK_TCK")
    except (ValueError, IndexError, OSError):
        pass
    return _IMPORTED_AT


_IMPORTED_AT = time.time()


class ProcessVitals:
    """Takes this process's metrics on each heartbeat: ``check()``. The first check after
    construction only sets the baseline of the rates (at registration it would cover a few
    microseconds), so its ``cpu`` and ``cpu_throttled`` are None."""

    def __init__(self, prefix: str = "") -> None:
        self._prefix = prefix
        self._cgroup = find_cgroup(prefix)
        self._cpu: tuple[float, float] | None = None
        self._throttle: tuple[str, int, int] | None = None

    def check(self) -> InstanceMetrics:
        """The metrics now; never raises."""
        now, used = time.monotonic(), time.process_time()
        cpu = None
        if self._cpu is not None and now > self._cpu[0]:
            cpu = round((used - self._cpu[1]) / (now - self._cpu[0]), 3)
        self._cpu = (now, used)
        cgroup = self._cgroup
        quota = _cpu_quota(cgroup) if cgroup else None
        memory = _memory_limit(cgroup) if cgroup else None
        cpus = _allowed_cpus()
        cpu_limit = min(quota[0], cpus) if quota and cpus else (quota[0] if quota else cpus)
        return InstanceMetrics(
            cgroup=cgroup.version if cgroup else None,
            cpu=cpu,
            cpu_limit=None if cpu_limit is None else round(cpu_limit, 3),
            cpu_throttled=self._throttled(quota[1]) if quota else None,
            rss=_rss(),
            heap_used=None,
            heap_limit=None,
            memory_used=_working_set(cgroup, memory[1]) if cgroup and memory else None,
            memory_limit=memory[0] if memory else _host_memory(),
            loop_delay=None,
            loop_delay_max=None,
            loop_utilization=None,
        )

    def _throttled(self, directory: str) -> float | None:
        """The share of CPU periods since the previous check in which the cgroup holding the quota
        ran out of it; None on the first check or when the quota moved to another cgroup."""
        text = _read(directory + "/cpu.stat")
        periods, throttled = _stat_field(text, "nr_periods"), _stat_field(text, "nr_throttled")
        if periods is None or throttled is None:
            return None
        previous, self._throttle = self._throttle, (directory, periods, throttled)
        if previous is None or previous[0] != directory:
            return None
        elapsed = periods - previous[1]
        return round((throttled - previous[2]) / elapsed, 3) if elapsed > 0 else 0.0
