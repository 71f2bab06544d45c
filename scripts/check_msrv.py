#!/usr/bin/env python3
"""Checks the workspace's declared minimum Rust version (`rust-version` in Cargo.toml)
against what the locked dependencies declare: every package of `cargo metadata --locked`
(dependencies, build and dev dependencies) with a `rust_version` must ask for no newer a
compiler than the workspace says it needs. Run by `.ci/run`; exits 1 naming the packages
that need more.

This is the check that can run here: installing an older toolchain to build with it needs
a download this machine cannot make. It catches the common way an MSRV goes stale (a
dependency update), not a standard-library call newer than the declared version in our own
code."""

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def version(text):
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3]) + (0,) * (3 - len(re.findall(r"\d+", text)[:3]))


def main():
    cargo_toml = (ROOT / "Cargo.toml").read_text()
    declared = re.search(r'^rust-version\s*=\s*"([^"]+)"', cargo_toml, re.M)
    if not declared:
        sys.exit("Cargo.toml declares no workspace rust-version")
    ours = version(declared.group(1))
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    newer = sorted(
        (version(p["rust_version"]), p["name"], p["version"])
        for p in meta["packages"]
        if p.get("rust_version") and version(p["rust_version"]) > ours
    )
    readme = (ROOT / "README.md").read_text()
    stated = re.search(r"Rust toolchain \((\d+\.\d+) or newer", readme)
    if not stated or version(stated.group(1)) != ours:
        print(f"README.md must say 'Rust toolchain ({declared.group(1)} or newer'")
        sys.exit(1)
    if newer:
        for v, name, ver in newer:
            print(f"{name} {ver} needs Rust {'.'.join(map(str, v))}, above the declared {declared.group(1)}")
        sys.exit(1)
    print(f"rust-version {declared.group(1)}: no locked dependency needs more")


if __name__ == "__main__":
    main()
