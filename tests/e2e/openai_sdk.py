"""End-to-end: the official `openai` Python SDK against a real `pith serve`, the way real clients
use the OpenAI-compatible endpoints: models, completions, chat, streams, logprobs, seeds and stop
strings, typed errors, structured output, sampling controls, tools and reasoning. The server,
the client and the helpers are openai_sdk_common.py's (which says how to run this); the Responses
API's tests are openai_sdk_responses.py.
"""
import asyncio
import datetime
import ipaddress
import json
import math
import os
from typing import Annotated, Literal, Optional

import openai
import pydantic
import pytest

from openai_sdk_common import (API_KEY, CHAT, R1_TEMPLATE, GetWeather, Server, Verdict,
                               assert_usage, chat, detokenize, finished_instance, make_client,
                               pith_bin, pith_cli, tokenize)


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
    ended = finished_instance(server, "--seed", seed)
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


def test_best_of_returns_the_most_likely_candidates(client, model):
    # best_of=4, n=2: the four choices n=4 samples with the same seed, the two with the highest
    # mean token logprob returned (renumbered); usage counts all four, as OpenAI bills them.
    kw = dict(model=model, prompt=["Once upon a time", "A B C"], max_tokens=8, temperature=1.0,
              seed=94, logprobs=0)
    every = client.completions.create(n=4, **kw)
    best = client.completions.create(n=2, best_of=4, **kw)

    def mean(c):
        return sum(c.logprobs.token_logprobs) / len(c.logprobs.token_logprobs)

    for p in range(2):
        candidates = sorted(every.choices[4 * p:4 * p + 4], key=lambda c: (-mean(c), c.index))
        assert [c.text for c in best.choices[2 * p:2 * p + 2]] == \
            [c.text for c in candidates[:2]]
    assert [c.index for c in best.choices] == [0, 1, 2, 3]
    assert best.usage.completion_tokens == every.usage.completion_tokens
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model, prompt="x", best_of=3, max_tokens=2, stream=True)
    assert e.value.body["param"] == "best_of"


# ------------------------------------------------------------------------- structured output

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


class Listing(pydantic.BaseModel):
    sku: str = pydantic.Field(pattern=r"^[A-Z]{3}-\d{4}$")
    slug: str = pydantic.Field(min_length=3, max_length=12, pattern=r"^[a-z0-9-]+$")
    site: pydantic.AnyUrl
    ttl: datetime.timedelta
    ip: ipaddress.IPv4Address
    at: datetime.datetime
    note: Optional[str] = pydantic.Field(default=None, pattern=r"^[^<>]*$")
    confidence: float = pydantic.Field(ge=0, le=1)
    price: pydantic.PositiveFloat
    delta: Optional[float] = pydantic.Field(default=None, gt=-2.5, lt=2.5)
    stock: dict[Annotated[str, pydantic.StringConstraints(pattern=r"^[a-z]{2,8}$")], int] = \
        pydantic.Field(max_length=2)
    levels: dict[Literal["low", "high"], float]
    pack: int = pydantic.Field(multiple_of=5, ge=0)
    step: float = pydantic.Field(multiple_of=0.25)


def test_structured_output_patterns_and_formats(client, model):
    # Regular-expression patterns, length bounds beside a pattern, the regular formats (uri,
    # duration, ipv4, date-time), bounded floats and multiples, as Pydantic writes them:
    # Pydantic's own parsers and checks (URL, timedelta, IP address, datetime, ge/le/gt/lt,
    # multiple_of) accept every seed's document.
    for seed in range(6):
        r = client.chat.completions.parse(model=model, messages=CHAT, response_format=Listing,
                                          max_tokens=600, seed=seed, temperature=1.0)
        c = r.choices[0]
        assert c.finish_reason == "stop", (seed, c.message.content)
        assert isinstance(c.message.parsed, Listing), c.message.content
        assert 3 <= len(c.message.parsed.slug) <= 12


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


# ---------------------------------------------------------------------------- sampling controls

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


@pytest.mark.parametrize("sampling", [
    {"presence_penalty": 2.0},
    {"frequency_penalty": 1.5, "logit_bias": {"300": 4, "301": -100}},
    {"extra_body": {"repetition_penalty": 5.0}},
    {"presence_penalty": 0.5, "extra_body": {"min_tokens": 6, "stop_token_ids": [300]},
     "logit_bias": {"300": 8}},
    {"frequency_penalty": 1.0, "temperature": 1.0, "seed": 66},
])
def test_penalties_applied_by_the_server_match_the_inferlets(client, model, sampling):
    # Without logprobs the penalties and biases go down with every step and the server ranks the
    # adjusted logits; with them the inferlet applies them to the whole vocabulary's logits
    # (logprobs are the model's own). Both draw the same tokens.
    params = {"max_tokens": 32, "temperature": 0, **sampling}
    shaped = chat(client, model, **params)
    whole = chat(client, model, logprobs=True, **params)
    assert shaped.choices[0].message.content == whole.choices[0].message.content
    assert shaped.usage.completion_tokens == whole.usage.completion_tokens
    plain = chat(client, model, max_tokens=32,
                 **{k: v for k, v in params.items() if k in ("temperature", "seed")})
    assert shaped.choices[0].message.content != plain.choices[0].message.content


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


# ------------------------------------------------------------------------ tokenize / detokenize

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



# ---------------------------------------------------------------------------------------- tools

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


