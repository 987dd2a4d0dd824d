"""Where an error happened, told from the reader's side: the frames outside PyTorch.

An export error's traceback is dozens of frames deep inside torch. What the reader needs is the line
of *their* model (or of the library they call, such as torchvision) that asked the question export
could not answer. Strict export runs the model under TorchDynamo, so its traceback never reaches
the model: there the frames come from the "User Stack" / "from user code" block of the message.
`draft_export` records its stacks as dictionaries with interned file names.
"""

from __future__ import annotations

import linecache
import os
import re
import sys
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

# With the separator: torchvision's folder starts with torch's folder name.
_TORCH_DIR = str(Path(torch.__file__).resolve().parent) + os.sep
_DOCTOR_DIR = str(Path(__file__).resolve().parent) + os.sep
_STDLIB_DIR = sysconfig.get_paths()["stdlib"]
_SITE_PACKAGES = re.compile(r".*[/\\](?:site|dist)-packages[/\\]")
_MESSAGE_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)\s*$')


@dataclass(frozen=True)
class Frame:
    """One stack frame: file, line, function and the line of code."""

    path: str
    line: int
    function: str
    code: str = ""

    @property
    def in_library(self) -> bool:
        """Installed code (site-packages: torchvision, detectron2, transformers), not the reader's."""
        return bool(_SITE_PACKAGES.match(self.path))

    @property
    def location(self) -> str:
        """``file:line`` as a reader recognizes it: a notebook cell, a path relative to the working
        directory, or an installed package's path from its top-level folder on."""
        cell = _notebook_cell(self.path)
        if cell is not None:
            return f"Cell In[{cell}], line {self.line}"
        return f"{display_path(self.path)}:{self.line}"

    def __str__(self) -> str:
        code = f": {self.code}" if self.code else ""
        return f"{self.location} in {self.function}{code}"


def display_path(path: str) -> str:
    """A path without the machine's prefix: ``torchvision/ops/boxes.py`` for an installed package,
    ``models/net.py`` under the working directory, ``casebook/models/detr.py`` for a module imported
    from elsewhere (its path from its top-level package on)."""
    if _SITE_PACKAGES.match(path):
        return _SITE_PACKAGES.sub("", path)
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(Path.cwd()))
    except ValueError:
        pass
    module = _module_named_by_file().get(str(resolved))
    if module is not None:
        depth = module.count(".") + 1 + (resolved.name == "__init__.py")
        return str(Path(*resolved.parts[-depth:]))
    return path


def _module_named_by_file() -> dict[str, str]:
    """Resolved file path -> module name, for the modules imported so far."""
    names = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and name != "__main__":
            names[str(Path(file).resolve())] = name
    return names


def _notebook_cell(path: str) -> int | None:
    """The execution count of a notebook cell's code, when `path` names one in this IPython session."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    names = getattr(getattr(shell, "compile", None), "_filename_map", {})
    return names.get(path)


def is_user_code(path: str) -> bool:
    """Code outside torch, the standard library and the doctor itself (a library such as torchvision
    counts: it is what the reader's model runs)."""
    if path.startswith((_TORCH_DIR, _DOCTOR_DIR, "<")):  # "<frozen ...>", "<string>", "<eval_with_key>"
        return False
    # Installed packages may live under the standard library's folder (/usr/lib/python3.11/site-packages).
    return bool(_SITE_PACKAGES.match(path)) or not path.startswith(_STDLIB_DIR)


def _code_at(path: str, line: int) -> str:
    return linecache.getline(path, line).strip()


def traceback_frames(error: BaseException) -> list[Frame]:
    """The frames of `error`'s traceback outside torch, innermost first."""
    frames = [
        Frame(entry.filename, entry.lineno or 0, entry.name, (entry.line or "").strip())
        for entry in traceback.extract_tb(error.__traceback__)
        if is_user_code(entry.filename)
    ]
    return frames[::-1]


def message_frames(message: str) -> list[Frame]:
    """Frames quoted in an error message (strict export's "User Stack"), outside torch, innermost first."""
    frames, lines = [], message.splitlines()
    for index, text in enumerate(lines):
        match = _MESSAGE_FRAME.match(text)
        if not match or not is_user_code(match["path"]):
            continue
        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        code = "" if _MESSAGE_FRAME.match(following) or set(following) <= set("^~ ") else following
        frame = Frame(match["path"], int(match["line"]), match["function"], code)
        if frame not in frames:
            frames.append(frame)
    return frames[::-1]


def error_frames(error: BaseException) -> list[Frame]:
    """The frames outside torch where `error` happened, innermost first: from the traceback, or from
    the message when the traceback stays inside torch (strict export)."""
    return traceback_frames(error) or message_frames(str(error))


def draft_frames(stack: list[dict]) -> list[Frame]:
    """Frames of a `draft_export` failure's ``user_stack``, outside torch, innermost first.

    draft_export interns file names in `torch._logging.structured.INTERN_TABLE` (name -> id) and
    stores only the ids.
    """
    from torch._logging.structured import INTERN_TABLE

    names = {number: name for name, number in INTERN_TABLE.items()}
    frames = []
    for entry in stack:
        path = names.get(entry.get("filename"), "")
        if path and is_user_code(path):
            frames.append(
                Frame(path, int(entry.get("line", 0)), entry.get("name", "?"), entry.get("loc", ""))
            )
    return frames[::-1]


def where_lines(frames: list[Frame]) -> list[str]:
    """Evidence lines for a list of frames (innermost first): the innermost frame, and the reader's
    own frame when the innermost one is in an installed library."""
    if not frames:
        return []
    lines = [f"at {frames[0]}"]
    if frames[0].in_library:
        own = next((frame for frame in frames if not frame.in_library), None)
        if own is not None:
            lines.append(f"called from your code at {own}")
    return lines


def frame_at(path: str, line: int, function: str) -> Frame:
    """A Frame with its line of code looked up."""
    return Frame(path, line, function, _code_at(path, line))
