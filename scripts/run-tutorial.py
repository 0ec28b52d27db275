#!/usr/bin/env python3
"""Runs a tutorial page as it is written: docs/adopting.md, from an empty folder to two devices in sync.

Each `<!-- tutorial: file PATH -->` comment is followed by a fenced block whose text is written to
PATH (relative to the work folder); each `<!-- tutorial: run -->` comment by a block of shell
commands, run with `bash -euo pipefail` in the package folder (the first file's top folder). The
steps run in order, in a new temporary folder beside a link named `outpost` to this repository
(the page's packages name it `../outpost`), and the first one that fails fails the run, with its
output. Whatever a step left running in the background is stopped at the end.

    scripts/run-tutorial.py docs/adopting.md [--keep]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

STEP = re.compile(r"<!-- tutorial: (file (?P<path>\S+)|run) -->\n```[a-z]*\n(?P<body>.*?)\n```", re.S)


def steps(page):
    """The page's steps in order: ("file", path, text) or ("run", None, commands)."""
    found = []
    for match in STEP.finditer(page):
        path = match.group("path")
        found.append(("file" if path else "run", path, match.group("body") + "\n"))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page")
    parser.add_argument("--keep", action="store_true", help="leave the work folder in place and print where it is")
    arguments = parser.parse_args()
    repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(arguments.page, encoding="utf-8") as handle:
        page = handle.read()
    todo = steps(page)
    if not any(kind == "run" for kind, _, _ in todo):
        sys.exit(f"run-tutorial: no '<!-- tutorial: run -->' step in {arguments.page}")

    work = tempfile.mkdtemp(prefix="outpost-tutorial-")
    os.symlink(repository, os.path.join(work, "outpost"))
    package = None
    # Every step's processes in one process group of their own, stopped together at the end.
    group = subprocess.Popen(["sleep", "infinity"], process_group=0)
    failed = False
    started = time.monotonic()
    try:
        for number, (kind, path, body) in enumerate(todo, start=1):
            if kind == "file":
                target = os.path.join(work, path)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "w", encoding="utf-8") as handle:
                    handle.write(body)
                package = package or os.path.join(work, path.split("/")[0])
                print(f"run-tutorial: step {number}: wrote {path}", flush=True)
                continue
            folder = package or work
            print(f"run-tutorial: step {number}: in {os.path.relpath(folder, work)}/\n" + body.rstrip(), flush=True)
            step = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", body], cwd=folder,
                process_group=group.pid, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
            if step.returncode != 0:
                print(step.stdout)
                print(f"run-tutorial: FAIL: step {number} exited {step.returncode} ({arguments.page})", flush=True)
                failed = True
                break
            print("\n".join("    " + line for line in step.stdout.rstrip().splitlines()[-8:]), flush=True)
    finally:
        os.killpg(group.pid, signal.SIGTERM)
        group.wait()
        if arguments.keep:
            print(f"run-tutorial: the work folder is {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if failed:
        sys.exit(1)
    print(f"run-tutorial: PASS: {len(todo)} steps of {arguments.page} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
