"""What the OpenAI SDK tests (openai_sdk.py: models, completions, chat, tools;
openai_sdk_responses.py: the Responses API) share: one `pith serve` started with an API key for the whole pytest session,
the SDK client on it, and the outside sources of their expectations (the model's name and
context length from `pith model info --json`, token counts from `pith tokenize`).

Loaded as a pytest plugin (`-p openai_sdk_common`, tests/e2e on PYTHONPATH), so both modules
share one server; run by ctest (e2e_openai_sdk) with the venv of scripts/setup-python.sh, which
pins the SDK:
    PYTHONPATH=tests/e2e PITH_BIN=build/bin/pith PITH_MODEL=tests/data/models/tiny-f32.gguf \\
    PITH_INFERLET_DIR=build/inferlets ~/.cache/pith/venv/bin/python -m pytest \\
    -p openai_sdk_common tests/e2e/openai_sdk.py tests/e2e/openai_sdk_responses.py
The model has random weights, so texts are noise; the tests check what the API guarantees about
them (seeds, stop strings, logprob order, token counts), never particular words.
"""
import json
import os
import subprocess
import sys
import time
from typing import Literal

import openai
import pydantic
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402,F401  (re-exported to the test modules)

API_KEY = "sdk-test-key"
CHAT = [{"role": "user", "content": "Tell me something."}]


def pith_bin():
    pith = os.environ.get("PITH_BIN")
    if not pith or not os.environ.get("PITH_MODEL"):
        pytest.fail("set PITH_BIN and PITH_MODEL (ctest does: ctest -R e2e_openai_sdk)",
                    pytrace=False)
    return pith


def pith_cli(*args):
    return subprocess.run([pith_bin(), *args], check=True, capture_output=True, text=True).stdout


def tokenize(text, bos=True):
    """Token ids from `pith tokenize`, the tokenizer the server uses, run outside the server."""
    extra = [] if bos else ["--no-bos"]
    return json.loads(pith_cli("tokenize", "--json", *extra, "-m", os.environ["PITH_MODEL"], text))


def detokenize(token_id):
    return pith_cli("detokenize", "-m", os.environ["PITH_MODEL"], str(token_id)).rstrip("\n")


@pytest.fixture(scope="session")
def info():
    """The served model as `pith model info --json` describes it (name, context_length, ...)."""
    return json.loads(pith_cli("model", "info", "--json", os.environ["PITH_MODEL"]))


@pytest.fixture(scope="session")
def server():
    """The one server of the session (both test modules)."""
    s = Server(pith_bin(), os.environ["PITH_MODEL"], api_key=API_KEY)
    s.start()
    yield s
    code = s.stop()
    assert code == 0, f"pith serve exited with {code}"


def make_client(server, api_key=API_KEY, cls=openai.OpenAI):
    # No retries: a failing request must fail the test at once, not after backoff.
    return cls(base_url=f"http://127.0.0.1:{server.port}/v1", api_key=api_key, max_retries=0,
               timeout=120)


@pytest.fixture(scope="session")
def client(server):
    c = make_client(server)
    yield c
    c.close()


@pytest.fixture(scope="session")
def model(info):
    # The server names the model as its file does, or after the file when it has no name.
    return info["name"] or os.path.splitext(os.path.basename(os.environ["PITH_MODEL"]))[0]


def chat(client, model, **kw):
    kw.setdefault("messages", CHAT)
    return client.chat.completions.create(model=model, **kw)


def finished_instance(server, flag, value, timeout=10):
    """The one instance whose args hold `flag value` (a request's own inferlet, found by what the
    request set), once it has finished or `timeout` seconds have passed, whichever is first."""
    def instance():
        _, listing = server.request("GET", "/v1/instances")
        mine = [i for i in listing["instances"] if flag in i["args"]
                and i["args"][i["args"].index(flag) + 1] == str(value)]
        assert len(mine) == 1, listing
        return mine[0]

    deadline = time.time() + timeout
    while instance()["state"] != "finished" and time.time() < deadline:
        time.sleep(0.1)
    return instance()


def assert_usage(usage, completion_tokens=None):
    assert usage.prompt_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    if completion_tokens is not None:
        assert usage.completion_tokens == completion_tokens


# Shared by the chat and the Responses tests.
class Verdict(pydantic.BaseModel):
    # Only bounded fields, so a random model's constrained output ends within a few tokens.
    answer: Literal["yes", "no", "maybe"]
    confident: bool

class GetWeather(pydantic.BaseModel):
    city: Literal["Paris", "Tokyo", "Lima"]
    unit: Literal["celsius", "fahrenheit"]

# DeepSeek R1's template shape: the generation prompt opens the thought.
R1_TEMPLATE = ("{% for m in messages %}{% if m['role'] == 'assistant' %}"
               "{{ m['content'].split('</think>')[-1] }}{% else %}{{ m['content'] }}{% endif %}"
               "{% endfor %}{% if add_generation_prompt %}<|Assistant|><think>\n{% endif %}")
