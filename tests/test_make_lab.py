"""`make lab` serves the book's pages as notebooks, and `make page` needs a page.

`make lab` is started as a reader starts it (with a port and a token of the test's), and asked what
a double click on a page opens: JupyterLab's default viewer for Markdown must be jupytext's
notebook, and the server must hand the page over as a notebook with its code cells.
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from booklayout import REPO_ROOT, code_cells, page_source

TOKEN = "casebook-test"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


@pytest.mark.slow
def test_make_lab_opens_a_page_as_a_notebook():
    port = free_port()
    args = f"--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token={TOKEN}"
    lab = subprocess.Popen(
        ["make", "--no-print-directory", "-C", str(REPO_ROOT), "lab", f"LAB_ARGS={args}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # make and the server it starts are stopped together
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300  # the first call installs JupyterLab
        while True:
            try:
                get(f"{base}/api/status?token={TOKEN}")
                break
            except OSError:
                if lab.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"make lab did not start a server:\n{lab.communicate()[0][-3000:]}")
                time.sleep(1)
        viewers = get(f"{base}/lab/api/settings/@jupyterlab/docmanager-extension:plugin?token={TOKEN}")
        # overrides.json changes the setting's default, as JupyterLab's settings API reports it
        default = viewers["schema"]["properties"]["defaultViewers"]["default"]
        assert default.get("markdown") == "Jupytext Notebook" and default.get("myst") == "Jupytext Notebook"
        page = page_source("pytree_outputs").relative_to(REPO_ROOT).as_posix()
        notebook = get(f"{base}/api/contents/{page}?type=notebook&content=1&token={TOKEN}")
        assert notebook["type"] == "notebook"
        code = [cell for cell in notebook["content"]["cells"] if cell["cell_type"] == "code"]
        assert len(code) == code_cells("pytree_outputs")
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(timeout=60)


@pytest.mark.slow
def test_make_page_without_a_page_says_how_to_name_one():
    result = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO_ROOT), "page"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "make page needs a page of _toc.yml: make page PAGE=notebooks/pytree_outputs.md" in result.stdout
