"""CPU seconds a process and everything it started have used: what a notebook cell costs, whatever
its neighbours on the machine are doing.

A cell's wall-clock time grows when another page, the unit tests or an engine build share the
cores; its CPU time does not. ``scripts/execute_pages.py`` reads the kernel's process tree before and
after each cell (`process_tree_cpu_seconds`) and records the difference beside the cell's wall time.
"""

from __future__ import annotations

import psutil


def _own_and_waited(process: psutil.Process) -> float:
    """The process's CPU seconds, and those of its children that ended and were waited for."""
    times = process.cpu_times()
    return times.user + times.system + times.children_user + times.children_system


def process_tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of process ``pid``, of its live descendants, and of the ended ones their parents waited for.

    A child that ends and is waited for moves its time into its parent's ``children_*`` counters, so
    each second is counted once: either in a live process or in the parent that reaped it. Raises
    `psutil.NoSuchProcess` when ``pid`` itself is gone; a descendant that ends while it is being read
    is left out (its time shows up in its parent at the next reading).
    """
    root = psutil.Process(pid)
    total = _own_and_waited(root)
    for child in root.children(recursive=True):
        try:
            total += _own_and_waited(child)
        except psutil.NoSuchProcess:
            continue  # ended between the listing and the reading
    return total
