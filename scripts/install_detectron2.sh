#!/usr/bin/env bash
# Install detectron2 (and what its Mask R-CNN / ViTDet code imports) into the venv of PYTHON, pinned.
#
#   usage: scripts/install_detectron2.sh PYTHON
#          DETECTRON2=upstream scripts/install_detectron2.sh PYTHON
#
# PYTHON is the venv's interpreter, e.g. .venv/bin/python. The script is idempotent: run it again and
# it changes nothing.
#
# Which detectron2 — the ONE variable a reader changes:
#
#   DETECTRON2=sal (default)  the PyPI package `sal-detectron2==0.7.2`, a repackaging of detectron2's
#                             source (its __version__ says 0.7.2; the code is detectron2 main from 2024,
#                             ViTDet included). It is the only detectron2 on PyPI, which is all this
#                             book's build machines can reach. Its one wheel is tagged for CPython 3.10
#                             and ships a compiled `detectron2/_C` built for CPython 3.10, CUDA 12 and an
#                             older torch; we install its Python code only (see `repack_sal_wheel`).
#   DETECTRON2=upstream       facebookresearch/detectron2 from GitHub at DETECTRON2_COMMIT, built from
#                             source against the installed torch (`_C` included; needs a C++ compiler,
#                             and nvcc for the CUDA kernels). NOT TESTED by the book's build: its
#                             machines cannot reach GitHub. The notebooks only use detectron2's Python
#                             code and torchvision's ops, so they should run the same on it.
#
# Dependencies are installed with `--no-deps` from the exact list below, so pip's resolver never
# runs and can never upgrade torch, torchvision or numpy. What detectron2 needs from the book's base
# stack (numpy, Pillow, matplotlib, PyYAML, tqdm, tabulate, typing_extensions) comes with
# requirements.txt; the smoke test at the end fails loudly if any of it is missing.
set -euo pipefail

PYTHON=${1:?usage: scripts/install_detectron2.sh PYTHON   (e.g. .venv/bin/python)}
DETECTRON2=${DETECTRON2:-sal}
case "$DETECTRON2" in
  sal | upstream) ;;
  *)
    echo "DETECTRON2=$DETECTRON2: choose 'sal' (PyPI, default) or 'upstream' (GitHub)" >&2
    exit 2
    ;;
esac
# Upstream commit used when DETECTRON2=upstream (detectron2 main, 2024; the ViTDet configs are there).
DETECTRON2_COMMIT=${DETECTRON2_COMMIT:-9604f5995cc628619f0e4fd913453b4d7d61db3f}

SAL_VERSION=0.7.2
# sha256 of sal_detectron2-0.7.2-cp310-none-any.whl as served by PyPI.
SAL_SHA256=491af0c7f79bdb2d178e46f6cb16a97c4ac968d45c41ea3f6b6435d59bbee561

# Runtime dependencies, exact pins, installed with --no-deps (the transitive ones are listed too).
DEPS=(
  fvcore==0.1.5.post20221221        # detectron2: weight_init, timers, param schedulers
  iopath==0.1.10                    # detectron2.utils.file_io (PathManager)
  portalocker==4.4.2                # iopath's file locks
  yacs==0.1.8                       # fvcore's CfgNode (detectron2.config.get_cfg)
  omegaconf==2.3.0                  # LazyConfig (ViTDet's Python configs)
  antlr4-python3-runtime==4.9.3     # omegaconf's interpolation grammar (needs 4.9.*)
  cloudpickle==3.1.2                # detectron2.config.lazy / utils.serialize
  termcolor==3.3.0                  # detectron2.utils.logger
  pycocotools==2.0.11               # detectron2.structures.masks (polygon -> mask)
  timm==1.0.31                      # ViTDet blocks import DropPath and Mlp from timm
  # model_zoo.get_config_file() imports pkg_resources, which setuptools removed in 81.
  setuptools==80.9.0
)

pip_install() {
  "$PYTHON" -m pip install --disable-pip-version-check -q "$@"
}

installed_version() {  # prints the installed version of distribution $1, or nothing
  "$PYTHON" - "$1" <<'EOF'
import importlib.metadata, sys
try:
    print(importlib.metadata.version(sys.argv[1]))
except importlib.metadata.PackageNotFoundError:
    pass
EOF
}

has_compiled_extension() {  # true if an installed detectron2 package still contains _C*.so
  "$PYTHON" - <<'EOF'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("detectron2")
locations = spec.submodule_search_locations if spec else []
sys.exit(0 if any(any(pathlib.Path(p).glob("_C*.so")) for p in locations) else 1)
EOF
}

