#!/usr/bin/env bash
# Creates the Python virtual environment the OpenAI SDK tests run in (tests/e2e/openai_sdk.py,
# ctest e2e_openai_sdk): the official `openai` package, pydantic and pytest at pinned versions,
# and everything they pull in pinned too, so every machine tests against the same client; and
# the LLM router the scale-out test puts in front of replicas (sglang-router; e2e_scale_out).
# Location: $PITH_VENV, else ${PITH_DEPS_DIR:-$HOME/.cache/pith}/venv (tests/CMakeLists.txt looks
# in the same place). Idempotent: a venv that already holds these pins is left as it is, without
# starting pip. Needs python3 (>= 3.9) with the venv module: Debian's python3-venv, which
# `make deps` installs; PYTHON picks another interpreter.
set -euo pipefail

# Direct requirements first, then what they depend on (resolved on Python 3.11); a dependency
# another Python version needs beyond these is still installed by pip's resolver.
PINS=(
  openai==3.57.0 pydantic==2.14.4 pytest==9.2.0 sglang-router==0.3.2
  aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-doc==0.0.7
  annotated-types==0.8.0 anyio==4.16.0 attrs==26.1.0 click==8.5.1 fastapi==0.165.0
  frozenlist==1.8.0 h11==0.16.0 httpcore2==2.16.2 httpx2==2.16.2 idna==3.20 iniconfig==2.3.1
  jiter==0.19.0 multidict==7.2.1 opentelemetry-api==1.45.2 orjson==3.13.0 packaging==26.3
  pluggy==1.7.0 propcache==0.5.4 pydantic_core==2.50.5 Pygments==2.21.0 setproctitle==1.3.8
  sniffio==1.3.1 starlette==1.10.0 truststore==0.10.5 typing-inspection==0.4.5
  typing_extensions==4.16.0 uvicorn==0.54.0 yarl==1.25.1
)

VENV=${PITH_VENV:-${PITH_DEPS_DIR:-$HOME/.cache/pith}/venv}
STAMP="$VENV/.pith-pins"
WANT="${PINS[*]}"

# Fast path: the pins recorded at the last successful install, and an interpreter that still runs
# (a venv outlives neither its base Python's removal nor a move).
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && "$VENV/bin/python" -c "" 2>/dev/null; then
  exit 0
fi

PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null || { echo "setup-python: $PYTHON not found" >&2; exit 1; }

if ! "$VENV/bin/python" -c "" 2>/dev/null; then
  if [ -e "$VENV" ]; then
    # Only ever delete what is recognisably a (broken) virtual environment.
    if [ ! -f "$VENV/pyvenv.cfg" ]; then
      echo "setup-python: $VENV exists and is not a virtual environment;" \
        "move it or set PITH_VENV" >&2
      exit 1
    fi
    rm -rf "$VENV"
  fi
  echo "setup-python: creating $VENV" >&2
  mkdir -p "$(dirname "$VENV")"
  if ! "$PYTHON" -m venv "$VENV"; then
    rm -rf "$VENV"
    echo "setup-python: '$PYTHON -m venv' failed; on Debian install python3-venv" \
      "(scripts/setup-deps.sh does)" >&2
    exit 1
  fi
fi

echo "setup-python: installing ${PINS[*]:0:4} (and pinned dependencies) into $VENV" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "${PINS[@]}"
"$VENV/bin/python" - "${PINS[@]:0:4}" <<'PY'
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    if version(name) != want:
        sys.exit(f"setup-python: {name} is {version(name)} after installing, not {want}")
import openai, pydantic, pytest, sglang_router  # noqa: E401,F401  (the tests' imports work)
PY
echo "$WANT" > "$STAMP"
