"""End-to-end: fill-in-the-middle completions (`suffix` on /v1/completions) through the official
SDK, as code editors send them: the prompt is the code before the cursor, `suffix` the code after
it, and a code model writes what goes between. A tiny random model with StarCoder's vocabulary
(<fim_prefix>, <fim_suffix>, <fim_middle>, found by their text) is generated and served here; the
session's model (no FIM markers) refuses a suffix by name.

The request becomes <fim_prefix> prompt <fim_suffix> suffix <fim_middle>: checked against the
server's own /tokenize (vLLM's `return_token_ids` shows the prompt the model read), and the greedy
middle equals a plain completion of exactly those token ids, streamed or not.
"""
import json
import os
import subprocess
import tempfile

import openai
import pytest

from openai_sdk_common import Server, make_client, pith_bin

STARCODER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tokenizer",
                         "ggml-vocab-starcoder.gguf")
PREFIX = "def add(a, b):\n    "
SUFFIX = "\n\nprint(add(1, 2))\n"


@pytest.fixture(scope="module")
def coder():
    """(server, client, model name) for a random model with StarCoder's vocabulary."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "coder.gguf")
        subprocess.run([pith_bin(), "model", "gen", "--preset", "tiny", "--dtype", "f32",
                        "--seed", "3", "--vocab", STARCODER, "-q", "-o", path],
                       check=True, capture_output=True)
        with Server(pith_bin(), path) as s:
            c = make_client(s, api_key="unused")
            _, models = s.request("GET", "/v1/models")
            yield s, c, models["data"][0]["id"]
            c.close()


def ids_of(server, name, text):
    _, out = server.request("POST", "/tokenize",
                            {"model": name, "prompt": text, "add_special_tokens": False})
    return out["tokens"]


def special(text):
    """A control token's id, from `pith tokenize` outside the server."""
    out = subprocess.run([pith_bin(), "tokenize", "--parse-special", "--no-bos", "--json", "-m",
                          STARCODER, text], check=True, capture_output=True, text=True).stdout
    ids = json.loads(out)
    assert len(ids) == 1, (text, ids)
    return ids[0]


def test_suffix_builds_the_fim_prompt_and_the_model_writes_the_middle(coder):
    server, client, name = coder
    fim = client.completions.create(model=name, prompt=PREFIX, suffix=SUFFIX, max_tokens=12,
                                    temperature=0, extra_body={"return_token_ids": True})
    pre, suf, mid = (special(t) for t in ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"))
    want = [pre, *ids_of(server, name, PREFIX), suf, *ids_of(server, name, SUFFIX), mid]
    choice = fim.choices[0]
    assert choice.prompt_token_ids == want
    assert fim.usage.prompt_tokens == len(want)
    # The middle is what the model writes after exactly that prompt (greedy: the same tokens).
    plain = client.completions.create(model=name, prompt=want, max_tokens=12, temperature=0,
                                      extra_body={"return_token_ids": True})
    assert choice.token_ids == plain.choices[0].token_ids
    assert choice.text == plain.choices[0].text
    assert choice.finish_reason == plain.choices[0].finish_reason
    # Without the suffix the prompt is the plain text's tokens (no FIM markers).
    bare = client.completions.create(model=name, prompt=PREFIX, max_tokens=1, temperature=0,
                                     extra_body={"return_token_ids": True})
    assert bare.choices[0].prompt_token_ids == ids_of(server, name, PREFIX)


def test_streamed_middle_and_token_id_prompts(coder):
    server, client, name = coder
    whole = client.completions.create(model=name, prompt=PREFIX, suffix=SUFFIX, max_tokens=10,
                                      temperature=0)
    streamed = "".join(chunk.choices[0].text for chunk in client.completions.create(
        model=name, prompt=PREFIX, suffix=SUFFIX, max_tokens=10, temperature=0, stream=True)
        if chunk.choices)
    assert streamed == whole.choices[0].text
    # A prompt sent as token ids is the prefix as tokenized by the client.
    by_ids = client.completions.create(model=name, prompt=ids_of(server, name, PREFIX),
                                       suffix=SUFFIX, max_tokens=10, temperature=0)
    assert by_ids.choices[0].text == whole.choices[0].text


def test_batched_prompts_and_choices_share_the_suffix(coder):
    _, client, name = coder
    prompts = [PREFIX, "class Point:\n    def __init__(self"]
    batch = client.completions.create(model=name, prompt=prompts, suffix=SUFFIX, n=2,
                                      max_tokens=6, temperature=0.9, seed=11)
    assert len(batch.choices) == 4
    for p, prompt in enumerate(prompts):  # choice p*n+j samples with seed + p*n + j
        one = client.completions.create(model=name, prompt=prompt, suffix=SUFFIX, n=2,
                                        max_tokens=6, temperature=0.9, seed=11 + 2 * p)
        assert [c.text for c in batch.choices[2 * p:2 * p + 2]] == [c.text for c in one.choices]


def test_bad_suffixes_are_refused_by_name(coder, client, model):
    _, coder_client, name = coder
    with pytest.raises(openai.BadRequestError) as e:
        coder_client.completions.create(model=name, prompt=PREFIX, suffix=SUFFIX, echo=True,
                                        max_tokens=4)
    assert e.value.body["param"] == "echo"
    # The session's model has no fill-in-the-middle markers.
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model, prompt="x", suffix="y", max_tokens=4)
    assert e.value.body["param"] == "suffix"
    assert "fill-in-the-middle" in e.value.body["message"]
    plain = client.completions.create(model=model, prompt="x", suffix="", max_tokens=2)
    assert plain.usage.completion_tokens >= 1
