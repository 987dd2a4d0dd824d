"""The book's catalog of export problems: one entry per problem, in one place.

Each entry says how to recognize the problem (the exception types and a stable part of the message,
or, for problems that raise nothing, the check that finds them), what it means, the fix (naming the
API), and the page that reproduces it and proves the fix. Three things read this table and so
cannot drift apart:

- the debugging playbook (the page `debugging_playbook`) renders its entries from it;
- the export doctor (`casebook.doctor`) classifies what it meets with it and sends the reader to
  the entry's page;
- the site tests (`tests/site/test_playbook.py`) check that every quoted message appears in the
  executed output of its page, and `tests/test_catalog.py` that the doctor sends a minimal
  reproduction of every entry to that page.

A new failure page adds its rows here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from casebook import REPO_ROOT, toc

# Where the doctor meets a problem. An entry matches an exception only at the stages it lists.
STAGES = {
    "callable": "the model given is not an nn.Module",
    "eager": "running the model in eager mode (`torch.while_loop` and `torch.cond` trace their bodies there too)",
    "export": "torch.export.export (non-strict)",
    "strict": "torch.export.export(strict=True)",
    "run": "running the exported program",
    "decompose": "ExportedProgram.run_decompositions()",
    "save-load": "torch.export.save / torch.export.load",
    "check": "the doctor's own checks of the exported program (parity, dimensions)",
    "device": "the program moved to another device with `.to()` and run there (`device=`)",
    "aoti": "an AOTInductor package compiled from the program, run in a worker process (`aoti=True`)",
    "tensorrt": "Torch-TensorRT's dry run",
    "tensorrt-build": "a real TensorRT engine build (`build_engines`: Torch-TensorRT for RTX, no GPU needed)",
}

# Playbook groups, in page order: (id, heading as written on the playbook page).
GROUPS = {
    "runtime-values": "Values known only at run time (`u0`)",
    "dynamic-dims": "Dynamic dimensions",
    "pytrees": "Inputs and outputs export cannot flatten",
    "code": "Code export rejects",
    "operators": "Custom operators",
    "loops": "Loops kept in the program (`torch.while_loop`, `scan`)",
    "running": "When the exported program runs",
    "tensorrt": "On the way to a TensorRT engine",
    "silent": "Problems that raise no error",
}


@dataclass(frozen=True)
class Entry:
    """One problem of the catalog.

    ``page`` is the name of the page that reproduces the problem, its file name without folder or
    suffix ("data_dependent_guards"); ``docname`` is where the table of contents puts it.
    ``message`` is the error text as the playbook quotes it: it must appear in the executed output
    of ``page``. ``pattern`` (a regular expression, searched in the message) recognizes the problem
    more generally when the quoted text names the page's own example (``x.size()[0] == 2``); by
    default it is the quoted text itself. Entries without ``message`` are problems that raise nothing
    (a dimension that silently became static); the doctor's checks find them, and ``label`` names the
    section of ``page`` that shows one.
    """

    id: str
    group: str
    title: str
    page: str
    means: str
    fix: str
    stages: tuple[str, ...]
    message: str | None = None
    raised_as: str = ""
    exceptions: tuple[str, ...] = ()
    pattern: str | None = None
    label: str | None = None

    def __post_init__(self):
        unknown = set(self.stages) - set(STAGES)
        if unknown or self.group not in GROUPS:
            raise ValueError(f"catalog entry {self.id!r}: unknown stage(s) {unknown} or group {self.group!r}")
        if (self.message is None) == (self.label is None):
            raise ValueError(f"catalog entry {self.id!r} needs either a quoted message or a page label")

    @property
    def docname(self) -> str:
        """Where `page` lives in the book: "data_dependent_guards" -> "notebooks/data_dependent_guards"."""
        return toc.docname(self.page)

    @property
    def regex(self) -> re.Pattern | None:
        if self.message is None:
            return None
        return re.compile(self.pattern if self.pattern is not None else re.escape(self.message))

    def matches(self, error: BaseException, stage: str) -> bool:
        """Whether `error`, raised at `stage`, is this problem: a listed type and the message."""
        if self.regex is None or stage not in self.stages:
            return False
        names = {_qualified(kind) for kind in type(error).__mro__}
        if not names & set(self.exceptions):
            return False
        return bool(self.regex.search(str(error)))


def _qualified(kind: type) -> str:
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


GUARD_ON_DATA = "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode"
USER_ERROR = "torch._dynamo.exc.UserError"
UNSUPPORTED = "torch._dynamo.exc.Unsupported"
HIGHER_ORDER_ERROR = "torch._dynamo.exc.UncapturedHigherOrderOpError"

ENTRIES: tuple[Entry, ...] = (
    # ---------------------------------------------------------------- values known only at run time
    Entry(
        id="data-dependent-guard",
        group="runtime-values",
        title="Python branches on a value known only at run time",
        message="Could not guard on data-dependent expression",
        raised_as="`GuardOnDataDependentSymNode` (non-strict export; strict: `UserError`)",
        exceptions=(GUARD_ON_DATA, USER_ERROR),
        stages=("export", "strict"),
        means="Python code branches on a tensor value or on a size known only at run time (`u0`)",
        fix="`torch.cond` or `torch.where` for a branch on a value; `guard_or_false` / `guard_or_true` "
        "(`torch.fx.experimental.symbolic_shapes`) for a branch on a size; `torch._check` to state a fact",
        page="data_dependent_guards",
    ),
    Entry(
        id="data-dependent-branch-strict",
        group="runtime-values",
        title="Python branches on a tensor value (strict export)",
        message="Data-dependent branching",
        raised_as="`torch._dynamo.exc.Unsupported` (strict export)",
        exceptions=(UNSUPPORTED,),
        stages=("strict",),
        means="the same branch, rejected by TorchDynamo",
        fix="`torch.cond` (both branches in the graph) or `torch.where` (compute both, select)",
        page="data_dependent_guards",
    ),
    Entry(
        id="data-dependent-int",
        group="runtime-values",
        title="A size known only at run time is needed as a Python int",
        message="Could not extract specialized integer from data-dependent expression",
        raised_as="`GuardOnDataDependentSymNode` (strict: `UserError`)",
        exceptions=(GUARD_ON_DATA, USER_ERROR),
        stages=("export", "strict"),
        means="code needs a plain Python int for a size known only at run time: sizes packed into a "
        "tensor (`spatial_shapes`) and read back, `len(t)` of a data-dependent tensor",
        fix="keep shapes as Python ints (a list of tuples), `t.shape[0]` instead of `len(t)`; "
        "`torch.arange(H) + 0.5` instead of `linspace`",
        page="constant_tensors",
    ),
    Entry(
        id="data-dependent-value-int",
        group="runtime-values",
        title="A tensor's value is needed as a Python int",
        message="Could not extract specialized integer from data-dependent expression u0 (unhinted: u0)",
        pattern="Could not extract specialized integer from data-dependent expression",
        raised_as="`GuardOnDataDependentSymNode` (strict: `UserError`); the message is the one above, the "
        "cause differs: the int is read from an input's values, not from sizes packed into a tensor",
        exceptions=(GUARD_ON_DATA, USER_ERROR),
        stages=("export", "strict"),
        means="`int()` (or `range()`, `float()`) of a value computed from an input, a parameter or a "
        "buffer (`int(lengths.max())`, a loop over `int(mask.sum())`): no Python number can stand for it",
        fix="drop the `int()`: `.item()` alone gives a symbolic int the program keeps (add `torch._check` "
        "bounds where the code needs them); keep per-element work in tensors (a mask, `torch.where`) "
        "instead of a Python loop over the count",
        page="data_dependent_guards",
    ),
    Entry(
        id="quantization-observer",
        group="runtime-values",
        title="A quantization observer left in the model",
        message="Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1))",
        pattern="Could not guard on data-dependent expression",
        raised_as="`GuardOnDataDependentSymNode` raised inside the observer's `forward` (strict: `Unsupported`, "
        "its `forward` is skipped); the message is the one of a branch on a value, the cause is the observer",
        exceptions=(GUARD_ON_DATA, USER_ERROR, UNSUPPORTED),
        stages=("export", "strict"),
        means="the model is between eager or FX quantization's `prepare` and `convert`: its observers "
        "(`activation_post_process`) collect statistics with Python branches on tensor values",
        fix="PT2E quantization: export the float model, then `prepare_pt2e` / calibrate / `convert_pt2e` "
        "(torchao) on the exported graph with the backend's quantizer, and export the result",
        page="data_dependent_guards",
    ),
    # ---------------------------------------------------------------- dynamic dimensions
    Entry(
        id="size-one-specialized",
        group="dynamic-dims",
        title="A dynamic dimension's example has size 1",
        message="specialized it to be a constant (1)",
        raised_as="`torch._dynamo.exc.UserError`",
        exceptions=(USER_ERROR,),
        stages=("export", "strict"),
        means="a dynamic dimension's example has size 1, and export specializes sizes 0 and 1",
        fix="an example with size ≥ 2; or a `ShapesSpec` with a `ShapeVar` (`torch.fx.experimental."
        "dynamic_spec`: an unbacked size, never specialized, where the code asks no Python question about "
        "it), or `torch.fx.experimental._config.patch(backed_size_oblivious=True)` where the model allows it",
        page="static_shapes_and_dynamic_dims",
    ),
    Entry(
        id="needs-a-multiple",
        group="dynamic-dims",
        title="The code needs a dimension to be a multiple (a reshape into pairs, a float scale and back)",
        message="h = 2*_h",
        # a multiple with an offset (`height = 32*_height - 14`) is export keeping a remainder that a
        # branch tested, not a divisibility the code needs: that is a constraint like any other
        pattern=r"\b\w+ = \d+\*_\w+\b(?!\s*[-+]\s*\d)",
        raised_as="`torch._dynamo.exc.UserError: Constraints violated`, whose suggested fixes define the "
        "dimension as a multiple of a new root (`_h = Dim('_h', ...)`, `h = 2*_h`)",
        exceptions=(USER_ERROR,),
        stages=("export", "strict"),
        means="the code only works for multiples of a number (a reshape into pairs or strides, "
        "`x.reshape(b, c, h // 2, 2, ...)`), and the dimension was declared as any size in a range",
        fix="declare the multiple: `_h = Dim('_h', max=...)`, then `2 * _h` in `dynamic_shapes` (export "
        "suggests it when it can; otherwise a guard such as `Eq(2*TruncToInt(0.5*ToFloat(s1)), s0)` shows it)",
        page="dynamic_shape_hazards",
    ),
    Entry(
        id="not-one-guard",
        group="dynamic-dims",
        title="A strided feature map assumed not to be 1 pixel: the bound is only in the guard",
        message="satisfy the generated guard (1 + (((-1) + L['x'].size()[2]) // 64)) != 1",
        pattern=r"satisfy the generated guard .*\) != 1(?!\d)",
        raised_as="`torch._dynamo.exc.UserError` (Constraints violated)",
        exceptions=(USER_ERROR,),
        stages=("export", "strict"),
        means="a dimension's range reaches sizes at which a strided feature map would be 1 pixel; the "
        '"Suggested fixes" omit these guards or propose a bound that is still too low',
        fix='read the smallest size from the `!= 1` guards and declare it: `Dim("h", min=...)` (the '
        "coarsest stride plus one); `refine_dynamic_shapes_from_suggested_fixes` alone is not enough",
        page="dynamic_shape_hazards",
    ),
    Entry(
        id="dynamic-shapes-spec-mismatch",
        group="dynamic-dims",
        title="The `dynamic_shapes` structure does not mirror the inputs",
        message="its top-level keys must be the arg names",
        # a tuple nested once too deep reads as one tensor's spec of the wrong length
        # (a NamedTuple input given a plain tuple spec: the type must match too)
        pattern=r"its top-level keys must be the arg names|"
        r"Expected dynamic shape spec .* to have the same length as the actual tensor shape|"
        r"Detected mismatch between the structure of `inputs` and `dynamic_shapes`",
        raised_as="`torch._dynamo.exc.UserError`, before any tracing",
        exceptions=(USER_ERROR,),
        stages=("export", "strict"),
        means="`dynamic_shapes` mirrors the inputs: a dict must have one key per argument of `forward`, "
        "including arguments with no dynamic dimension; a tuple has one entry per argument, each the "
        "tensor's own spec (a dict or a tuple as long as its shape), not nested once more",
        fix='name every argument, `None` for those with no dynamic dimension (`{"x": {0: batch}, '
        '"weights": None}`), or give a tuple in argument order, one level deep (`({0: batch},)`)',
        page="static_shapes_and_dynamic_dims",
    ),
    Entry(
        id="constraints-violated",
        group="dynamic-dims",
        title="The code forces a dimension declared dynamic to a constant or a narrower range",
        message="Constraints violated",
        raised_as="`torch._dynamo.exc.UserError`",
        exceptions=(USER_ERROR,),
        stages=("export", "strict"),
        means="a dimension declared dynamic was forced to a constant (or a smaller range) by the code "
        "(`torch.as_tensor` of sizes, `linspace` steps, a reshape to a fixed size)",
        fix="change the code that fixes the size, or apply the `dynamic_shapes` the message suggests "
        "(`Dim(..., min=..., max=...)`, `Dim.AUTO`)",
        page="constant_tensors",
    ),
    Entry(
        id="shape-cache-pins-dims",
        group="dynamic-dims",
        title="A shape the model cached in an eager call pins the dimensions declared dynamic",
        label="yolo-shape-cache-pins-dims",
        stages=("export", "strict"),
        means="`forward` keeps a cache keyed by a shape (`if self.shape != x.shape: ...; self.shape = "
        "x.shape`, as Ultralytics' `Detect` head does); after an eager call the cached `torch.Size` "
        "equals the example's, export records each equal size as a guard, and every dimension declared "
        "dynamic is pinned to the example ('Constraints violated', suggested fix `height = 320`); which "
        "dimensions are pinned depends on the last shape eager ran",
        fix="export a model whose cache is empty (a fresh one, or reset the cached shape: Ultralytics' "
        "`Detect.shape = None`), or switch the cache off for export (Ultralytics: `Detect.dynamic = True`)",
        page="ultralytics_yolo11",
    ),
    # ---------------------------------------------------------------- pytrees
    Entry(
        id="cache-output",
        group="pytrees",
        title="A transformers cache object is returned",
        message="<class 'transformers.cache_utils.EncoderDecoderCache'> in output, which is not a known type",
        # the class's module, not its name: a class of one's own called "...Cache" is not transformers'
        pattern=r"<class 'transformers\.[\w.]*Cache'> in output, which is not a known type",
        raised_as="`RuntimeError` (non-strict export of Whisper)",
        exceptions=("RuntimeError",),
        stages=("export",),
        means="a transformers cache object is returned",
        fix="`use_cache=False`, or register the cache classes as pytrees",
        page="strict_vs_non_strict",
    ),
    Entry(
        id="unflattenable-output",
        group="pytrees",
        title="The model returns a class export cannot flatten",
        message="in output, which is not a known type",
        raised_as="`RuntimeError` (non-strict export)",
        exceptions=("RuntimeError",),
        stages=("export",),
        means="the model returns a class export cannot flatten (detectron2's `Instances`)",
        fix="`torch.utils._pytree.register_pytree_node` with `serialized_type_name` and "
        "`flatten_with_keys_fn`, `torch.export.register_dataclass`, or a wrapper Module that returns "
        "tensors",
        page="pytree_outputs",
    ),
    Entry(
        id="unflattenable-output-strict",
        group="pytrees",
        title="The model returns a class export cannot flatten (strict export)",
        message="Encountered unrecognized type UserDefinedObjectVariable",
        raised_as="`AssertionError` (strict export)",
        exceptions=("AssertionError",),
        stages=("strict",),
        means="the same output, seen by TorchDynamo",
        fix="`register_pytree_node` with `serialized_type_name` and `flatten_with_keys_fn`, "
        "`torch.export.register_dataclass`, or a wrapper Module that returns tensors",
        page="pytree_outputs",
    ),
    Entry(
        id="unsupported-input-type",
        group="pytrees",
        title="An input is a class export cannot flatten",
        message="Unsupported input type",
        raised_as="`ValueError` (non-strict export)",
        exceptions=("ValueError",),
        stages=("export",),
        means="an argument is an object of a class that is not registered as a pytree node",
        fix="`torch.export.register_dataclass` (or `register_pytree_node`) for the input class; values "
        "that change at run time must be tensors",
        page="pytree_outputs",
    ),
    Entry(
        id="unsupported-input-type-strict",
        group="pytrees",
        title="An input is a class export cannot flatten (strict export)",
        message="is not supported or pytree-flattenable",
        raised_as="`torch._dynamo.exc.UserError` (strict export)",
        exceptions=(USER_ERROR,),
        stages=("strict",),
        means="the same input, seen by TorchDynamo",
        fix="`torch.export.register_dataclass` (or `register_pytree_node`) for the input class",
        page="pytree_outputs",
    ),
    Entry(
        id="missing-flatten-with-keys",
        group="pytrees",
        title="A pytree node was registered without `flatten_with_keys_fn`",
        message="Did not find a flatten_with_keys_fn",
        raised_as="`ValueError` from `torch.utils._pytree.tree_flatten_with_path` (export itself passes)",
        exceptions=("ValueError",),
        stages=("check",),
        means="a class was registered with `register_pytree_node` but without `flatten_with_keys_fn`: "
        "export passes, but whatever names leaves by their path (parity checks, this book's among "
        "them) fails",
        fix="register it with `flatten_with_keys_fn`, or use `torch.export.register_dataclass`",
        page="pytree_outputs",
    ),
    Entry(
        id="structseq-output",
        group="pytrees",
        title="A `torch.return_types` result returned as it is (`x.topk(k)`)",
        message="No registered serialization name for <class 'torch.return_types.topk'>",
        # before pytree-serialization-name, whose message this one starts with
        pattern=r"No registered serialization name for <class 'torch\.return_types\.\w+'>",
        raised_as="`NotImplementedError` from `torch.export.save` (export and the program's runs pass)",
        exceptions=("NotImplementedError",),
        stages=("save-load",),
        means="the model returns what `topk`, `sort`, `max(dim=...)` return, a `torch.return_types` "
        "structseq: export keeps it as a node of the output's pytree, and PyTorch gives that node type no "
        "serialization name, so the program runs but cannot be saved",
        fix="return a tuple (`values, indices = x.topk(k)` then `return values, indices`), or a dict of "
        "its fields",
        page="pytree_outputs",
    ),
    Entry(
        id="pytree-serialization-name",
        group="pytrees",
        title="A pytree node has no serialization name",
        message="No registered serialization name for",
        # a NamedTuple of one's own says it in other words (pytorch/pytorch#109460)
        pattern=r"No registered serialization name for|Can't serialize TreeSpec of namedtuple class",
        raised_as="`NotImplementedError` from `torch.export.save`",
        exceptions=("NotImplementedError",),
        stages=("save-load",),
        means="a pytree node was registered without `serialized_type_name`, or the output is a `NamedTuple` "
        "of one's own, which has none: the program cannot be saved",
        fix="register it with `serialized_type_name` (`register_pytree_node(..., serialized_type_name=...)`; "
        "for a `NamedTuple`, `torch.utils._pytree._register_namedtuple(cls, serialized_type_name=...)`), "
        "in every process that saves or loads it",
        page="pytree_outputs",
    ),
    # ---------------------------------------------------------------- code export rejects
    Entry(
        id="non-module-callable",
        group="code",
        title="The model is not an `nn.Module`",
        message="to be an instance of `torch.nn.Module`, got <class 'method'>",
        pattern=r"to be an instance of `?torch\.nn\.Module`?, got",
        raised_as="`ValueError` from `torch.export.export`",
        exceptions=("ValueError",),
        stages=("callable",),
        means="a bound method (a predictor's `_predict`) or a function was passed instead of a Module",
        fix="a wrapper `nn.Module` whose `forward` calls it",
        page="non_module_callables",
    ),
    Entry(
        id="size-keyed-cache",
        group="code",
        title="A cache keyed by the input's sizes",
        message="unhashable type: non-nested SymInt",
        raised_as="`TypeError` from `torch.export.export` (non-strict)",
        exceptions=("TypeError",),
        stages=("export",),
        means="the code looks up a dict (a cache of position encodings or grids, `self.cache.get(tuple(x.shape))`, "
        "`key in self.cache`) with a key built from sizes; a dynamic size is a `SymInt`, which cannot be "
        "hashed, so the lookup raises before anything is traced",
        fix="skip the cache while exporting: compute the value when `torch.compiler.is_compiling()` is true "
        "(as a patch, `casebook.patches`, when the code is a package's)",
        page="rfdetr_nano",
    ),
    Entry(
        id="tolist-float",
        group="code",
        title="Float tensor values leave the graph as Python numbers (strict export)",
        message="Tensor.tolist() with non-integer tensor",
        raised_as="`torch._dynamo.exc.Unsupported` (strict export)",
        exceptions=(UNSUPPORTED,),
        stages=("strict",),
        means="float values leave the graph as Python numbers",
        fix="keep the values as tensors (`torch.where`, tensor arithmetic) instead of `.tolist()`, or "
        "export non-strict",
        page="graph_breaks",
    ),
    Entry(
        id="skipped-function",
        group="code",
        title="`forward` calls a function TorchDynamo skips (strict export)",
        message="Attempted to call function marked as skipped",
        # a C function or method Dynamo has no rule for (`datetime.datetime.now()`) says it in other words
        pattern=r"Attempted to call function marked as skipped|"
        r"Dynamo does not know how to trace (?:method|function|the builtin)",
        raised_as="`torch._dynamo.exc.Unsupported` (strict export)",
        exceptions=(UNSUPPORTED,),
        stages=("strict",),
        means="`forward` calls Python introspection (`inspect.stack()`), a C function or method Dynamo "
        "has no rule for (`datetime.datetime.now()`), or another function Dynamo does not trace",
        fix="remove it from `forward`, or export non-strict (which runs it once and bakes its result in)",
        page="graph_breaks",
    ),
    Entry(
        id="numpy-in-forward",
        group="code",
        title="NumPy is called on tensor values",
        message=".numpy() is not supported for tensor subclasses",
        raised_as="`RuntimeError` (non-strict export)",
        exceptions=("RuntimeError",),
        stages=("export",),
        means="NumPy is called on tensor values during tracing",
        fix="`torch` operations instead of NumPy; or wrap the NumPy function in a "
        "`torch.library.custom_op` with a fake kernel (see the custom-operators page); strict export "
        "(`strict=True`) traces simple NumPy calls, not loops whose length depends on the data",
        page="graph_breaks",
    ),
    Entry(
        id="fake-constant",
        group="code",
        title="A buffer reached through `.data` in `forward` (non-strict export)",
        message="We found a fake tensor in the exported program constant's list",
        raised_as="`RuntimeError` (non-strict export; strict export passes and drops the write)",
        exceptions=("RuntimeError",),
        stages=("export",),
        means="a tensor export would keep as a constant is its tracing stand-in, a fake tensor with no "
        "values: usually a buffer or parameter that `forward` reads or writes through `.data`",
        fix="use the tensor itself (`self.count.add_(1)` instead of `self.count.data.add_(1)`), and keep "
        "state that `forward` changes in a buffer (`register_buffer`)",
        page="frozen_storage_and_mutation",
    ),
    Entry(
        id="constant-mutated",
        group="code",
        title="`forward` mutates a tensor that is not a buffer",
        message="is mutated in the forward method. Pls register it as buffer",
        raised_as="`RuntimeError` from `run_decompositions()`",
        exceptions=("RuntimeError",),
        stages=("decompose",),
        means="`forward` mutates a tensor that is a plain attribute or a global, not a buffer",
        fix="`register_buffer`, or `.clone()` before mutating",
        page="frozen_storage_and_mutation",
    ),
    # ---------------------------------------------------------------- custom operators
    Entry(
        id="custom-op-without-fake",
        group="operators",
        title="A `torch.library.custom_op` without a fake kernel",
        message="There was no fake impl registered for",
        raised_as="`RuntimeError` (non-strict export; strict: `TorchRuntimeError`)",
        exceptions=("RuntimeError", "torch._dynamo.exc.TorchRuntimeError"),
        stages=("export", "strict"),
        means="export traces with fake tensors (shapes, no data) and needs every custom operator to say "
        "what its outputs look like",
        fix="`register_fake` (`@my_op.register_fake` or `torch.library.register_fake`); an output size "
        "that depends on the data comes from `torch.library.get_ctx().new_dynamic_size()`",
        page="custom_operators",
    ),
    Entry(
        id="aten-op-without-kernel",
        group="operators",
        title="An operator of PyTorch's own (aten) that export cannot trace",
        message="does not have a meta kernel that supports dynamic output shapes",
        raised_as="`DynamicOutputShapeException` with the operator's name only (non-strict export; "
        "`UnsupportedOperatorException` for one with no fake kernel at all); strict: `Unsupported`",
        exceptions=(
            "torch._subclasses.fake_tensor.DynamicOutputShapeException",
            "torch._subclasses.fake_tensor.UnsupportedOperatorException",
            UNSUPPORTED,
        ),
        # Non-strict export's message is the operator's name alone ("aten.linalg_lstsq.default").
        # Strict export names it ("Operator `aten.linalg_lstsq.default` does not have a meta kernel ...").
        pattern=r"^aten\.\w+\.\w+(\s|$)|does not have a meta kernel that supports dynamic output shapes",
        stages=("export", "strict"),
        means="the operator is PyTorch's own, not one you registered: its output size depends on the data "
        "(the operator is tagged `dynamic_output_shape`: `linalg_lstsq`'s residuals, `_ctc_loss`'s "
        "intermediate) and PyTorch has no fake kernel that says what the output looks like",
        fix="an operator that traces for the same job (`torch.linalg.solve` for a square system); where "
        'there is none, `torch.library.register_fake("aten::op", fake, lib=library)` in a library you '
        "own, checked with `torch.library.opcheck` (it applies to every trace in the process)",
        page="custom_operators",
    ),
    Entry(
        id="operator-without-fake",
        group="operators",
        title="A C++ (`TORCH_LIBRARY`) operator without a fake kernel",
        message="Operator does not support running with fake tensors",
        raised_as="`Unsupported` (strict export; non-strict: `UnsupportedOperatorException` with the "
        "operator's name only)",
        exceptions=(UNSUPPORTED, "torch._subclasses.fake_tensor.UnsupportedOperatorException"),
        # Non-strict export's message is the operator's name alone ("my_lib.my_op.default").
        pattern=r"Operator does not support running with fake tensors|^\w+\.\w+\.\w+\s",
        stages=("export", "strict"),
        means="an operator registered with the dispatcher (a C++ extension, or `torch.library.Library`) "
        "has a kernel but no fake kernel, so export cannot trace a call to it",
        fix='`torch.library.register_fake("my_lib::my_op")` from Python (or `m.impl(..., Meta)` in '
        "C++), tested with `torch.library.opcheck`",
        page="custom_operators",
    ),
    Entry(
        id="wrong-fake-kernel",
        group="operators",
        title="A fake kernel that promises the wrong shape or dtype",
        label="custom-operators-wrong-fake",
        stages=("check",),
        means="a custom operator's fake kernel returns a shape or dtype its real kernel does not: export "
        "and a Python run of the program raise nothing, code compiled from the promise (AOTInductor) "
        "computes wrong results",
        fix="correct the fake kernel; test each one with `torch.library.opcheck(op, args)`",
        page="custom_operators",
    ),
    # ---------------------------------------------------------------- loops
    Entry(
        id="loop-carried-metadata",
        group="loops",
        title="A `while_loop` body changes a carried value's shape or dtype",
        message="Expected body_fn_output and carried_inputs to have same metadata",
        raised_as="`UncapturedHigherOrderOpError` (export, and `torch.while_loop` in eager mode)",
        exceptions=(HIGHER_ORDER_ERROR,),
        stages=("eager", "export", "strict"),
        means="the body must return every carried value with the shape, dtype and device it received; "
        "a list that grows each step (`torch.cat`) breaks that",
        fix="carry a fixed-size buffer (e.g. `MAX_STEPS` tokens) plus a step count, write step `i` with "
        "`torch.where`, and trim after the loop",
        page="control_flow_operators",
    ),
    Entry(
        id="loop-aliasing",
        group="loops",
        title="A `while_loop` body returns one of its inputs",
        message="Encountered aliasing during higher order op tracing",
        raised_as="`UncapturedHigherOrderOpError`",
        exceptions=(HIGHER_ORDER_ERROR,),
        stages=("eager", "export", "strict"),
        means="the body (or a `torch.cond` branch) returns a carried input unchanged, or a view of it",
        fix="return a new tensor (`.clone()`), or stop carrying a value the body does not change "
        "(read it from the enclosing scope instead)",
        page="control_flow_operators",
    ),
    Entry(
        id="loop-input-mutation",
        group="loops",
        title="A `while_loop` body writes its input in place",
        message="Encountered input mutation during higher order op tracing",
        raised_as="`UncapturedHigherOrderOpError`",
        exceptions=(HIGHER_ORDER_ERROR,),
        stages=("eager", "export", "strict"),
        means="the body (or a `torch.cond` branch) changes a carried input in place (`add_`, `x[i] = ...`)",
        fix="compute a new tensor (`x + 1`, `torch.where`), or write into a `.clone()`",
        page="control_flow_operators",
    ),
    Entry(
        id="loop-condition-not-scalar",
        group="loops",
        title="A `while_loop` condition that is not one boolean",
        message="Expected cond_fn to return a scalar tensor or a bool",
        raised_as="`UncapturedHigherOrderOpError`",
        exceptions=(HIGHER_ORDER_ERROR,),
        stages=("eager", "export", "strict"),
        means="`cond_fn` returned a tensor with more than one element (one flag per row of a batch)",
        fix="reduce it to one flag: `.all()`, `.any()`, or `(i < n) & ~done.all()`",
        page="control_flow_operators",
    ),
    Entry(
        id="loop-counter-index",
        group="loops",
        title="An index taken from the loop counter inside a `while_loop` body",
        message="is not in _SYM_OPS",
        raised_as="`SerializeError` from `torch.export.save`; `run_decompositions()` fails with a "
        "data-dependent guard (`u0 < 0`)",
        exceptions=("torch._export.serde.serialize.SerializeError", GUARD_ON_DATA),
        pattern=r"is not in _SYM_OPS|Could not guard on data-dependent expression u\d+ < 0",
        stages=("save-load", "decompose"),
        means="indexing with the loop counter (`tokens[:, i] = token`) turned the tensor `i` into a "
        "Python integer inside the body; the program runs, but its integer arithmetic (`sym_sum`) cannot "
        "be serialized and decomposing it asks whether the index is negative",
        fix="write with a mask instead of an index: `torch.where(torch.arange(n) == i, value, buffer)`",
        page="control_flow_operators",
    ),
    # ---------------------------------------------------------------- running the program
    Entry(
        id="runtime-assert-failed",
        group="running",
        title="An input breaks an assumption export recorded",
        message="Runtime assertion failed for expression",
        raised_as="`RuntimeError` when the exported program runs",
        exceptions=("RuntimeError",),
        stages=("run",),
        means="the input breaks an assumption export recorded: a `torch._check`, or a library fake "
        "kernel's bound (torchvision's `nms` assumes at least 2 boxes)",
        fix="give inputs that meet it, or correct the assumption (a fake kernel with "
        "`ctx.new_dynamic_size(min=0)`, registered with `torch.library.register_fake`)",
        page="data_dependent_guards",
    ),
    Entry(
        id="size-pinned-by-int",
        group="running",
        title="A size turned into a Python number pins the dimension: its range says dynamic, a guard says not",
        message="Guard failed: math.trunc(x.size()[2] / 2) == 16",
        pattern=r"Guard failed: .*math\.(?:trunc|floor|ceil)\(.*==",
        raised_as="`AssertionError` when the exported program runs at another size",
        exceptions=("AssertionError",),
        stages=("run",),
        means="the code converted a size to a Python number (`int(x.shape[-2] / 2)`, `math.floor(...)`); "
        "export used the example's value and guards it, while the dimension's range still says any size",
        fix="keep the arithmetic on the symbolic size: `x.shape[-2] // 2` (floor division) instead of "
        "`int()` of a division",
        page="dynamic_shape_hazards",
    ),
    Entry(
        id="derived-dim-guard",
        group="running",
        title="An input that is not the multiple a derived dimension (`32 * Dim`) promised",
        message="Guard failed: x.size()[3] * x.size()[2] == 32 * x.size()[3] * (x.size()[2] // 32)",
        pattern=r"Guard failed: .*// \d+\)",
        raised_as="`AssertionError` when the exported program runs",
        exceptions=("AssertionError",),
        stages=("run",),
        means="the program was exported with a derived dimension (`32 * Dim(...)`) and the traced code "
        "relied on the multiple (a crop to `h // 32 * 32`); the program checks the multiple only there, "
        "in an unreadable guard",
        fix="pad or crop the input to the multiple before calling; `torch._check(x.shape[2] % 32 == 0)` "
        "in the model gives a readable guard",
        page="dynamic_shape_hazards",
    ),
    Entry(
        id="static-dim-guard",
        group="running",
        title="An input size differs from the size the program was exported with",
        message="Guard failed: x.size()[0] == 2",
        # a size held to a number (`== 2`, `<= 16`, `% 8 == 0`); a relation between two inputs' sizes
        # (`sym_max(x.size()[1], y.size()[1]) == x.size()[1]`: a branch taken for the example) is not this
        pattern=r"(?m)Guard failed: .*\.size\(\)\[\d+\].* (?:==|!=|<=|>=|<|>) -?\d+(?:\.\d+)?$",
        raised_as="`AssertionError` when the exported program runs",
        exceptions=("AssertionError",),
        stages=("run",),
        means="the program was exported with a static size (here a batch of 2) and called with another",
        fix='`dynamic_shapes` with `Dim("batch", min=..., max=...)`',
        page="static_shapes_and_dynamic_dims",
    ),
    Entry(
        id="baked-argument-guard",
        group="running",
        title="A Python argument was baked in at export",
        message="Guard failed: multimask_output == False",
        pattern=r"Guard failed: (?![^\n]*\.size\(\))[^\n]* == ",  # a value held to the example's, not a size
        raised_as="`AssertionError` when the exported program runs",
        exceptions=("AssertionError",),
        stages=("run",),
        means="a Python argument was baked in at export; another value was passed",
        fix="export one program per value, or pass the value as a tensor (a 0-d `torch.tensor(value)`) so "
        "that it becomes an input of the graph",
        page="non_module_callables",
    ),
    Entry(
        id="kwarg-mismatch",
        group="running",
        title="The program is called with arguments laid out differently",
        message="Ran into a kwarg keyword mismatch",
        # keywords that differ, or positional arguments packed another way (a list for two tensors)
        pattern="Ran into a kwarg keyword mismatch|Trying to flatten user inputs with exported input tree spec",
        raised_as="`ValueError` when the exported program runs",
        exceptions=("ValueError",),
        stages=("run",),
        means="it is called with arguments laid out differently from the export call",
        fix="call it as it was exported (the same arguments by position and by keyword; "
        "`ep.call_spec.in_spec` shows the layout)",
        page="non_module_callables",
    ),
    # ---------------------------------------------------------------- problems that raise nothing
    Entry(
        id="dynamic-dim-specialized",
        group="silent",
        title="A dimension asked to be dynamic was made static",
        label="catalog-dynamic-dim-specialized",
        stages=("check",),
        means="export succeeded, but a dimension given as `Dim.AUTO` (or `Dim.DYNAMIC`) is a constant "
        "in the program: the code fixed it, and the program rejects every other size",
        fix='declare it with a named `Dim("name", min=2)` (or a `ShapeVar` in a `ShapesSpec`, '
        "`torch.fx.experimental.dynamic_spec`, which never specializes): export then fails with the line "
        "that fixes the size; change that line, or accept the static size",
        page="static_shapes_and_dynamic_dims",
    ),
    Entry(
        id="size-one-branch",
        group="silent",
        title="A branch on a size being 1, decided for sizes of 2 or more",
        label="dynamic-hazard-size-one-branch",
        stages=("check",),
        means="the dimension's range includes 1 (`Dim(min=1)`), but `if x.shape[0] == 1:` was decided "
        "false while tracing, with no guard: at size 1 the program takes the other branch and returns "
        "something else than eager (`torch._check(x.shape[0] != 1)` is dropped too)",
        fix="keep the branch out of the exported model (do it in the caller), or `torch.cond(x.shape[0] "
        "== 1, ...)` when both branches return the same shape",
        page="dynamic_shape_hazards",
    ),
    Entry(
        id="dropped-input-check",
        group="silent",
        title="An input check the exported program no longer makes",
        label="catalog-dropped-input-check",
        stages=("check",),
        means="code asks `torch.compiler.is_compiling()` (or `is_exporting()`) and skips a branch that "
        "raises in eager mode: the exported program accepts inputs eager rejects",
        fix="`torch._check_tensor_all(condition, message)` or `torch._assert_async(condition, message)` "
        "keep a check on tensor values in the graph; `torch._check` one on sizes",
        page="data_dependent_guards",
    ),
    Entry(
        id="load-needs-registration",
        group="running",
        title="The program loads where it was exported, not in a process that cannot import what it names",
        message="We ran into an error when deserializing the saved file",
        raised_as="`RuntimeError` from `torch.export.load`; the warning logged above it names the cause "
        "(`We failed to resolve torch.ops...`, `Deserializing ... in pytree is not registered`)",
        exceptions=("RuntimeError",),
        stages=("save-load",),
        means="the saved program names custom operators and pytree classes; the loading process must "
        "register them first, and what is defined in `__main__` (a script, a notebook) no other process "
        "can import",
        fix="define the operators and classes in a module, import it before `torch.export.load` (or "
        "`torch.ops.load_library` for a C++ library); or return plain tensors, tuples and dicts",
        page="pytree_outputs",
    ),
    Entry(
        id="data-write-dropped",
        group="silent",
        title="Strict export drops a write through `.data`",
        label="frozen-storage-data-write-dropped",
        stages=("check",),
        means="`forward` writes a buffer or parameter through `.data` (`self.count.data.add_(1)`): strict "
        "export succeeds, but the write lands in a constant that export made while tracing (a `FakeTensor` "
        "in `program.constants`), never in the buffer, so every call sees the state the model had at "
        "export while eager sees it change; non-strict export refuses the same model",
        fix="write the buffer itself (`self.count.add_(1)`) and keep state that `forward` changes in a "
        "buffer (`register_buffer`); the program then writes it back after each call (`BUFFER_MUTATION`)",
        page="frozen_storage_and_mutation",
    ),
    Entry(
        id="fake-tensors-left-in-model",
        group="silent",
        title="Export left fake tensors in the model's attributes: eager then returns FakeTensors",
        label="yolo-fake-tensors-left-in-model",
        stages=("check",),
        means="`forward` keeps what it computes in plain attributes (a cache of anchors or positions "
        "keyed by a shape, as Ultralytics' `Detect` head keeps); export runs `forward` on fake tensors, "
        "so the attributes now hold `FakeTensor`s (export warns they 'were assigned during export'), and "
        "a later eager call that reads them returns FakeTensors without an error",
        fix="export a copy (`torch.export.export(copy.deepcopy(model), ...)`, as Ultralytics' exporter "
        "does); keep state in buffers (`register_buffer`); or switch the cache off for export "
        "(Ultralytics: `Detect.dynamic = True`)",
        page="ultralytics_yolo11",
    ),
    Entry(
        id="training-mode-baked",
        group="silent",
        title="The model was exported in training mode: dropout, noise or batch statistics are in the program",
        label="catalog-training-mode-baked",
        stages=("check",),
        means="export traces the branch `self.training` selects (`F.dropout(x, p, self.training)`, an "
        "`if self.training:` augmentation, batch-norm statistics) and the program keeps it; "
        "`program.module().eval()` raises `NotImplementedError`",
        fix="`model.eval()` before `torch.export.export`; export one program per mode if both are needed",
        page="strict_vs_non_strict",
    ),
    Entry(
        id="parity-mismatch",
        group="silent",
        title="The exported program computes something else than eager",
        label="catalog-parity-mismatch",
        stages=("check",),
        means="on the example inputs the program's outputs differ from eager PyTorch's: a value was "
        "baked in while tracing (non-strict export runs Python once), or a branch was resolved for "
        "the example",
        fix="find the value that became a constant (`ep.graph` shows it; strict export or `draft_export` "
        "names the line), keep it a tensor, or move it out of `forward`",
        page="graph_breaks",
    ),
    Entry(
        id="device-baked",
        group="running",
        title="Tensors that stay on the device the model was traced on",
        message="Tensor on device cpu is not on the expected device meta!",
        # The meta implementations' message (run here), ATen's own device check on real devices (in
        # libtorch; not run here, no GPU), and the recurrent layers' ("Input and hidden tensors ...").
        pattern=r"Tensor on device \S+ is not on the expected device|Expected all tensors to be on the same device"
        r"|tensors are not at the same device",
        raised_as="`RuntimeError` from the first operator that mixes devices, after `program.module().to(device)`",
        exceptions=("RuntimeError",),
        stages=("device",),
        means="the program holds tensor constants made in `forward` from Python numbers (a `Normalize` "
        "mean) and creates tensors with the traced device as an argument; `.to()` moves parameters and "
        "buffers, not those",
        fix="`torch.export.passes.move_to_device_pass(program, device)` (it changes the program it is "
        "given), or export on the device the program will run on",
        page="exported_program_input_checks",
    ),
    Entry(
        id="exported-program-input-checks",
        group="silent",
        title="An input check written in Python that the program no longer makes",
        label="exported-program-input-checks",
        stages=("check",),
        means="`forward` checks its inputs in Python (`if not x.is_floating_point(): raise`, "
        "`isinstance`, `x.dim() != ...`); the check ran once while export traced and left nothing in "
        "the graph, which checks only the inputs' structure and sizes: the program runs inputs eager "
        "rejects (`uint8` images) and returns plausible output",
        fix="`torch.ops.aten._assert_tensor_metadata.default(x, dtype=...)` keeps a dtype check in the "
        "graph (`torch._check` does not); or ship a wrapper around `ExportedProgram.module()` that "
        "re-runs the checks",
        page="exported_program_input_checks",
    ),
    Entry(
        id="example-dtype-assumed",
        group="running",
        title="A conversion in `forward`: the program takes only the example's dtype",
        message="Tensor dtype mismatch! Expected: Float, Got: unsigned char",
        pattern=r"Tensor dtype mismatch! Expected: \S+, Got: ",
        raised_as="`RuntimeError` from `aten._assert_tensor_metadata`, which export puts before a "
        "conversion of an input (`x.float()`, `x.to(torch.float32)`)",
        exceptions=("RuntimeError",),
        stages=("run",),
        means="`forward` converts an input (`x.float()`); export records the example's dtype as an "
        "assert in front of the conversion (pytorch/pytorch#151001): eager converts any dtype, the "
        "program refuses all but the example's. A Python branch on the dtype "
        "(`if x.dtype != torch.float32`) is decided for the example's dtype the same way",
        fix="export with an example of the dtype the program will be called with "
        "(`torch.export.export(model, (frames_uint8,))` for uint8 frames), one program per input "
        "dtype; or convert the input before calling the program",
        page="exported_program_input_checks",
    ),
    Entry(
        id="example-layout-assumed",
        group="running",
        title="A `.contiguous()` that did nothing on the example: the program assumes its memory layout",
        message="view size is not compatible with input tensor's size and stride",
        raised_as="`RuntimeError` from an `aten.view` of the program, for an input whose strides differ "
        "from the example's (channels-last frames, a transposed tensor)",
        exceptions=("RuntimeError",),
        stages=("run",),
        means="`.contiguous()` on the contiguous example changed nothing and is not in the graph; the "
        "`view` after it needs the example's strides (pytorch/pytorch#186381). Eager copies other "
        "layouts, the program does not. `reshape` in its place exports, but `run_decompositions()` "
        "(what a backend compiles) turns it back into that `view`",
        fix="export with an example in the layout the program will be called with "
        "(`x.contiguous(memory_format=torch.channels_last)`): the `contiguous` then stays in the graph "
        "and both layouts run; or make the inputs contiguous before calling the program",
        page="exported_program_input_checks",
    ),
    Entry(
        id="restrictive-runtime-assert",
        group="silent",
        title="The program refuses too-small results of an operator",
        label="catalog-restrictive-runtime-assert",
        stages=("check",),
        means="the program asserts a lower bound of 2 or more on a size known only at run time, usually "
        "from a library's fake kernel (torchvision's stock `nms` kernel): inputs that give 0 or 1 "
        "elements there fail at run time",
        fix="a fake kernel that allows empty results: `torch.library.register_fake` with "
        "`ctx.new_dynamic_size(min=0)`; or, if the bound is yours (`torch._check`), nothing to do",
        page="data_dependent_guards",
    ),
    Entry(
        id="aoti-unchecked-inputs",
        group="silent",
        title="An AOTInductor package runs inputs it was not compiled for",
        label="side-by-side-refusals",
        stages=("aoti",),
        means="by default the package's generated code checks nothing about its inputs: a float64 or "
        "uint8 tensor, a tensor missing a dimension, a transposed or channels-last view all run and "
        "return other values than eager's, or read memory they were never given",
        fix="`AOTI_RUNTIME_CHECK_INPUTS=1` in the serving process before the package's first call "
        "(`run_aoti` sets it), or `CheckedProgram(program, run=package, contiguous_only=True)` in front "
        "of the package",
        page="side_by_side",
    ),
    Entry(
        id="aoti-size-one-refused",
        group="running",
        title="With its input checks on, an AOTInductor package refuses size 1, which the program accepts",
        message="dim value is too small at 0, expected it to be >= 2, but got: 1",
        pattern=r"dim value is too small at \d+, expected it to be >= 2, but got: [01]\b",
        raised_as="`RuntimeError` from the package's call in Python, exit code 5 from `run_aoti`; only "
        "with `AOTI_RUNTIME_CHECK_INPUTS=1`",
        exceptions=("RuntimeError",),
        stages=("aoti",),
        means="the check compares each dynamic size with PyTorch's own range for it, which starts at 2 "
        "(sizes 0 and 1 are specialized while tracing), not with the exported `Dim(min=1)`: a batch "
        "of one image is refused",
        fix="leave `AOTI_RUNTIME_CHECK_INPUTS` unset and check inputs against the exported range with "
        "`CheckedProgram(program, run=package, contiguous_only=True)`",
        page="side_by_side",
    ),
    Entry(
        id="tensorrt-unsupported-ops",
        group="silent",
        title="Operators TensorRT cannot convert",
        label="catalog-tensorrt-unsupported-ops",
        stages=("tensorrt",),
        means="the program exports, but Torch-TensorRT has no converter for some operators: they run in "
        "PyTorch between TensorRT engines",
        fix="accept the fallback (`torch_executed_ops`, `min_block_size`), replace the operator, or write "
        "a plugin (`torch_tensorrt.dynamo.conversion.plugins.custom_op`)",
        page="exported_program_to_engine",
    ),
    # ---------------------------------------------------------------- building TensorRT engines
    Entry(
        id="tensorrt-rtx-nonzero",
        group="tensorrt",
        title="`nonzero` refused by TensorRT for RTX",
        message="This is only available in non TensorRT-RTX environments",
        raised_as="`NotImplementedError` from the `aten.nonzero` converter, for each block holding one",
        exceptions=("NotImplementedError",),
        stages=("tensorrt-build",),
        means="the block holds `nonzero` (`torch.where(mask)` with one argument, boolean indexing); "
        "Torch-TensorRT marks its converter for enterprise TensorRT only, and the dry run counts it as "
        "convertible",
        fix="`fallback_data_dependent_ops=True` runs such operators in PyTorch (or name them in "
        "`torch_executed_ops`)",
        page="faster_rcnn_dynamic_hw",
    ),
    Entry(
        id="tensorrt-symbolic-split",
        group="tensorrt",
        title="`split` with sizes known only at run time",
        message="Can't chunk on dynamic shape dimension!",
        raised_as="`AssertionError` from the `aten.split_with_sizes` converter",
        exceptions=("AssertionError",),
        stages=("tensorrt-build",),
        means="`tensor.split(sizes)` where the sizes are symbols (one piece per image, per level); the "
        "converter takes only fixed sizes",
        fix="`torch_executed_ops={torch.ops.aten.split_with_sizes.default}` runs the split in PyTorch",
        page="faster_rcnn_dynamic_hw",
    ),
    Entry(
        id="tensorrt-symbolic-fill",
        group="tensorrt",
        title="`full` with a fill value known only at run time",
        message="Could not infer dtype of tensorrt_rtx_bindings.tensorrt_rtx.ITensor",
        pattern=r"Could not infer dtype of \S*ITensor",
        raised_as="`RuntimeError` from the `aten.full` converter",
        exceptions=("RuntimeError",),
        stages=("tensorrt-build",),
        means="the program makes a tensor from a size it computed (`torch.full([], n)`, "
        "`torch.tensor(x.shape[0])`); the converter needs a Python number as the fill value",
        fix="`torch_executed_ops={torch.ops.aten.full.default}` runs it in PyTorch",
        page="faster_rcnn_dynamic_hw",
    ),
    Entry(
        id="tensorrt-1d-topk",
        group="tensorrt",
        title="`topk` over a one-dimensional tensor",
        message="at least 2 dimensions are required for input",
        raised_as="`RuntimeError: Could not get tensor shape.` from Torch-TensorRT, naming a node after "
        "the `topk`; the builder's log names the TopK layer",
        exceptions=("RuntimeError",),
        stages=("tensorrt-build",),
        means="TensorRT's TopK layer takes inputs of two or more dimensions, and `x.flatten().topk(k)` "
        'gives it one. "Could not get tensor shape." has other causes too: the builder\'s log line '
        "tells them apart",
        fix="`torch_executed_ops={torch.ops.aten.topk.default}` runs the `topk` in PyTorch",
        page="deformable_detr_export",
    ),
    Entry(
        id="tensorrt-negative-start-slice",
        group="tensorrt",
        title="A slice from a negative start (`x[:, -1:]`) while two axes are dynamic",
        message="has axis 2 with inherently negative length",
        pattern=r"has axis \d+ with inherently negative length",
        raised_as="`RuntimeError: Could not get tensor shape.` from Torch-TensorRT, naming an operator "
        "after the slice; TensorRT's reason is only in the builder's log",
        exceptions=("RuntimeError",),
        stages=("tensorrt-build",),
        means="a slice starts at a negative index (`y[:, -1:, :]`, DETR's sine position embedding) along "
        "a dynamic axis of a tensor with another dynamic axis; Torch-TensorRT 2.14's converter starts "
        "that other axis at its size + 1, so TensorRT proves its length negative",
        fix="read the row by index (`y[:, -1].unsqueeze(1)`), or run the slices in PyTorch "
        "(`torch_executed_ops={torch.ops.aten.slice.Tensor}`)",
        page="deformable_detr_export",
    ),
    Entry(
        id="tensorrt-constant-query-attention",
        group="tensorrt",
        title="Attention whose query is a constant, with no `scale`",
        message="add_shape(): incompatible function arguments",
        raised_as="`TypeError` from the `aten.scaled_dot_product_attention` converter",
        exceptions=("TypeError",),
        stages=("tensorrt-build",),
        means="the query does not depend on the inputs (learned queries, as in DETR's first decoder "
        "layer), so it is a constant in the engine; without a `scale` the converter reads the head "
        "size from a shape layer, and TensorRT's bindings take a shape layer only of a tensor computed "
        "in the network",
        fix="pass `scale=head_dim ** -0.5` to `scaled_dot_product_attention`; `nn.MultiheadAttention` "
        "passes none, so there run it in PyTorch "
        "(`torch_executed_ops={torch.ops.aten.scaled_dot_product_attention.default}`)",
        page="deformable_detr_export",
    ),
    Entry(
        id="tensorrt-opt-clash",
        group="tensorrt",
        title="Two inputs of one engine disagree at their made-up opt sizes",
        message="kOPT values for profile 0 violate shape constraints",
        raised_as="`RuntimeError: TensorRT build_serialized_network returned None`: the reason is only "
        "in the builder's log",
        exceptions=("RuntimeError",),
        stages=("tensorrt-build",),
        means="a block takes one count known only at run time twice, bare (`n`) and as an expression "
        "(`90 * n`); Torch-TensorRT makes up each input's opt on its own (`min + max / 2`, after "
        "lowering a bare minimum of 2 to 1), so at opt the two describe different counts and a "
        "reshape that relates them would change the number of elements",
        fix="run the reshape in PyTorch (`torch_executed_ops={torch.ops.aten._reshape_copy.default}`), "
        "or compute the expression inside the block so that it takes the count once",
        page="faster_rcnn_dynamic_hw",
    ),
    Entry(
        id="tensorrt-strided-slice-write",
        group="tensorrt",
        title="An in-place write to a strided slice (`x[:, 0::2] *= s`)",
        message="array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum possible size.",
        raised_as="`ValueError` from NumPy, in the `aten.slice_scatter` converter",
        exceptions=("ValueError",),
        stages=("tensorrt-build",),
        means="an in-place write to a slice with a step and no end (detectron2's `Boxes.scale`: "
        "`boxes[:, 0::2] *= scale_x`) is exported as `slice_scatter` with PyTorch's open end, "
        "2**63 - 1; Torch-TensorRT 2.14's converter lists the written indices with "
        "`numpy.arange(start, end, step)` and does not clamp that end to the dimension",
        fix="`torch_executed_ops={torch.ops.aten.slice_scatter.default}` runs the write in PyTorch",
        page="detectron2_mask_rcnn",
    ),
    Entry(
        id="tensorrt-copy-at-block-edge",
        group="tensorrt",
        title="A dtype cast refused at the edge of a TensorRT block",
        message="Conversion of function torch._ops.aten.aten::_to_copy not currently supported!",
        raised_as="`UnsupportedOperatorException` from Torch-TensorRT's interpreter, in a block the "
        "partitioner accepted",
        exceptions=("RuntimeError",),
        stages=("tensorrt-build",),
        means="a cast (`.float()`, `.to(dtype)`) reads an input of its TensorRT block and is one of its "
        "outputs, and its shape is dynamic: the partitioner judged the cast in the whole graph, where "
        "its input is an operator; in the block only the converter for casts of a placeholder applies, "
        "and that one takes no dynamic shapes. Moving an operator to PyTorch can put a cast there",
        fix="move fewer operators to PyTorch (only those the build refused), or add "
        "`torch.ops.aten._to_copy.default` to `torch_executed_ops`",
        page="detection_zoo_tensorrt",
    ),
    Entry(
        id="tensorrt-made-up-profile",
        group="tensorrt",
        title="A size known only at run time gets a made-up engine profile",
        label="faster-rcnn-nms-profile",
        stages=("tensorrt-build",),
        means="an engine reads a count with no upper bound in the program (how many boxes NMS kept): "
        "Torch-TensorRT gives it the profile [1, 4096], so zero (no detections) and more than 4096 "
        "fall outside it, and TensorRT raises at run time",
        fix="bound the count in the model (`torch._check(count <= bound)`) for the top; zero stays "
        "outside on Torch-TensorRT 2.14, so empty results must be served without those engines "
        "(the ops after the operator in `torch_executed_ops`)",
        page="faster_rcnn_dynamic_hw",
    ),
    Entry(
        id="tensorrt-opt-above-max",
        group="tensorrt",
        title="A count bounded on both sides gets an `opt` above its `max`",
        message="please ensure that the optimization profiles satisfy MIN<=OPT<=MAX",
        raised_as="`RuntimeError: TensorRT build_serialized_network returned None`: the reason is only "
        "in the builder's log",
        exceptions=("RuntimeError",),
        stages=("tensorrt-build",),
        means="a size known only at run time (how many boxes NMS kept) is bounded by `torch._check` on "
        "both sides; Torch-TensorRT makes up its opt as `int(min + max / 2)` (Python divides first), "
        "which is above max whenever min > max / 2 (600 and 1000 give 1100), and TensorRT refuses the "
        "profile",
        fix="keep the lower bound of `torch._check(count >= low)` at or below half the upper one, or leave "
        "it out: the engine's profile starts at 1 whatever the program says",
        page="exported_program_to_engine",
    ),
    Entry(
        id="tensorrt-min-two-lowered",
        group="silent",
        title="An engine admits size 1 where the program was exported for 2 and more",
        label="tensorrt-min-two-lowered",
        stages=("tensorrt-build",),
        means="Torch-TensorRT lowers every lower bound of 2 to 1 (for the 0/1 sizes PyTorch specializes), "
        "a deliberate `Dim(min=2)` included: the engine's profile takes one, and on PyTorch 2.14.1 the "
        "program's own input check lets a size of 1 through as well",
        fix="give the build a profile per input, min 2 (`torch_tensorrt.Input(min_shape=...)`, "
        "`Profile` in `build_engines`), and check inputs in front of the engine "
        "(`CheckedProgram` refuses 1)",
        page="exported_program_to_engine",
    ),
    Entry(
        id="tensorrt-topk-over-3840",
        group="tensorrt",
        title="`topk` with `k` above 3840 runs in PyTorch",
        label="tensorrt-topk-over-3840",
        stages=("tensorrt",),
        means="Torch-TensorRT's `topk` converter takes k up to 3840 (TensorRT's TopK layer); above that, "
        "its validator leaves the `topk` to PyTorch and the engine is split around it, with no error",
        fix="`topk(k)` with k of 3840 or less if k is a setting of the model (it changes what the model "
        "computes: measure it); otherwise accept the split",
        page="exported_program_to_engine",
    ),
    Entry(
        id="tensorrt-kv-cache-strided-write",
        group="silent",
        title="A write with a step into a cache that TensorRT's KV-cache layer takes",
        label="tensorrt-kv-cache-strided-write",
        stages=("tensorrt-build",),
        means="`slice_scatter` with a step on dimension 2 of a static 4-D engine input "
        "(`cache[:, :, 0:8:2] = new`) goes to TensorRT's KV-cache update layer, which writes contiguous "
        "slots: Torch-TensorRT 2.14's converter never reads the step, so the engine would write slots "
        "0-3 where eager writes 0, 2, 4, 6 (the build passes, nothing warns)",
        fix="`torch_executed_ops={torch.ops.aten.slice_scatter.default}` runs the write in PyTorch; or "
        "write contiguous slots",
        page="exported_program_to_engine",
    ),
)

BY_ID: dict[str, Entry] = {entry.id: entry for entry in ENTRIES}
if len(BY_ID) != len(ENTRIES):
    raise ValueError("two catalog entries share an id")

# Where an error the catalog does not know is sent, with the generic next steps.
PLAYBOOK_PAGE = "debugging_playbook"


def failure_pages_without_entries(root: Path = REPO_ROOT, entries: tuple[Entry, ...] = ENTRIES) -> list[str]:
    """The failure notebooks (the part `toc.FAILURES` of `_toc.yml`) that no entry names: the doctor
    could never send a reader there, and the playbook would not list what they fix."""
    found = toc.part(toc.FAILURES, root)
    named = {entry.page for entry in entries}
    return [docname for docname in found if toc.page_name(docname) not in named]


def classify(error: BaseException, stage: str) -> Entry | None:
    """The first entry that matches `error` raised at `stage`, or None: never a guess."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; one of {', '.join(STAGES)}")
    return next((entry for entry in ENTRIES if entry.matches(error, stage)), None)


