#!/usr/bin/env python3
"""Copies the `// snippet: NAME` regions of Tests/SyncClientTests/ClientGuideTests.swift into
docs/client.md under `<!-- snippet: NAME -->`. ClientGuideTests.guideMatchesTheseTests checks
the two agree; run this after changing the test."""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
tests = (root / "Tests/SyncClientTests/ClientGuideTests.swift").read_text()
guide_path = root / "docs/client.md"
guide = guide_path.read_text()

snippets = {}
for match in re.finditer(r"^[ \t]*// snippet: (\S+)\n(.*?)^[ \t]*// end snippet$", tests, re.S | re.M):
    lines = match.group(2).rstrip("\n").split("\n")
    indent = min(len(l) - len(l.lstrip(" ")) for l in lines if l.strip())
    snippets[match.group(1)] = "\n".join(l[indent:] for l in lines)

def fill(match):
    name = match.group(1)
    if name not in snippets:
        raise SystemExit(f"docs/client.md names a snippet '{name}' that ClientGuideTests.swift does not have")
    return f"<!-- snippet: {name} -->\n```swift\n{snippets[name]}\n```"

guide = re.sub(r"<!-- snippet: (\S+) -->\n```swift\n.*?\n?```", fill, guide, flags=re.S)
guide_path.write_text(guide)
