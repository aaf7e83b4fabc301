"""End-to-end: the official `openai` Python SDK against a real `pith serve` (one server, started
with an API key, for the whole module), the way real clients use the OpenAI-compatible endpoints.

Run by ctest (e2e_openai_sdk) with the venv of scripts/setup-python.sh, which pins the SDK:
    PITH_BIN=build/bin/pith PITH_MODEL=tests/data/models/tiny-f32.gguf \\
    PITH_INFERLET_DIR=build/inferlets ~/.cache/pith/venv/bin/python -m pytest \\
    tests/e2e/openai_sdk.py
The expectations come from outside the server where they can: the model's name and context length
from `pith model info --json`, prompt token counts from `pith tokenize`. The model has random
weights, so texts are noise; the tests check what the API guarantees about them (seeds, stop
strings, logprob order, token counts), never particular words.

The last section tests features that are being added to the server; it is skipped until they land.
"""
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from typing import Literal, Optional

import openai
import pydantic
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402

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


@pytest.fixture(scope="module")
def info():
    """The served model as `pith model info --json` describes it (name, context_length, ...)."""
    return json.loads(pith_cli("model", "info", "--json", os.environ["PITH_MODEL"]))


@pytest.fixture(scope="module")
def server():
    s = Server(pith_bin(), os.environ["PITH_MODEL"], api_key=API_KEY)
    s.start()
    yield s
    code = s.stop()
    assert code == 0, f"pith serve exited with {code}"


def make_client(server, api_key=API_KEY, cls=openai.OpenAI):
    # No retries: a failing request must fail the test at once, not after backoff.
    return cls(base_url=f"http://127.0.0.1:{server.port}/v1", api_key=api_key, max_retries=0,
               timeout=120)


@pytest.fixture(scope="module")
def client(server):
    c = make_client(server)
    yield c
    c.close()


@pytest.fixture(scope="module")
def model(info):
    # The server names the model as its file does, or after the file when it has no name.
    return info["name"] or os.path.splitext(os.path.basename(os.environ["PITH_MODEL"]))[0]


def chat(client, model, **kw):
    kw.setdefault("messages", CHAT)
    return client.chat.completions.create(model=model, **kw)


def assert_usage(usage, completion_tokens=None):
    assert usage.prompt_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    if completion_tokens is not None:
        assert usage.completion_tokens == completion_tokens