def legacy_function():
    """GetWeather as a deprecated `functions` entry (name, description, parameters)."""
    fn = dict(openai.pydantic_function_tool(GetWeather, name="get_weather")["function"])
    fn.pop("strict", None)
    return fn


def test_legacy_function_call(client, model):
    # The deprecated fields are the tool-calling request rewritten: the same forced call, named
    # as message.function_call, whole and streamed.
    fn = legacy_function()
    kw = dict(max_tokens=64, seed=66)
    r = chat(client, model, functions=[fn], function_call={"name": "get_weather"}, **kw)
    c = r.choices[0]
    assert c.finish_reason == "stop"  # a named function, as OpenAI
    assert c.message.tool_calls is None
    assert c.message.function_call.name == "get_weather"
    GetWeather.model_validate(json.loads(c.message.function_call.arguments))
    modern = chat(client, model, tools=[{"type": "function", "function": fn}],
                  tool_choice={"type": "function", "function": {"name": "get_weather"}},
                  parallel_tool_calls=False, **kw)
    assert modern.choices[0].message.tool_calls[0].function.arguments == \
        c.message.function_call.arguments
    name, arguments, reasons = None, "", []
    for chunk in chat(client, model, functions=[fn], function_call={"name": "get_weather"},
                      stream=True, **kw):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        assert not delta.tool_calls
        if delta.function_call:
            name = delta.function_call.name or name
            arguments += delta.function_call.arguments or ""
        if chunk.choices[0].finish_reason:
            reasons.append(chunk.choices[0].finish_reason)
    assert (name, arguments, reasons) == ("get_weather", c.message.function_call.arguments,
                                          ["stop"])
    # function_call "none": the model is not told about the function and answers in text.
    plain = chat(client, model, functions=[fn], function_call="none", max_tokens=4, seed=66)
    assert plain.choices[0].message.function_call is None
    assert plain.choices[0].finish_reason in ("stop", "length")


def test_legacy_function_history_renders_as_tool_calls(client, model):
    fn = legacy_function()
    arguments = "{\"city\": \"Paris\", \"unit\": \"celsius\"}"
    legacy = CHAT + [
        {"role": "assistant", "content": None,
         "function_call": {"name": "get_weather", "arguments": arguments}},
        {"role": "function", "name": "get_weather", "content": "21 degrees"}]
    modern = CHAT + [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_legacy_0", "type": "function",
                         "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call_legacy_0", "name": "get_weather",
         "content": "21 degrees"}]
    ids = {"extra_body": {"return_token_ids": True}}
    a = client.chat.completions.create(model=model, messages=legacy, functions=[fn],
                                       max_tokens=4, seed=73, **ids)
    b = client.chat.completions.create(model=model, messages=modern,
                                       tools=[{"type": "function", "function": fn}],
                                       parallel_tool_calls=False, max_tokens=4, seed=73, **ids)
    assert a.model_extra["prompt_token_ids"] == b.model_extra["prompt_token_ids"]
    assert a.choices[0].finish_reason in ("stop", "length", "function_call")
    for kw, param in ((dict(functions=[fn], tools=[{"type": "function", "function": fn}]),
                       "functions"),
                      (dict(functions=[fn], function_call={"name": "elsewhere"}), "function_call"),
                      (dict(function_call="auto"), "function_call")):
        with pytest.raises(openai.BadRequestError) as e:
            chat(client, model, max_tokens=4, **kw)
        assert e.value.body["param"] == param, e.value.body



# ------------------------------------------------------------------------------------ reasoning

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


def test_reasoning_effort_switches_a_templates_thinking(model):
    # Qwen3.5's template opens a thought unless enable_thinking is false; reasoning_effort is
    # that switch ("none": off), in chat and as the Responses API's reasoning.effort. The random
    # model never closes a thought: with thinking on all it writes is reasoning, off all content.
    template = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                            "templates", "Qwen3.5-4B.jinja")
    s = Server(pith_bin(), os.environ["PITH_MODEL"], "--chat-template", template, api_key=API_KEY)
    s.start()
    try:
        c = make_client(s)
        kw = dict(max_tokens=8, seed=82, temperature=1.0)
        on = chat(c, model, reasoning_effort="high", **kw).choices[0].message
        assert on.reasoning_content and not on.content
        assert chat(c, model, **kw).choices[0].message.reasoning_content == on.reasoning_content
        off = chat(c, model, reasoning_effort="none", **kw).choices[0].message
        assert off.content and getattr(off, "reasoning_content", None) is None
        explicit = chat(c, model, extra_body={"chat_template_kwargs": {"enable_thinking": False}},
                        **kw).choices[0].message
        assert explicit.content == off.content
        quiet = c.responses.create(model=model, input="Tell me something.", max_output_tokens=8,
                                   temperature=0, reasoning={"effort": "none"})
        assert [item.type for item in quiet.output] == ["message"] and quiet.output_text
        assert quiet.reasoning.effort == "none"
        thinking = c.responses.create(model=model, input="Tell me something.",
                                      max_output_tokens=8, temperature=0,
                                      reasoning={"effort": "low", "summary": "auto"})
        assert [item.type for item in thinking.output] == ["reasoning", "message"]
        with pytest.raises(openai.BadRequestError) as e:
            chat(c, model, reasoning_effort="extreme", max_tokens=2)
        assert e.value.body["param"] == "reasoning_effort"
        c.close()
    finally:
        assert s.stop() == 0
