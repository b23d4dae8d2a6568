"""A real small disk for tests of what happens when it fills up: a tmpfs mounted inside a
private mount namespace (``unshare -m``), so it exists only for the process run in it and
goes away with that process, whatever the test does.  Needs root (or user namespaces) and
util-linux ``unshare``; ``TMPFS`` says whether this machine has them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["TMPFS", "in_tmpfs"]


def _can_mount() -> bool:
    if shutil.which("unshare") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


TMPFS = pytest.mark.skipif(not _can_mount(), reason="needs root and unshare -m to mount a private tmpfs")


def in_tmpfs(mount_point: Path, size: str, script: str, *, env: dict[str, str] | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the shell ``script`` with a ``size`` tmpfs mounted at ``mount_point`` (an empty
    folder) in a mount namespace of its own; ``$MNT`` names the mount point.  What the
    script leaves there is gone when it ends: copy out what the test reads."""
    mount_point.mkdir(parents=True, exist_ok=True)
    body = f'mount -t tmpfs -o size={size} tmpfs "$MNT" || exit 97\n{script}'
    return subprocess.run(["unshare", "-m", "sh", "-c", body], text=True, capture_output=True, timeout=timeout,
                          env={**os.environ, **(env or {}), "MNT": str(mount_point)})
