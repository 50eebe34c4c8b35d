"""The `lagless` console script the wheel installs: the Rust command-line tool, run inside the
extension module. A bad setting is one line and exit status 1; a produce/consume round trip
through it returns every line once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "lagless"


def run(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


def test_the_console_script_reports_a_bad_setting_in_one_line() -> None:
    assert SCRIPT.exists(), f"the wheel installed no console script at {SCRIPT}"
    p = run(["-b", "127.0.0.1:1", "-X", "fetch.min.byts=1", "topic", "list"])
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("lagless: error: ") and "fetch.min.bytes" in p.stderr
    version = run(["--version"])
    assert version.returncode == 0 and version.stdout.startswith("lagless "), version


def test_lines_produced_by_the_console_script_come_back_once(bootstrap: str, make_topic) -> None:
    topic = make_topic(partitions=2, prefix="py-cli")
    n = 200
    lines = "".join(f"k{i}:v{i}\n" for i in range(n))
    p = run(["-b", bootstrap, "produce", "-t", topic, "-k", ":", "-H", "via=python"], lines)
    assert p.returncode == 0, p.stderr
    p = run(["-b", bootstrap, "consume", "-t", topic, "--from", "earliest", "-c", str(n),
             "--format", "json"])
    assert p.returncode == 0, p.stderr
    seen = set()
    for line in p.stdout.splitlines():
        r = json.loads(line)
        i = int(r["key"][1:])
        assert r["value"] == f"v{i}"
        assert r["headers"] == [{"key": "via", "value": "python"}]
        assert i not in seen, f"record {i} twice"
        seen.add(i)
    assert seen == set(range(n))
