"""The stubs agree with the native module."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))


def test_stubtest_passes():
    script = os.path.join(os.path.dirname(HERE), "stubtest.sh")
    out = subprocess.run(["bash", script], capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable})
    assert out.returncode == 0, out.stdout + out.stderr


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def python_blocks(markdown_path: str) -> list[str]:
    """The ```python code blocks of a Markdown file, in order (dedented: a block inside a list
    item is indented with it)."""
    blocks, current = [], None
    with open(markdown_path, encoding="utf-8") as f:
        for line in f:
            if current is None and line.strip() == "```python":
                current = []
            elif current is not None and line.strip() == "```":
                blocks.append(textwrap.dedent("".join(current)))
                current = None
            elif current is not None:
                current.append(line)
    return blocks


def test_readme_examples_and_demo_pass_mypy(tmp_path):
    """What users copy type-checks against the stubs: the READMEs' Python examples (a config dict
    of mixed values is a dict[str, object] to mypy) and examples/python."""
    files = [os.path.join(ROOT, "examples", "python", name) for name in ("demo.py", "async_demo.py")]
    for readme in (os.path.join(ROOT, "README.md"), os.path.join(os.path.dirname(HERE), "README.md")):
        for i, block in enumerate(python_blocks(readme)):
            path = tmp_path / f"{os.path.basename(os.path.dirname(readme))}_readme_{i}.py"
            path.write_text(block)
            files.append(str(path))
    assert len(files) >= 3, files
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--check-untyped-defs", *files],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