# Rewrite the sal-detectron2 wheel as a pure-Python wheel and print its path.
#
# Why remove `detectron2/_C.cpython-310-x86_64-linux-gnu.so`: it is compiled for CPython 3.10 against
# CUDA 12 and the torch it was built with. On the book's Python 3.11 it can never be imported (the
# file name's ABI tag does not match, so `import detectron2._C` raises ImportError), and on 3.10 with
# torch 2.14 it would fail with undefined C++ symbols. detectron2 only imports `_C` lazily, for ops
# the notebooks do not use (deformable conv, rotated boxes, the fast COCO evaluator); Mask R-CNN and ViTDet
# use torchvision's `nms` and `roi_align`. Dropping the 20 MB binary makes that explicit.
#
# Why repack rather than `pip install --target`: the result is an ordinary pip-managed install, with
# its `sal_detectron2-0.7.2.dist-info` (so `importlib.metadata.version("sal-detectron2")` works and
# `pip uninstall sal-detectron2` removes every file). Only the tag (py3-none-any, since nothing
# compiled is left) and RECORD (the file list and hashes) change; METADATA is kept as published.
repack_sal_wheel() {
  local workdir=$1
  "$PYTHON" -m pip download --disable-pip-version-check -q --no-deps --only-binary=:all: \
    --python-version 3.10 --dest "$workdir/download" "sal-detectron2==$SAL_VERSION"
  "$PYTHON" - "$workdir" "$SAL_VERSION" "$SAL_SHA256" <<'EOF'
import base64, hashlib, pathlib, sys, zipfile

workdir, version, expected_sha = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
(source,) = (workdir / "download").glob(f"sal_detectron2-{version}-*.whl")
actual_sha = hashlib.sha256(source.read_bytes()).hexdigest()
if actual_sha != expected_sha:
    sys.exit(f"{source.name}: sha256 {actual_sha} != pinned {expected_sha}")

dist_info = f"sal_detectron2-{version}.dist-info"
target = workdir / f"sal_detectron2-{version}-py3-none-any.whl"
record = []


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
    for info in sorted(src.infolist(), key=lambda i: i.filename):
        name = info.filename
        if name.endswith("/") or name == f"{dist_info}/RECORD":
            continue
        if name.startswith("detectron2/_C") and name.endswith(".so"):
            continue  # see repack_sal_wheel's comment in install_detectron2.sh
        data = src.read(name)
        if name == f"{dist_info}/WHEEL":
            lines = data.decode().splitlines()
            lines = ["Root-Is-Purelib: true" if l.startswith("Root-Is-Purelib:") else l for l in lines]
            lines = [l for l in lines if not l.startswith("Tag:")] + ["Tag: py3-none-any"]
            data = ("\n".join(lines) + "\n").encode()
        entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible archive
        entry.external_attr = info.external_attr
        entry.compress_type = zipfile.ZIP_DEFLATED
        dst.writestr(entry, data)
        record.append(f"{name},{digest(data)},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    entry = zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
    entry.compress_type = zipfile.ZIP_DEFLATED
    dst.writestr(entry, "\n".join(record) + "\n")
print(target)
EOF
}

echo "install_detectron2: DETECTRON2=$DETECTRON2 into $("$PYTHON" -c 'import sys; print(sys.prefix)')"
pip_install --no-deps "${DEPS[@]}"

case "$DETECTRON2" in
  sal)
    if [ -n "$(installed_version detectron2)" ]; then  # switching back from upstream
      "$PYTHON" -m pip uninstall --disable-pip-version-check -q -y detectron2
      rm -f "$("$PYTHON" -c 'import sys; print(sys.prefix)')/.detectron2-upstream-commit"
    fi
    if [ "$(installed_version sal-detectron2)" = "$SAL_VERSION" ] && ! has_compiled_extension; then
      echo "install_detectron2: sal-detectron2 $SAL_VERSION already installed"
    else
      workdir=$(mktemp -d)
      trap 'rm -rf "$workdir"' EXIT
      wheel=$(repack_sal_wheel "$workdir" | tail -n 1)
      pip_install --no-deps --force-reinstall "$wheel"
    fi
    ;;
  upstream)
    # Untested by the book's build: its machines cannot reach GitHub. The wheel is built first, so a
    # failed build (no network, no compiler) leaves the current install untouched; only then is
    # sal-detectron2 removed (both distributions install the same `detectron2` package).
    # --no-build-isolation: setup.py imports torch to compile `_C` against the torch installed here.
    # --no-deps: the dependencies are the pinned list above, not upstream's unpinned ones.
    marker="$("$PYTHON" -c 'import sys; print(sys.prefix)')/.detectron2-upstream-commit"
    if [ -n "$(installed_version detectron2)" ] && [ "$(cat "$marker" 2>/dev/null)" = "$DETECTRON2_COMMIT" ]; then
      echo "install_detectron2: upstream detectron2 at $DETECTRON2_COMMIT already installed"
    else
      workdir=$(mktemp -d)
      trap 'rm -rf "$workdir"' EXIT
      "$PYTHON" -m pip wheel --disable-pip-version-check -q --no-deps --no-build-isolation \
        --wheel-dir "$workdir" "git+https://github.com/facebookresearch/detectron2.git@$DETECTRON2_COMMIT"
      if [ -n "$(installed_version sal-detectron2)" ]; then
        "$PYTHON" -m pip uninstall --disable-pip-version-check -q -y sal-detectron2
      fi
      pip_install --no-deps --force-reinstall "$workdir"/detectron2-*.whl
      echo "$DETECTRON2_COMMIT" >"$marker"
    fi
    ;;
esac

# Smoke test: everything the notebooks import, and the version casebook/env.py reports.
"$PYTHON" - <<'EOF'
import importlib.metadata
import warnings

warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
import torch
import timm
import detectron2
from detectron2 import model_zoo
from detectron2.config import LazyConfig, get_cfg
from detectron2.export import TracingAdapter
from detectron2.modeling import ViT, SimpleFeaturePyramid, build_model

assert model_zoo.get_config_file("COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml")
for name in ("detectron2", "sal-detectron2"):
    try:
        version = f"{importlib.metadata.version(name)} (distribution {name})"
        break
    except importlib.metadata.PackageNotFoundError:
        continue
else:
    raise SystemExit("detectron2 imports but neither distribution's metadata is installed")
print(f"install_detectron2: detectron2 {version} OK with torch {torch.__version__}, timm {timm.__version__}")
EOF