def ascii_stop_string(text):
    """A short printable-ASCII piece from the second half of `text`, to use as a stop string."""
    for i in range(len(text) // 2, len(text) - 1):
        piece = text[i:i + 2]
        if all(c.isascii() and c.isalnum() for c in piece):
            return piece
    return None


# ------------------------------------------------------------------------------------- models

def test_models_list(client, model):
    models = client.models.list()
    assert [m.id for m in models.data] == [model]
    assert models.data[0].object == "model"
    assert isinstance(models.data[0].owned_by, str)


def test_models_retrieve(client, model):
    m = client.models.retrieve(model)
    assert m.id == model and m.object == "model"


# -------------------------------------------------------------------------------- completions

def test_completion_text_prompt(client, model):
    prompt = "The quick brown fox"
    r = client.completions.create(model=model, prompt=prompt, max_tokens=6, seed=11, logprobs=1)
    assert r.object == "text_completion" and r.model == model
    (c,) = r.choices
    assert c.index == 0 and isinstance(c.text, str)
    assert c.finish_reason in ("length", "stop")
    generated = len(c.logprobs.tokens)
    assert generated == 6 if c.finish_reason == "length" else generated < 6
    assert_usage(r.usage, completion_tokens=generated)
    assert r.usage.prompt_tokens == len(tokenize(prompt))


def test_completion_token_prompt(client, model):
    prompt = "The quick brown fox"
    ids = tokenize(prompt)
    by_ids = client.completions.create(model=model, prompt=ids, max_tokens=5, seed=12,
                                       temperature=0.9)
    assert by_ids.usage.prompt_tokens == len(ids)
    assert_usage(by_ids.usage)
    assert by_ids.choices[0].finish_reason in ("length", "stop")
    if by_ids.choices[0].finish_reason == "length":
        assert by_ids.usage.completion_tokens == 5
    # The text prompt is these very tokens: same seed, same continuation.
    by_text = client.completions.create(model=model, prompt=prompt, max_tokens=5, seed=12,
                                        temperature=0.9)
    assert by_text.choices[0].text == by_ids.choices[0].text


def test_completion_max_tokens_one(client, model):
    r = client.completions.create(model=model, prompt="Hello", max_tokens=1, seed=3)
    assert r.usage.completion_tokens <= 1
    if r.choices[0].finish_reason == "length":
        assert r.usage.completion_tokens == 1


# ------------------------------------------------------------------------------------- chat

def test_chat_completion(client, model):
    r = chat(client, model, max_tokens=8, seed=21, temperature=0.8, logprobs=True)
    assert r.object == "chat.completion" and r.model == model and r.id
    (c,) = r.choices
    assert c.index == 0 and c.message.role == "assistant"
    assert isinstance(c.message.content, str)
    assert c.finish_reason in ("length", "stop")
    generated = len(c.logprobs.content)
    assert generated == 8 if c.finish_reason == "length" else generated < 8
    assert_usage(r.usage, completion_tokens=generated)
    # The chat template wraps the message: more prompt tokens than the message alone.
    assert r.usage.prompt_tokens > len(tokenize(CHAT[0]["content"]))


def test_chat_conversation_max_completion_tokens(client, model):
    conversation = [{"role": "system", "content": "You are terse."},
                    {"role": "user", "content": "Hi."},
                    {"role": "assistant", "content": "Hello."},
                    {"role": "user", "content": [{"type": "text", "text": "And now?"}]}]
    r = chat(client, model, messages=conversation, max_completion_tokens=3, seed=26)
    c = r.choices[0]
    assert c.finish_reason in ("length", "stop")
    if c.finish_reason == "length":
        assert r.usage.completion_tokens == 3
    assert r.usage.completion_tokens <= 3
    single = chat(client, model, messages=conversation[-1:], max_completion_tokens=1, seed=26)
    assert r.usage.prompt_tokens > single.usage.prompt_tokens


def test_chat_stream_equals_non_stream(client, model):
    params = dict(max_tokens=12, seed=22, temperature=0.9)
    whole = chat(client, model, **params)
    stream = chat(client, model, stream=True, stream_options={"include_usage": True}, **params)
    chunks = list(stream)
    content = [ch for ch in chunks if ch.choices]
    assert content and content[0].choices[0].delta.role == "assistant"
    assert all(ch.object == "chat.completion.chunk" and ch.id == chunks[0].id for ch in chunks)
    text = "".join(ch.choices[0].delta.content or "" for ch in content)
    finishes = [ch.choices[0].finish_reason for ch in content if ch.choices[0].finish_reason]
    assert text == whole.choices[0].message.content
    assert finishes == [whole.choices[0].finish_reason]
    # include_usage: every chunk carries usage null except a last one with no choices.
    assert all(ch.usage is None for ch in chunks[:-1])
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.usage.completion_tokens == whole.usage.completion_tokens
    assert last.usage.prompt_tokens == whole.usage.prompt_tokens
    assert_usage(last.usage)


def test_stream_without_usage_has_no_usage_chunk(client, model):
    chunks = list(chat(client, model, stream=True, max_tokens=4, seed=23))
    assert chunks and all(ch.choices for ch in chunks)
    assert all(getattr(ch, "usage", None) is None for ch in chunks)


def test_n_three_choices(client, model):
    params = dict(max_tokens=6, seed=24, temperature=1.0, n=3)
    r = chat(client, model, **params)
    assert [c.index for c in r.choices] == [0, 1, 2]
    texts = [c.message.content for c in r.choices]
    assert len(set(texts)) == 3, f"three samples of a random model should differ: {texts}"
    if all(c.finish_reason == "length" for c in r.choices):
        assert r.usage.completion_tokens == 3 * 6
    assert_usage(r.usage)
    # Streamed, the same seed gives the same three texts, each under its own index.
    streamed = {0: "", 1: "", 2: ""}
    finished = {}
    for ch in chat(client, model, stream=True, **params):
        for c in ch.choices:
            streamed[c.index] += c.delta.content or ""
            if c.finish_reason:
                assert c.index not in finished, "two finish_reason chunks for one choice"
                finished[c.index] = c.finish_reason
    assert [streamed[i] for i in range(3)] == texts
    assert [finished.get(i) for i in range(3)] == [c.finish_reason for c in r.choices]


def check_top_logprobs(entry, k):
    assert len(entry.top_logprobs) == k
    values = [t.logprob for t in entry.top_logprobs]
    assert values == sorted(values, reverse=True), "top_logprobs must be in descending order"
    assert all(v <= 0 for v in values) and entry.logprob <= 0
    assert sum(math.exp(v) for v in values) <= 1 + 1e-4
    assert bytes(entry.bytes).decode("utf-8", "replace") == entry.token


def test_logprobs_greedy(client, model):
    r = chat(client, model, max_tokens=8, temperature=0, logprobs=True, top_logprobs=3)
    c = r.choices[0]
    entries = c.logprobs.content
    assert len(entries) == r.usage.completion_tokens > 0
    for e in entries:
        check_top_logprobs(e, 3)
        # Greedy picks the most likely token: no alternative is more likely than it.
        assert all(e.logprob >= t.logprob - 1e-5 for t in e.top_logprobs)
        assert e.top_logprobs[0].token == e.token
    # The tokens' bytes make up the text.
    joined = b"".join(bytes(e.bytes) for e in entries).decode("utf-8", "replace")
    assert joined == c.message.content


def test_logprobs_sampled_consistent(client, model):
    """Sampled tokens need not be the most likely, but the top list is the most likely ones."""
    r = chat(client, model, max_tokens=12, temperature=1.0, seed=25, logprobs=True, top_logprobs=3)
    for e in r.choices[0].logprobs.content:
        check_top_logprobs(e, 3)
        # Keyed by bytes, as a list: tokens of partial UTF-8 sequences all read as U+FFFD, and a
        # vocabulary may hold two ids with the same bytes.
        same = [t.logprob for t in e.top_logprobs if bytes(t.bytes) == bytes(e.bytes)]
        if any(abs(lp - e.logprob) < 1e-4 for lp in same):
            continue
        assert e.logprob <= min(t.logprob for t in e.top_logprobs) + 1e-5, (e, same)


def test_completion_logprobs_shape(client, model):
    r = client.completions.create(model=model, prompt="Once upon", max_tokens=5, temperature=0,
                                  logprobs=2)
    lp = r.choices[0].logprobs
    n = r.usage.completion_tokens
    for field in (lp.tokens, lp.token_logprobs, lp.top_logprobs, lp.text_offset):
        assert len(field) == n
    for token, chosen, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        # A dict keyed by token text: byte tokens that all read "\ufffd" share one key.
        assert 1 <= len(top) <= 2
        assert token in top, "greedy picks the most likely token, so it is listed"
        assert all(chosen >= v - 1e-5 for v in top.values())
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)


