"""File systems the tests fill or cannot write: small and read-only tmpfs mounts."""

import contextlib
import os
import subprocess

import pytest


@contextlib.contextmanager
def read_only_dir(directory):
    """``directory``, made and read-only for the ``with`` block (for root, which writes
    through permissions, a read-only tmpfs; the test is skipped where none can be mounted)."""
    directory.mkdir()
    if os.geteuid() == 0:  # root writes through permissions: a read-only mount instead
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(directory)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a read-only tmpfs here")
        try:
            yield directory
        finally:
            subprocess.run(["umount", str(directory)], check=False)
    else:
        directory.chmod(0o500)
        try:
            yield directory
        finally:
            directory.chmod(0o700)


@contextlib.contextmanager
def small_disk(directory, size="200k"):
    """``directory``, a tmpfs of ``size`` for the ``with`` block, to fill (the test is
    skipped where this user cannot mount one)."""
    directory.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                           str(directory)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill: {proc.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)
