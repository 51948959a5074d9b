"""The documentation's code runs: every ```python and ```bash block of README.md and
cluster/README.md, in order, as one script per file.

Rules (so a block either runs or says why it does not):

* A block preceded by ``<!-- doc-test: skip: REASON -->`` is not run; the reason is
  required (a cluster that is not here, for example).
* Python blocks of a file share one namespace, in document order, like a reader
  pasting them into the ``main()`` of one script run under
  ``if __name__ == "__main__":`` (as the README's "On Dask" section says a script
  must: Dask's spawned workers import the main module again); bash blocks run in
  between with ``bash -e`` in the same directory, a temporary one holding links to
  ``pipelines/`` and ``cluster/``; ``onebit-dask`` is ``python -m onebit_dask``
  from this source tree.
* In bash blocks, ``python -m pip install ...`` (the tests run on this tree) and
  ``python -m pytest`` (this is part of that suite) are not run.
* Sizes are made small by the substitutions of :data:`SMALLER`, applied to the
  file's text, and ``pipelines/quickstart.yaml`` is the same grid on the smaller cells
  of :data:`helpers.SMALL_CELLS`: the same code on fewer observations.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.support.helpers import ROOT, small_quickstart

SMALLER = {
    "README.md": {"100_000": "5_000", "100000": "5000", "10_000]": "2_000]",
                  # test sets of 1000 rows, not the default 10 000 (each fit scores them
                  # at every iteration)
                  "--n-iter 10\n": "--n-iter 10 --n-test 1000\n",
                  "flip=0.05, seed=0)": "flip=0.05, seed=0, n_test=1000)"},
    "cluster/README.md": {},
}
FENCE = re.compile(r"^(?:<!-- doc-test: (?P<mark>[^>]*?) -->\n)?```(?P<lang>[a-z]*)\n(?P<body>.*?)^```$",
                   re.S | re.M)
NOT_RUN = re.compile(r"^\s*python -m (pip install|pytest)\b")


def blocks(name):
    """``(language, code, mark)`` of every fenced block of the file, in order."""
    text = (ROOT / name).read_text()
    for old, new in SMALLER[name].items():
        assert old in text, f"{name} no longer has {old!r}: update SMALLER"
        text = text.replace(old, new)
    return [(m["lang"], m["body"], m["mark"]) for m in FENCE.finditer(text)]


def script(name) -> str:
    """One Python script running the file's python and bash blocks in order."""
    parts = ["import subprocess\n", "def main():\n"]
    for lang, body, mark in blocks(name):
        if mark is not None:
            assert re.fullmatch(r"skip: \S.*", mark), f"{name}: a doc-test mark needs " \
                                                      f"'skip: REASON', not {mark!r}"
            continue
        if lang == "python":
            parts.append("".join(f"    {line}" if line.strip() else line
                                 for line in body.splitlines(True)))
        elif lang == "bash":
            commands = []
            for line in body.splitlines():
                kept = [c for c in line.split("&&") if c.strip() and not NOT_RUN.match(c)]
                if kept:
                    commands.append(" && ".join(kept))
            if commands:
                code = BASH_PRELUDE + "\n".join(commands)
                parts.append(f"    subprocess.run(['bash', '-e', '-c', {code!r}], check=True)\n")
    parts.append("    pass\n\n\nif __name__ == '__main__':\n    main()\n")
    return "\n".join(parts)


BASH_PRELUDE = 'onebit-dask() { "$PYTHON" -m onebit_dask "$@"; }\n'


@pytest.mark.parametrize("name", list(SMALLER))
def test_every_block_is_run_or_marked(name):
    found = blocks(name)
    assert any(lang in ("python", "bash") for lang, _, _ in found)
    for lang, body, mark in found:
        if lang not in ("python", "bash", "yaml", ""):
            pytest.fail(f"{name}: a ```{lang} block: run it here or change its language")


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("name", list(SMALLER))
def test_documented_code_runs(name, tmp_path):
    (tmp_path / "cluster").symlink_to(ROOT / "cluster")
    pipelines = tmp_path / "pipelines"  # the quickstart's grid on smaller cells
    pipelines.mkdir()
    for path in (ROOT / "pipelines").iterdir():
        if path.name != "quickstart.yaml":
            (pipelines / path.name).symlink_to(path)
    small_quickstart(pipelines)
    (tmp_path / "doc_script.py").write_text(script(name))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "PYTHON": sys.executable, "MPLBACKEND": "Agg"}
    env["PATH"] = f"{pathlib.Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run([sys.executable, "doc_script.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{name}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