def test_completion_text_offset_counts_characters(client, model):
    """text_offset is where each token starts in `text`, in characters (Python str indexes)."""
    non_ascii = None
    for seed in range(100):
        r = client.completions.create(model=model, prompt="Once upon a time", max_tokens=16,
                                      seed=seed, logprobs=1)
        lp, text = r.choices[0].logprobs, r.choices[0].text
        if "".join(lp.tokens) != text or "\ufffd" in text:
            continue  # a token that is part of a UTF-8 sequence has no start of its own
        assert lp.text_offset == [len("".join(lp.tokens[:i])) for i in range(len(lp.tokens))], (
            f"seed {seed}: tokens {lp.tokens}")
        if not text.isascii():
            non_ascii = text
            break
    assert non_ascii, "no completion with whole non-ASCII characters to check in 100 seeds"


# ------------------------------------------------------------------------ seeds and stop strings

def test_same_seed_same_text(client, model):
    texts = {chat(client, model, max_tokens=16, seed=31, temperature=1.0).choices[0].message.content
             for _ in range(3)}
    assert len(texts) == 1


def test_different_seeds_differ(client, model):
    texts = [chat(client, model, max_tokens=16, seed=s, temperature=1.0).choices[0].message.content
             for s in range(40, 45)]
    assert len(set(texts)) == len(texts), f"different seeds gave equal texts: {texts}"


def test_stop_string(client, model):
    params = dict(max_tokens=24, seed=32, temperature=1.0)
    free = chat(client, model, **params).choices[0].message.content
    stop = ascii_stop_string(free)
    assert stop, f"no ASCII piece to stop at in {free!r}"
    expected = free[:free.index(stop)]
    r = chat(client, model, stop=[stop, "\x00never\x00"], **params)
    assert stop not in r.choices[0].message.content
    assert r.choices[0].message.content == expected
    assert r.choices[0].finish_reason == "stop"
    # Streamed: no chunk ever shows the stop string, not even split across chunks.
    text, finish = "", None
    for ch in chat(client, model, stop=stop, stream=True, **params):
        text += ch.choices[0].delta.content or ""
        finish = ch.choices[0].finish_reason or finish
    assert text == expected and finish == "stop"


def test_stream_helper(client, model):
    """client.chat.completions.stream(): events and get_final_completion()."""
    params = dict(max_tokens=24, seed=33, temperature=1.0)
    free = chat(client, model, **params).choices[0].message.content
    stop = ascii_stop_string(free)
    assert stop, f"no ASCII piece to stop at in {free!r}"
    expected = free[:free.index(stop)]
    deltas, done, chunks = [], [], 0
    # A length finish would make get_final_completion() raise: end on a stop string instead.
    with client.chat.completions.stream(model=model, messages=CHAT, stop=stop, **params) as s:
        for event in s:
            if event.type == "chunk":
                chunks += 1
            elif event.type == "content.delta":
                deltas.append(event.delta)
                assert event.snapshot == "".join(deltas)
            elif event.type == "content.done":
                done.append(event.content)
        final = s.get_final_completion()
    assert chunks > 0
    assert "".join(deltas) == expected
    assert done == [expected]
    assert final.choices[0].message.content == expected
    assert final.choices[0].finish_reason == "stop"


# ------------------------------------------------------------------------------ typed errors

def too_long_prompt(info):
    return [7] * info["context_length"]


def error_cases(client, model, info, server):
    """name → a call that the server must refuse, with the SDK exception it must raise."""
    def with_wrong_key():
        with make_client(server, api_key="not-" + API_KEY) as wrong_key:
            return wrong_key.models.list()

    return {
        "temperature": (openai.BadRequestError, lambda: chat(client, model, temperature=5)),
        "too_long_prompt": (openai.BadRequestError, lambda: client.completions.create(
            model=model, prompt=too_long_prompt(info), max_tokens=1)),
        "prompt_plus_max_tokens": (openai.BadRequestError, lambda: client.completions.create(
            model=model, prompt=[7] * 10, max_tokens=info["context_length"])),
        "wrong_api_key": (openai.AuthenticationError, with_wrong_key),
        "unknown_path": (openai.NotFoundError,
                         lambda: client.get("/no-such-endpoint", cast_to=object)),
        "unknown_model": (openai.NotFoundError,
                          lambda: chat(client, "no-such-model", max_tokens=1)),
    }


ERROR_CASES = ["temperature", "too_long_prompt", "prompt_plus_max_tokens", "wrong_api_key",
               "unknown_path", "unknown_model"]


@pytest.mark.parametrize("case", ERROR_CASES)
def test_typed_error(client, model, info, server, case):
    exc, call = error_cases(client, model, info, server)[case]
    with pytest.raises(exc) as e:
        call()
    assert e.value.status_code == exc.status_code
    assert e.value.message


@pytest.mark.parametrize("case", ERROR_CASES)
def test_error_body_has_openai_shape(client, model, info, server, case):
    """{"error": {"message": str, "type": str, "param": str|null, "code": str|int|null}}."""
    exc, call = error_cases(client, model, info, server)[case]
    with pytest.raises(exc) as e:
        call()
    body = e.value.response.json()
    assert set(body) == {"error"}
    err = body["error"]
    missing = {"message", "type", "param", "code"} - set(err)
    assert not missing, f"error object lacks {sorted(missing)}: {err}"
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["type"], str) and err["type"]
    assert err["param"] is None or isinstance(err["param"], str)
    assert err["code"] is None or isinstance(err["code"], (str, int))
    if case == "temperature":
        assert err["param"] in (None, "temperature")


def test_server_up_after_errors(client, model):
    r = chat(client, model, max_tokens=2, seed=1)
    assert r.choices[0].finish_reason in ("length", "stop")


# -------------------------------------------------------------------- streams under pressure

