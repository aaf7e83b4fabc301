#!/usr/bin/env bash
# Fetches FlashInfer's header-only attention templates from the pinned PyPI wheel
# flashinfer-python==0.7.2.post1 and unpacks only the headers the CUDA backend compiles against:
#   include/   FlashInfer's kernels (attention/prefill.cuh, attention/decode.cuh, page.cuh, ...)
#   cccl/      the CCCL release those headers need (newer than CUDA 13.0's: cuda::fast_mod_div)
#   cutlass/   CUTLASS headers (some FlashInfer headers include cute/cutlass types)
# into ${PITH_DEPS_DIR:-$HOME/.cache/pith}/flashinfer-0.7.2.post1, where CMake's FindFlashInfer
# looks. Idempotent: does nothing when the headers are already there. The wheel itself (62 MB)
# is deleted after unpacking.
set -euo pipefail

VERSION=0.7.2.post1
DEPS_DIR=${PITH_DEPS_DIR:-$HOME/.cache/pith}
DEST="$DEPS_DIR/flashinfer-$VERSION"
STAMP="$DEST/.complete"

if [ -f "$STAMP" ]; then
  echo "$DEST"
  exit 0
fi

PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null || { echo "setup-flashinfer: python3 is needed" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "setup-flashinfer: downloading flashinfer-python==$VERSION (headers only are kept)" >&2
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" \
  "flashinfer-python==$VERSION" >&2
wheel=$(ls "$tmp"/flashinfer_python-"$VERSION"-*.whl)

rm -rf "$DEST.partial"
mkdir -p "$DEST.partial"
"$PYTHON" - "$wheel" "$DEST.partial" <<'PY'
import sys, zipfile, pathlib
wheel, dest = sys.argv[1], pathlib.Path(sys.argv[2])
keep = ("flashinfer/data/include/", "flashinfer/data/cccl/", "flashinfer/data/cutlass/include/")
n = 0
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        if info.is_dir() or not name.startswith(keep):
            continue
        out = dest / name[len("flashinfer/data/"):]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(z.read(info))
        n += 1
if n == 0:
    sys.exit("setup-flashinfer: the wheel holds none of the expected header folders")
print(f"setup-flashinfer: unpacked {n} header files", file=sys.stderr)
PY
test -f "$DEST.partial/include/flashinfer/attention/prefill.cuh" || {
  echo "setup-flashinfer: include/flashinfer/attention/prefill.cuh missing in the wheel" >&2
  exit 1
}
echo "$VERSION" > "$DEST.partial/.complete"
rm -rf "$DEST"
mv "$DEST.partial" "$DEST"
echo "$DEST"
