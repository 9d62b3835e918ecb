"""What live download progress costs install: the install script (each download watched by a byte reporter that
is stopped the moment the download ends) against the same script without the reporter, over one SSH connection
to a simulated host, for many small files and for a few large ones. Prints each best-of-N time and the ratio.

Run: python bench/install_progress.py [--small 50] [--large 3] [--large-mb 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gpuharness.operations.install import install_script
from gpuharness.remote.connect import HostRoute, open_remote
from gpuharness.sim.host import SimHost

#: The peer: the fetch of the script before progress reporting (the download in the foreground, nothing watching).
PLAIN_FETCH = ('fetch() { case "$1" in file://*) cp "${1#file://}" "$2.part" ;; '
               '*) curl -fsSL -o "$2.part" "$1" ;; esac || { echo "GH-ERROR download failed: $1"; '
               'rm -f "$2.part"; return 1; }; mv "$2.part" "$2"; }')


def manifest(store: Path, count: int, size: int, prefix: str) -> list[dict[str, Any]]:
    files = []
    for n in range(count):
        source = store / f"{prefix}{n}.bin"
        source.write_bytes(os.urandom(size))
        files.append({"path": f"{prefix}/{n}.bin", "url": source.as_uri(), "size": size,
                      "sha256": hashlib.sha256(source.read_bytes()).hexdigest()})
    return files


def without_progress(script: str) -> str:
    lines = [PLAIN_FETCH if line.startswith("fetch()") else line
             for line in script.splitlines() if not line.startswith("bytes()")]
    return "\n".join(lines) + "\n"


def best(host: SimHost, script: str, workspace: Path, repeat: int) -> float:
    times = []
    route = HostRoute(target="bench", host=host.ssh_host, port=host.ssh_port, user="root",
                      key_file=str(host.client_key_path), known_hosts=str(host.known_hosts_path))
    for _ in range(repeat):
        shutil.rmtree(workspace, ignore_errors=True)  # every run downloads every file
        remote = open_remote(route)
        try:
            started = time.perf_counter()
            result = remote.exec(script, deadline_s=600, on_line=lambda line: None)
            times.append(time.perf_counter() - started)
        finally:
            remote.close()
        if result.exit_status != 0:
            raise SystemExit(f"install script failed: {result.stdout[-400:]}")
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=50, help="small files (100 kB each)")
    parser.add_argument("--large", type=int, default=3, help="large files")
    parser.add_argument("--large-mb", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gh-bench-install-"))
    try:
        with SimHost(root=root / "host") as host:
            store = root / "store"
            store.mkdir()
            for label, files in ((f"{args.small} files of 100 kB", manifest(store, args.small, 100_000, "s")),
                                 (f"{args.large} files of {args.large_mb} MB",
                                  manifest(store, args.large, args.large_mb * 1_000_000, "l"))):
                workspace = host.root / "ws"
                watched = install_script(str(workspace), files)
                plain = without_progress(watched)
                assert plain != watched and "GH-BYTES" not in plain.split("fetch()")[1]
                peer = best(host, plain, workspace, args.repeat)
                ours = best(host, watched, workspace, args.repeat)
                print(f"{label}: without progress {peer * 1000:,.0f} ms, with progress {ours * 1000:,.0f} ms "
                      f"({ours / peer:.2f}x), best of {args.repeat}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