def test_abort_mid_stream_then_next_request(client, model, server, info):
    seed = 5151  # finds the request's instance in the server's listing below
    stream = chat(client, model, stream=True, max_tokens=info["context_length"] // 2, seed=seed,
                  temperature=1.0)
    seen = 0
    for ch in stream:
        if ch.choices and ch.choices[0].delta.content:
            seen += 1
        if seen >= 3:
            break
    assert seen == 3
    stream.close()

    # The server notices the closed connection and ends the generation (it would otherwise run
    # for seconds: thousands of tokens, unless the model samples its end token).
    def instance():
        _, listing = server.request("GET", "/v1/instances")
        mine = [i for i in listing["instances"] if "--seed" in i["args"]
                and i["args"][i["args"].index("--seed") + 1] == str(seed)]
        assert len(mine) == 1, listing
        return mine[0]

    deadline = time.time() + 10
    while instance()["state"] != "finished" and time.time() < deadline:
        time.sleep(0.1)
    ended = instance()
    assert ended["state"] == "finished", "the aborted generation kept running"
    assert ended["exit"]["kind"] == "killed" and "client disconnected" in ended["exit"]["reason"]
    r = chat(client, model, max_tokens=4, seed=52)
    assert r.choices[0].finish_reason in ("length", "stop") and r.usage.completion_tokens <= 4


def test_concurrent_streams(server, model):
    """16 streams at once (AsyncOpenAI): each gets all its tokens, counted by their logprobs."""
    max_tokens = 16

    async def one(client, i):
        stream = await client.completions.create(
            model=model, prompt=f"Stream number {i}:", max_tokens=max_tokens, seed=100 + i,
            temperature=1.0, logprobs=1, stream=True, stream_options={"include_usage": True})
        tokens, text, finish, usage = 0, "", None, None
        async for ch in stream:
            for c in ch.choices:
                assert c.index == 0
                text += c.text
                tokens += len(c.logprobs.tokens) if c.logprobs else 0
                finish = c.finish_reason or finish
            usage = ch.usage or usage
        return tokens, text, finish, usage

    async def all_of_them():
        async with make_client(server, cls=openai.AsyncOpenAI) as client:
            return await asyncio.gather(*(one(client, i) for i in range(16)))

    results = asyncio.run(all_of_them())
    assert len(results) == 16
    for i, (tokens, text, finish, usage) in enumerate(results):
        assert usage is not None, f"stream {i}: no usage chunk"
        assert usage.completion_tokens == tokens, f"stream {i}: {tokens} tokens, usage {usage}"
        assert usage.prompt_tokens == len(tokenize(f"Stream number {i}:"))
        if finish == "length":
            assert tokens == max_tokens
        else:
            assert finish == "stop" and tokens < max_tokens, f"stream {i}: finish {finish}"
    assert len({text for _, text, _, _ in results}) == 16


def test_batched_prompts_are_independent_requests(client, model):
    prompts = ["Once upon a time", "The cat sat"]
    r = client.completions.create(model=model, prompt=prompts, n=2, max_tokens=5, seed=90,
                                  temperature=1.0)
    assert sorted(c.index for c in r.choices) == [0, 1, 2, 3]
    assert r.usage.prompt_tokens == sum(len(tokenize(p)) for p in prompts)
    # Choice p * n + j samples with seed + p * n + j: prompt 1's first choice is what a request
    # for prompt 1 alone gives with seed + 2.
    alone = client.completions.create(model=model, prompt=prompts[1], max_tokens=5, seed=92,
                                      temperature=1.0)
    by_index = {c.index: c.text for c in r.choices}
    assert by_index[2] == alone.choices[0].text


def test_echo_and_prompt_logprobs_score_a_text(client, model):
    text = "Once upon a time there was"
    ids = tokenize(text)
    r = client.completions.create(model=model, prompt=text, echo=True, max_tokens=3, seed=93)
    assert r.choices[0].text.startswith(text)
    # max_tokens 0 with echo and logprobs: the prompt scored, nothing generated (lm-eval style).
    s = client.completions.create(model=model, prompt=ids, echo=True, logprobs=2, max_tokens=0)
    lp = s.choices[0].logprobs
    assert s.usage.completion_tokens == 0 and len(lp.token_logprobs) == len(ids)
    assert lp.token_logprobs[0] is None and all(x <= 0 for x in lp.token_logprobs[1:])
    # Each prompt token's logprob is the model's own: the same value a one-token generation
    # reports when a bias makes it pick that token (reported logprobs are before biases).
    for k in (1, len(ids) // 2, len(ids) - 1):
        g = client.completions.create(model=model, prompt=ids[:k], max_tokens=1, logprobs=1,
                                      logit_bias={str(ids[k]): 100})
        assert abs(g.choices[0].logprobs.token_logprobs[0] - lp.token_logprobs[k]) < 2e-3
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=model, prompt=text, echo=True, max_tokens=3, seed=93, stream=True) if c.choices)
    assert streamed == r.choices[0].text


# ==================================================================================================
# Features being added to the server. Skipped until they land; un-skip each as it does.
# ==================================================================================================
in_progress = pytest.mark.skip(reason="lead: feature in progress")


class Verdict(pydantic.BaseModel):
    # Only bounded fields, so a random model's constrained output ends within a few tokens.
    answer: Literal["yes", "no", "maybe"]
    confident: bool


def test_structured_output_parse(client, model):
    r = client.chat.completions.parse(model=model, messages=CHAT, response_format=Verdict,
                                      max_tokens=64, seed=61, temperature=1.0)
    msg = r.choices[0].message
    assert isinstance(msg.parsed, Verdict)
    assert Verdict.model_validate_json(msg.content) == msg.parsed
    assert r.choices[0].finish_reason == "stop"


