"""Fixtures: a real `pith serve` on a free loopback port (tests/e2e/pith_harness.py starts it).

Environment (ctest sets these; see tests/CMakeLists.txt):
  PITH_BIN           the pith binary
  PITH_MODEL         a model for it (the tiny test model)
  PITH_INFERLET_DIR  the built inferlets (echo.wasm, traps.wasm, text_completion.wasm)
A test whose server or inferlet is missing fails and says what to set or build (the project's
policy, tests/e2e/pith_harness.py): it never skips. test_sse.py needs neither.
"""
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))                           # pith_client from this checkout
sys.path.insert(0, str(HERE.parents[2] / "tests" / "e2e"))     # pith_harness

from pith_client import Client  # noqa: E402

API_KEY = "test-key-1"


def _server(**kw):
    pith, model = os.environ.get("PITH_BIN"), os.environ.get("PITH_MODEL")
    if not pith or not model:
        pytest.fail("set PITH_BIN and PITH_MODEL (ctest does: ctest -R e2e_python_client) to test "
                    "against a real pith serve", pytrace=False)
    from pith_harness import Server
    return Server(pith, model, **kw)


@pytest.fixture(scope="session")
def server():
    s = _server()
    s.start()
    yield s
    code = s.stop()
    assert code == 0, f"pith serve exited with {code}"


@pytest.fixture(scope="session")
def keyed_server():
    s = _server(api_key=API_KEY)
    s.start()
    yield s
    s.stop()


@pytest.fixture
def client(server):
    return Client(f"http://127.0.0.1:{server.port}")


@pytest.fixture(scope="session")
def inferlet():
    from pith_harness import missing_inferlet_message
    root = os.environ.get("PITH_INFERLET_DIR")
    if not root:
        pytest.fail("set PITH_INFERLET_DIR to the built inferlets (ctest does: BUILD/inferlets)",
                    pytrace=False)

    def path(name):
        p = str(Path(root) / f"{name}.wasm")
        if not os.path.isfile(p):
            pytest.fail(missing_inferlet_message(p), pytrace=False)
        return p
    return path
