"""Read the installed Torch-TensorRT's source for the facts a page states, without importing it.

``import torch_tensorrt`` fails on a machine without TensorRT's libraries and a GPU, but its Python
source is installed (the book installs it for the dry-run analysis). Parsing that source with
:mod:`ast` lets a page print the exact parameter names, defaults and documentation of the pinned
release, so a sentence such as "``dynamo.compile`` has a ``hardware_compatible`` flag" is checked every
time the book is built, on any machine, and fails the build the day a release renames it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

COMPILER_MODULE = "dynamo/_compiler.py"
TOP_LEVEL_MODULE = "_compile.py"
LOWERING_PASSES_MODULE = "dynamo/lowering/passes/_aten_lowering_pass.py"
DECOMPOSITION_GROUPS_MODULE = "dynamo/lowering/_decomposition_groups.py"

# "name (type): text" or "name: (type): text", the two forms Torch-TensorRT's docstrings use.
_DOC_ENTRY = re.compile(r"^(?P<indent>\s*)(?P<name>\w+):?\s+\((?P<type>.*?)\):\s*(?P<text>.*)$")


@dataclass(frozen=True)
class Parameter:
    """One parameter of a function as written in the source."""

    name: str
    kind: str  # "positional", "keyword-only", "*args" or "**kwargs"
    default: str | None  # the default's source text, None if there is none
    annotation: str | None
    doc: str  # the parameter's entry in the docstring, "" if it has none


def package_dir(site: Path | None = None) -> Path:
    """The installed ``torch_tensorrt`` package folder (located without running its ``__init__``): this
    environment's, or the one in ``site`` (Torch-TensorRT for RTX lives in a folder of its own,
    `casebook.backends.tensorrt.engine.rtx_site`)."""
    if site is not None:
        folder = Path(site) / "torch_tensorrt"
        if not (folder / "__init__.py").is_file():
            raise ModuleNotFoundError(
                f"no torch_tensorrt package in {site}: `make install TENSORRT=rtx` puts one there"
            )
        return folder
    spec = importlib.util.find_spec("torch_tensorrt")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("torch_tensorrt is not installed in this environment")
    return Path(spec.origin).parent


def installed_version() -> str:
    """The torch-tensorrt distribution's version, from its metadata."""
    return importlib.metadata.version("torch-tensorrt")


def _module_tree(relative_path: str, site: Path | None = None) -> ast.Module:
    return ast.parse((package_dir(site) / relative_path).read_text(encoding="utf-8"))


def _find_function(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise LookupError(f"no top-level function {name!r}")


def _source(node: ast.AST | None) -> str | None:
    return None if node is None else ast.unparse(node)


def docstring_entries(docstring: str) -> dict[str, str]:
    """Parameter entries of a Google-style docstring: ``{name: text}``, continuation lines joined."""
    entries: dict[str, str] = {}
    current: str | None = None
    indent = 0
    for line in docstring.splitlines():
        match = _DOC_ENTRY.match(line)
        if match and (current is None or len(match["indent"]) <= indent):
            current, indent = match["name"], len(match["indent"])
            entries[current] = match["text"].strip()
        elif current is not None and line.strip() and len(line) - len(line.lstrip()) > indent:
            entries[current] += " " + line.strip()
        elif current is not None and not line.strip():
            continue
        else:
            current = None
    return entries


def function_parameters(relative_path: str, function: str) -> dict[str, Parameter]:
    """The parameters of ``function`` in ``torch_tensorrt/<relative_path>``, in order."""
    node = _find_function(_module_tree(relative_path), function)
    docs = docstring_entries(ast.get_docstring(node) or "")
    args = node.args
    params: dict[str, Parameter] = {}
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for arg, default in zip(positional, defaults, strict=True):
        params[arg.arg] = Parameter(
            arg.arg, "positional", _source(default), _source(arg.annotation), docs.get(arg.arg, "")
        )
    if args.vararg is not None:
        params[args.vararg.arg] = Parameter(args.vararg.arg, "*args", None, None, "")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params[arg.arg] = Parameter(
            arg.arg, "keyword-only", _source(default), _source(arg.annotation), docs.get(arg.arg, "")
        )
    if args.kwarg is not None:
        params[args.kwarg.arg] = Parameter(args.kwarg.arg, "**kwargs", None, None, "")
    return params


def function_decorators(relative_path: str, function: str, site: Path | None = None) -> list[str]:
    """The decorators of ``function`` in ``torch_tensorrt/<relative_path>``, top first, as source text
    (``["dynamo_tensorrt_converter(torch.ops.aten.nonzero.default, ...)", "needs_not_tensorrt_rtx"]``)."""
    node = _find_function(_module_tree(relative_path, site), function)
    return [ast.unparse(decorator) for decorator in node.decorator_list]


def function_source(relative_path: str, function: str, site: Path | None = None) -> str:
    """The source text of ``function`` in ``torch_tensorrt/<relative_path>`` (decorators and docstring
    left out), as `ast.unparse` writes it."""
    node = _find_function(_module_tree(relative_path, site), function)
    body = [statement for statement in node.body if not _is_docstring(statement)]
    bare = ast.FunctionDef(
        name=node.name, args=node.args, body=body, decorator_list=[], returns=node.returns, type_params=[]
    )
    return ast.unparse(ast.fix_missing_locations(bare))


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def compile_parameters() -> dict[str, Parameter]:
    """Parameters of ``torch_tensorrt.dynamo.compile``, the function that lowers an ExportedProgram."""
    return function_parameters(COMPILER_MODULE, "compile")


def defaults() -> dict[str, str]:
    """The constants of ``torch_tensorrt/dynamo/_defaults.py`` (``MIN_BLOCK_SIZE`` ...) as source text."""
    values = {}
    for node in _module_tree("dynamo/_defaults.py").body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = ast.unparse(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            values[node.target.id] = ast.unparse(node.value)
    return values


def lowering_pass_lists() -> dict[str, list[str]]:
    """The ordered lowering passes, by list name (``pre_lowering_pass_list``, ``post_lowering_pass_list``).

    Passes appended conditionally after the list literal (platform-specific ones) are not included.
    """
    lists = {}
    for node in _module_tree(LOWERING_PASSES_MODULE).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id.endswith("_pass_list")
            and isinstance(node.value, ast.List)
        ):
            lists[node.targets[0].id] = [ast.unparse(element) for element in node.value.elts]
    return lists


def kept_whole_operators() -> list[str]:
    """Operators Torch-TensorRT's decomposition table leaves intact (``torch_disabled_decompositions``).

    These have converters of their own, so Torch-TensorRT keeps them whole even where PyTorch's core
    ATen table would decompose them. Returned as written in the source (``aten.linear.default``).
    """
    for node in _module_tree(DECOMPOSITION_GROUPS_MODULE).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if (
            isinstance(target, ast.Name)
            and target.id == "torch_disabled_decompositions"
            and isinstance(node.value, ast.Set)
        ):
            return sorted(ast.unparse(element) for element in node.value.elts)
    raise LookupError("torch_disabled_decompositions not found")