class Item(pydantic.BaseModel):
    name: str
    count: int = pydantic.Field(ge=0, le=1000)
    tags: list[Literal["a", "b", "c"]] = pydantic.Field(max_length=3)


class Order(pydantic.BaseModel):
    id: int
    priority: Optional[Literal["low", "high"]]
    items: list[Item] = pydantic.Field(min_length=1, max_length=2)
    note: Optional[str] = None


@pytest.mark.parametrize("temperature", [0.0, 0.8, 1.6])
def test_structured_output_holds_for_every_seed_and_temperature(client, model, temperature):
    # Only the grammar can make a random model's output parse: every seed must give a document
    # that validates against the schema (nested objects, bounded integers, enums, optional and
    # nullable fields, bounded arrays), complete within max_tokens.
    for seed in range(6):
        r = client.chat.completions.parse(model=model, messages=CHAT, response_format=Order,
                                          max_tokens=400, seed=seed, temperature=temperature)
        c = r.choices[0]
        assert c.finish_reason == "stop", (seed, c.message.content)
        assert isinstance(c.message.parsed, Order)
        assert Order.model_validate_json(c.message.content) == c.message.parsed


def test_structured_output_fits_a_tight_budget(client, model):
    # The shortest document ({"answer":"yes"}) is about 16 bytes; the random model wanders
    # (whitespace, the longer "maybe"), so only the budget rule (take a token only if a completion
    # still fits, else write the shortest completion) ends every output complete here.
    fmt = {"type": "json_schema", "json_schema": {"name": "v", "schema": {
        "type": "object", "properties": {"answer": {"enum": ["yes", "no", "maybe"]}},
        "required": ["answer"]}}}
    for budget in range(20, 28):
        for seed in range(3):
            r = chat(client, model, response_format=fmt, max_tokens=budget, seed=seed,
                     temperature=1.5)
            c = r.choices[0]
            assert c.finish_reason == "stop", (budget, seed, c.message.content)
            assert json.loads(c.message.content)["answer"] in ("yes", "no", "maybe")
            assert r.usage.completion_tokens <= budget


def test_json_object(client, model):
    r = chat(client, model, response_format={"type": "json_object"}, max_tokens=1024, seed=62,
             temperature=1.0)
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_logit_bias_forces_token(client, model):
    token = 300
    piece = detokenize(token)
    assert piece and piece.isascii() and piece.strip() == piece
    r = chat(client, model, logit_bias={str(token): 100}, max_tokens=5, seed=63, temperature=1.0)
    assert r.choices[0].message.content == piece * 5


def repeats(client, model, **penalty):
    """Tokens of 32 greedy steps that repeat an earlier token."""
    r = chat(client, model, max_tokens=32, temperature=0, logprobs=True, **penalty)
    tokens = [e.token for e in r.choices[0].logprobs.content]
    return len(tokens) - len(set(tokens))


@pytest.mark.parametrize("penalty", ["presence_penalty", "frequency_penalty"])
def test_penalty_reduces_repeats(client, model, penalty):
    # Greedy decoding of a random model loops on a few tokens; a penalty of 2 (several times the
    # spread of its logits) makes every seen token lose to an unseen one.
    without = repeats(client, model)
    assert without >= 8, "greedy decoding of this model should repeat itself"
    assert repeats(client, model, **{penalty: 2.0}) < without // 2


def test_repetition_penalty_reduces_repeats(client, model):
    # vLLM's rule on raw logits: a seen token's positive logit is divided by the penalty, a
    # negative one multiplied; prompt tokens count as seen.
    without = repeats(client, model)
    assert repeats(client, model, extra_body={"repetition_penalty": 5.0}) < without // 2


def eos_token():
    ids = json.loads(pith_cli("tokenize", "--json", "--no-bos", "--parse-special", "-m",
                              os.environ["PITH_MODEL"], "</s>"))
    assert len(ids) == 1, f"</s> is not one token of this vocabulary: {ids}"
    return ids[0]


def test_ignore_eos(client, model):
    forced_eos = {str(eos_token()): 100}
    r = chat(client, model, logit_bias=forced_eos, max_tokens=6, seed=64)
    assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens <= 1
    r = chat(client, model, logit_bias=forced_eos, max_tokens=6, seed=64,
             extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 6


def test_stop_token_ids_and_min_tokens(client, model):
    token = 300
    bias = {str(token): 100}
    r = chat(client, model, logit_bias=bias, max_tokens=8, seed=65,
             extra_body={"stop_token_ids": [token]})
    assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens <= 1
    # As in vLLM, a stop token that is not a special token stays in the text.
    assert r.choices[0].message.content == detokenize(token)
    # min_tokens holds the stop token back for 4 tokens; then the bias makes it the next one.
    r = chat(client, model, logit_bias=bias, max_tokens=8, seed=65,
             extra_body={"stop_token_ids": [token], "min_tokens": 4})
    assert r.choices[0].finish_reason == "stop"
    assert 4 <= r.usage.completion_tokens <= 5


def test_tokenize_detokenize(server, model, info):
    root = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}", api_key=API_KEY, max_retries=0)
    text = "hello world"
    t = root.post("/tokenize", body={"model": model, "prompt": text}, cast_to=object)
    assert t["tokens"] == tokenize(text)
    assert t["count"] == len(t["tokens"])
    assert t["max_model_len"] == info["context_length"]
    bare = root.post("/tokenize", cast_to=object,
                     body={"model": model, "prompt": text, "add_special_tokens": False})
    assert bare["tokens"] == tokenize(text, bos=False)
    d = root.post("/detokenize", body={"model": model, "tokens": bare["tokens"]}, cast_to=object)
    assert d["prompt"] == text


class GetWeather(pydantic.BaseModel):
    city: Literal["Paris", "Tokyo", "Lima"]
    unit: Literal["celsius", "fahrenheit"]