def related(error: BaseException, stage: str, limit: int = 3) -> list[Entry]:
    """Entries about the same exception type at `stage` whose message does not match `error`: pages a
    reader may compare with, never the cause (one page each, in catalog order, at most `limit`)."""
    names = {_qualified(kind) for kind in type(error).__mro__} - {"Exception", "BaseException", "object"}
    found: dict[str, Entry] = {}
    for item in ENTRIES:
        if stage in item.stages and names & set(item.exceptions) and item.page not in found:
            found[item.page] = item
    return list(found.values())[:limit]


def entry(entry_id: str) -> Entry:
    """The entry with id `entry_id`; a KeyError names the ids there are."""
    if entry_id not in BY_ID:
        raise KeyError(f"no catalog entry {entry_id!r}; the ids are: {', '.join(BY_ID)}")
    return BY_ID[entry_id]


# --------------------------------------------------------------------------------------------------
# The playbook's entries, as MyST markdown
# --------------------------------------------------------------------------------------------------


def _doc_link(page: str, label: str | None) -> str:
    return f"{{ref}}`{label}`" if label else f"{{doc}}`/{toc.docname(page)}`"


def playbook_entry(item: Entry) -> str:
    """One entry as a definition-list item: the quoted message (or the title), then labelled lines."""
    # A message that holds backticks itself is quoted with a double-backtick code span.
    fence = "``" if item.message and "`" in item.message else "`"
    pad = " " if fence == "``" else ""
    term = f"{fence}{pad}{item.message}{pad}{fence}" if item.message else item.title
    lines = [term]
    if item.raised_as:
        lines.append(f": **Raised as** {item.raised_as}\\")
        lines.append(f"  **Means** {item.means}\\")
    else:
        lines.append(f": **Means** {item.means}\\")
    lines.append(f"  **Fix** {item.fix}\\")
    lines.append(f"  **Reproduced in** {_doc_link(item.page, item.label)}\\")
    lines.append(f"  **Doctor id** `{item.id}`")
    return "\n".join(lines)


def playbook_group(group: str):
    """The entries of one playbook group as MyST markdown, displayed in a notebook cell."""
    from IPython.display import Markdown

    if group not in GROUPS:
        raise ValueError(f"unknown playbook group {group!r}; one of {', '.join(GROUPS)}")
    items = [item for item in ENTRIES if item.group == group]
    return Markdown("\n\n".join(playbook_entry(item) for item in items))