def test_tool_choice_required(client, model):
    tool = openai.pydantic_function_tool(GetWeather, name="get_weather")
    r = chat(client, model, tools=[tool], tool_choice="required", max_tokens=64, seed=66)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    call = c.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather" and call.id
    GetWeather.model_validate(json.loads(call.function.arguments))


def test_tool_choice_named_function(client, model):
    tools = [openai.pydantic_function_tool(GetWeather, name="get_weather"),
             openai.pydantic_function_tool(Verdict, name="give_verdict")]
    r = client.chat.completions.parse(
        model=model, messages=CHAT, tools=tools, max_tokens=64, seed=67,
        tool_choice={"type": "function", "function": {"name": "give_verdict"}})
    c = r.choices[0]
    # OpenAI answers "stop" when the function was named by the request, "tool_calls" otherwise.
    assert c.finish_reason in ("tool_calls", "stop")
    call = c.message.tool_calls[0]
    assert call.function.name == "give_verdict"
    assert isinstance(call.function.parsed_arguments, Verdict)


def test_tool_calls_stream_like_the_sdk_assembles_them(client, model):
    tool = openai.pydantic_function_tool(GetWeather, name="get_weather")
    with client.chat.completions.stream(model=model, messages=CHAT, tools=[tool],
                                        tool_choice="required", max_tokens=64, seed=66) as s:
        events = [e.type for e in s]
        final = s.get_final_completion()
    c = final.choices[0]
    assert c.finish_reason == "tool_calls"
    call = c.message.tool_calls[0]
    assert call.function.name == "get_weather" and call.id.startswith("call_")
    assert isinstance(call.function.parsed_arguments, GetWeather)
    assert "tool_calls.function.arguments.done" in events
    # The same request unstreamed gives the same call.
    r = chat(client, model, tools=[tool], tool_choice="required", max_tokens=64, seed=66)
    assert r.choices[0].message.tool_calls[0].function.arguments == call.function.arguments


def test_tool_choice_auto_keeps_plain_answers_whole(client, model):
    # A random model answers in prose: with tool_choice auto the text that might have become a
    # call is held back while streaming, then released; nothing may be lost or reordered.
    tool = openai.pydantic_function_tool(GetWeather, name="get_weather")
    for seed in (70, 71, 72):
        r = chat(client, model, tools=[tool], tool_choice="auto", max_tokens=12, seed=seed,
                 temperature=1.0)
        c = r.choices[0]
        if c.message.tool_calls:
            continue  # the model happened to call: allowed, and checked elsewhere
        assert c.finish_reason in ("stop", "length")
        streamed = "".join(
            ch.choices[0].delta.content or ""
            for ch in client.chat.completions.create(
                model=model, messages=CHAT, tools=[tool], tool_choice="auto", max_tokens=12,
                seed=seed, temperature=1.0, stream=True)
            if ch.choices)
        assert streamed == c.message.content


def test_tool_results_in_the_history(client, model):
    tool = openai.pydantic_function_tool(GetWeather, name="get_weather")
    messages = CHAT + [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather",
                                      "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"},
    ]
    r = client.chat.completions.create(model=model, messages=messages, tools=[tool],
                                       max_tokens=4, seed=73)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    with pytest.raises(openai.BadRequestError) as e:  # arguments that are not JSON
        bad = [dict(m) for m in messages]
        bad[-2] = {"role": "assistant", "content": None,
                   "tool_calls": [{"id": "call_1", "type": "function",
                                   "function": {"name": "get_weather", "arguments": "{city"}}]}
        client.chat.completions.create(model=model, messages=bad, tools=[tool], max_tokens=4)
    assert e.value.body["param"] == "messages"


# DeepSeek R1's template shape: the generation prompt opens the thought.
R1_TEMPLATE = ("{% for m in messages %}{% if m['role'] == 'assistant' %}"
               "{{ m['content'].split('</think>')[-1] }}{% else %}{{ m['content'] }}{% endif %}"
               "{% endfor %}{% if add_generation_prompt %}<|Assistant|><think>\n{% endif %}")


def test_reasoning_content_of_a_thinking_template(tmp_path, model):
    # The random model never closes the thought: everything it writes is reasoning, streamed as
    # delta.reasoning_content and returned as message.reasoning_content, with no content.
    template = tmp_path / "r1.jinja"
    template.write_text(R1_TEMPLATE)
    s = Server(pith_bin(), os.environ["PITH_MODEL"], "--chat-template", str(template),
               api_key=API_KEY)
    s.start()
    try:
        c = make_client(s)
        r = chat(c, model, max_tokens=8, seed=81, temperature=1.0)
        msg = r.choices[0].message
        assert msg.reasoning_content and not msg.content
        streamed = "".join(
            getattr(ch.choices[0].delta, "reasoning_content", None) or ""
            for ch in c.chat.completions.create(model=model, messages=CHAT, max_tokens=8,
                                                seed=81, temperature=1.0, stream=True)
            if ch.choices)
        assert streamed == msg.reasoning_content
        c.close()
        assert "reasoning (deepseek_r1)" in s.server_log()
    finally:
        assert s.stop() == 0


# ------------------------------------------------------------------------------ Responses API

def respond(client, model, **kw):
    kw.setdefault("input", "Tell me something.")
    return client.responses.create(model=model, **kw)


def weather_tool(**kw):
    """GetWeather as a Responses function tool (flat: name and parameters at the top)."""
    fn = openai.pydantic_function_tool(GetWeather, name="get_weather")["function"]
    return {"type": "function", "name": fn["name"], "parameters": fn["parameters"],
            "strict": True, **kw}


def test_responses_create(client, model):
    r = respond(client, model, max_output_tokens=8, temperature=1.0)
    assert r.object == "response" and r.model == model and r.id.startswith("resp_")
    assert r.status in ("completed", "incomplete")
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    assert isinstance(r.output_text, str)
    assert r.usage.output_tokens <= 8 and r.usage.input_tokens > 0
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.output_tokens_details.reasoning_tokens == 0
    assert r.max_output_tokens == 8 and r.temperature == 1.0 and r.tool_choice == "auto"
    assert [item.type for item in r.output] == ["message"]
    assert r.output[0].role == "assistant" and r.output[0].content[0].type == "output_text"


def test_responses_is_the_chat_request_it_translates_to(client, model):
    # instructions + input are the system and user messages of the same chat request: the same
    # prompt tokens, and greedy decoding gives the same text.
    r = respond(client, model, instructions="Be brief.", max_output_tokens=6, temperature=0)
    c = chat(client, model, max_completion_tokens=6, temperature=0,
             messages=[{"role": "system", "content": "Be brief."}] + CHAT)
    assert r.usage.input_tokens == c.usage.prompt_tokens
    assert r.output_text == c.choices[0].message.content
    assert r.usage.output_tokens == c.usage.completion_tokens
    assert (r.status == "incomplete") == (c.choices[0].finish_reason == "length")
    items = respond(client, model, max_output_tokens=6, temperature=0, input=[
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": CHAT[0]["content"]}]}])
    assert items.output_text == r.output_text


def test_responses_stream_events(client, model):
    # Raw events: the order and numbering the SDK's accumulator relies on, and deltas that add up
    # to the text of the same request unstreamed.
    with client.responses.stream(model=model, input="Tell me something.", max_output_tokens=8,
                                 temperature=0) as s:
        events = list(s)
    types = [e.type for e in events]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert types[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert types[-4:-1] == ["response.output_text.done", "response.content_part.done",
                            "response.output_item.done"]
    assert types[-1] in ("response.completed", "response.incomplete")
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    final = events[-1].response
    assert "".join(deltas) == final.output_text
    assert events[-4].text == final.output_text
    item_id = events[2].item.id
    assert all(e.item_id == item_id for e in events if e.type == "response.output_text.delta")
    assert final.output[0].id == item_id
    unstreamed = respond(client, model, max_output_tokens=8, temperature=0)
    assert unstreamed.output_text == final.output_text and unstreamed.status == final.status
    assert final.usage.output_tokens == unstreamed.usage.output_tokens


def test_responses_parse_structured_output(client, model):
    r = client.responses.parse(model=model, input="Tell me something.", text_format=Verdict,
                               max_output_tokens=64, temperature=1.0)
    assert r.status == "completed"
    assert isinstance(r.output_parsed, Verdict)
    assert Verdict.model_validate_json(r.output_text) == r.output_parsed
    # Streamed, to the end: response.completed, so the SDK hands back the parsed response.
    with client.responses.stream(model=model, input="Tell me something.", text_format=Verdict,
                                 max_output_tokens=64, temperature=1.0) as s:
        deltas = [e.delta for e in s if e.type == "response.output_text.delta"]
        final = s.get_final_response()
    assert isinstance(final.output_parsed, Verdict)
    assert "".join(deltas) == final.output_text


def test_responses_json_object(client, model):
    r = respond(client, model, text={"format": {"type": "json_object"}}, max_output_tokens=1024,
                temperature=1.0)
    assert r.status == "completed"
    assert isinstance(json.loads(r.output_text), dict)


def test_responses_function_tool_round_trip(client, model):
    tools = [weather_tool()]
    r = respond(client, model, tools=tools, tool_choice="required", max_output_tokens=64,
                temperature=1.0)
    calls = [item for item in r.output if item.type == "function_call"]
    assert calls and r.status == "completed"
    call = calls[0]
    assert call.name == "get_weather" and call.call_id and call.id.startswith("fc_")
    GetWeather.model_validate(json.loads(call.arguments))
    # The caller runs the function and sends its output back with the call, statelessly...
    history = [{"role": "user", "content": "Tell me something."}, call.model_dump(
        include={"type", "call_id", "name", "arguments"}),
        {"type": "function_call_output", "call_id": call.call_id, "output": "21 degrees"}]
    after = respond(client, model, input=history, tools=tools, tool_choice="none",
                    max_output_tokens=4, temperature=0)
    assert after.status in ("completed", "incomplete") and after.output[0].type == "message"
    # ... or through previous_response_id: the same conversation, the same prompt.
    chained = respond(client, model, previous_response_id=r.id, tools=tools, tool_choice="none",
                      max_output_tokens=4, temperature=0, input=[history[-1]])
    assert chained.usage.input_tokens == after.usage.input_tokens
    assert chained.output_text == after.output_text
    # As the chat endpoint sees the same round trip.
    c = chat(client, model, tools=[openai.pydantic_function_tool(GetWeather, name="get_weather")],
             tool_choice="none", max_completion_tokens=4, temperature=0, messages=CHAT + [
                 {"role": "assistant", "content": None,
                  "tool_calls": [{"id": call.call_id, "type": "function",
                                  "function": {"name": call.name, "arguments": call.arguments}}]},
                 {"role": "tool", "tool_call_id": call.call_id, "content": "21 degrees"}])
    assert c.usage.prompt_tokens == after.usage.input_tokens


def test_responses_function_call_stream(client, model):
    tools = [weather_tool()]
    with client.responses.stream(model=model, input="Tell me something.", tools=tools,
                                 tool_choice={"type": "function", "name": "get_weather"},
                                 max_output_tokens=64, temperature=1.0) as s:
        events = list(s)
        final = s.get_final_response()
    types = [e.type for e in events]
    assert "response.function_call_arguments.delta" in types
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    call = next(item for item in final.output if item.type == "function_call")
    assert done.arguments == call.arguments and call.name == "get_weather"
    # A strict tool's arguments are parsed by the SDK (a dict: the tool was given as a dict).
    assert GetWeather.model_validate(call.parsed_arguments) == GetWeather.model_validate_json(
        call.arguments)


def test_responses_previous_response_id(client, model):
    first = respond(client, model, max_output_tokens=4, temperature=0)
    second = respond(client, model, previous_response_id=first.id, input="And then?",
                     max_output_tokens=4, temperature=0)
    assert second.previous_response_id == first.id
    c = chat(client, model, max_completion_tokens=4, temperature=0, messages=CHAT + [
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "And then?"}])
    assert second.usage.input_tokens == c.usage.prompt_tokens
    assert second.output_text == c.choices[0].message.content
    # A third turn carries both earlier ones.
    third = respond(client, model, previous_response_id=second.id, input="Why?",
                    max_output_tokens=2, temperature=0)
    assert third.usage.input_tokens > second.usage.input_tokens + second.usage.output_tokens


def test_responses_retrieve_and_delete(client, model):
    r = respond(client, model, max_output_tokens=4, metadata={"run": "e2e"}, user="tester")
    got = client.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text and got.usage == r.usage
    assert got.metadata == {"run": "e2e"} and got.user == "tester"
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError) as e:
        respond(client, model, previous_response_id=r.id, max_output_tokens=1)
    assert e.value.body["param"] == "previous_response_id"
    # store: false keeps nothing.
    unstored = respond(client, model, max_output_tokens=2, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def test_responses_abort_mid_stream_ends_the_generation(client, model, server, info):
    max_tokens = info["context_length"] // 2 - 11  # finds the request's instance below
    stream = client.responses.create(model=model, input="Tell me something.", stream=True,
                                     max_output_tokens=max_tokens, temperature=1.0)
    seen = 0
    for event in stream:
        seen += event.type == "response.output_text.delta"
        if seen >= 3:
            break
    stream.close()

    def instance():
        _, listing = server.request("GET", "/v1/instances")
        mine = [i for i in listing["instances"] if "--max-tokens" in i["args"]
                and i["args"][i["args"].index("--max-tokens") + 1] == str(max_tokens)]
        assert len(mine) == 1, listing
        return mine[0]

    deadline = time.time() + 10
    while instance()["state"] != "finished" and time.time() < deadline:
        time.sleep(0.1)
    ended = instance()
    assert ended["state"] == "finished", "the aborted generation kept running"
    assert "client disconnected" in ended["exit"]["reason"]
    assert respond(client, model, max_output_tokens=2).usage.output_tokens <= 2


def test_responses_reasoning_item_of_a_thinking_template(tmp_path, model):
    # The random model never closes its thought: a reasoning item holding what chat returns as
    # reasoning_content, then an empty message; streamed as response.reasoning_text.delta.
    template = tmp_path / "r1.jinja"
    template.write_text(R1_TEMPLATE)
    s = Server(pith_bin(), os.environ["PITH_MODEL"], "--chat-template", str(template),
               api_key=API_KEY)
    s.start()
    try:
        c = make_client(s)
        r = respond(c, model, max_output_tokens=8, temperature=0)
        assert [item.type for item in r.output] == ["reasoning", "message"]
        thought = r.output[0].content[0].text
        assert thought and r.output_text == "" and r.status == "incomplete"
        ref = chat(c, model, max_completion_tokens=8, temperature=0).choices[0].message
        assert thought == ref.reasoning_content
        with c.responses.stream(model=model, input="Tell me something.", max_output_tokens=8,
                                temperature=0) as st:
            events = list(st)
        streamed = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
        assert streamed == thought
        assert events[-1].response.output[0].content[0].text == thought
        # Sent back as input (input += output), the reasoning item is accepted.
        again = respond(c, model, max_output_tokens=2, input=[
            {"role": "user", "content": "Tell me something."},
            *[item.model_dump(exclude_none=True) for item in r.output],
            {"role": "user", "content": "Go on."}])
        assert again.status in ("completed", "incomplete")
        c.close()
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("kw, exc, param", [
    ({"reasoning": {"effort": "low"}}, openai.BadRequestError, "reasoning"),
    ({"truncation": "auto"}, openai.BadRequestError, "truncation"),
    ({"temperature": 5}, openai.BadRequestError, "temperature"),
    ({"max_output_tokens": 10 ** 8}, openai.BadRequestError, "max_output_tokens"),
    ({"input": [{"type": "web_search_call", "id": "ws_1"}]}, openai.BadRequestError, "input[0]"),
    ({"tools": [{"type": "web_search"}]}, openai.BadRequestError, "tools"),
    ({"text": {"format": {"type": "json_schema", "name": "x",
                          "schema": {"type": "array", "uniqueItems": True}}}},
     openai.BadRequestError, "text"),
    ({"model": "no-such-model"}, openai.NotFoundError, "model"),
    ({"previous_response_id": "resp_missing"}, openai.NotFoundError, "previous_response_id"),
])
def test_responses_typed_errors(client, model, kw, exc, param):
    kw = {"model": model, "input": "Tell me something.", "max_output_tokens": 2, **kw}
    with pytest.raises(exc) as e:
        client.responses.create(**kw)
    err = e.value.response.json()["error"]
    assert err["param"] == param and err["message"] and err["type"] == "invalid_request_error"
    # Worded in the Responses request's terms, never in those of the chat request behind it.
    for chat_name in ("max_completion_tokens", "max_tokens", "response_format", "messages"):
        assert chat_name not in err["message"]
