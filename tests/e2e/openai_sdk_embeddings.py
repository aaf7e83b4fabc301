"""End-to-end: /v1/embeddings through the official SDK (which asks for base64 unless told
otherwise), on the session's server (last-token pooling: the model file says none) and on a
second one started with --pooling mean.

What the API guarantees is checked against outside sources: the vector length is the model's
hidden size (`pith model info`), usage counts the tokens `pith tokenize` gives, vectors are unit
length; an input's embedding is the same alone, in a batch, beside concurrent requests, as text or
as its token ids, as floats or base64; `dimensions` keeps the leading values renormalised. The
pooling itself is checked across the two servers: with normalize off, the mean-pooled vector of
a text (longer than the inferlet's 256-token chunks) is the mean of the last-token vectors of its
prefixes (a causal model's state at a token depends only on the tokens before it).
"""
import base64
import math
import os
import struct
import threading

import openai
import pytest

from openai_sdk_common import Server, make_client, pith_bin, tokenize

TEXTS = ["The quick brown fox", "jumps over", "The quick brown fox", "the lazy dog, twice over"]


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def max_diff(a, b):
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b))


def embed(client, model, inp, **kw):
    kw.setdefault("encoding_format", "float")
    return client.embeddings.create(model=model, input=inp, **kw)


def test_one_text(client, model, info):
    r = embed(client, model, TEXTS[0])
    assert r.object == "list" and r.model == model
    assert len(r.data) == 1 and r.data[0].index == 0 and r.data[0].object == "embedding"
    v = r.data[0].embedding
    assert len(v) == info["d_model"]
    assert abs(norm(v) - 1) < 1e-5
    n = len(tokenize(TEXTS[0]))
    assert r.usage.prompt_tokens == n and r.usage.total_tokens == n


def test_batch_equals_each_alone_and_keeps_order(client, model):
    batch = embed(client, model, TEXTS)
    assert [d.index for d in batch.data] == list(range(len(TEXTS)))
    assert batch.usage.prompt_tokens == sum(len(tokenize(t)) for t in TEXTS)
    vs = [d.embedding for d in batch.data]
    assert max_diff(vs[0], vs[2]) < 1e-5
    assert max_diff(vs[0], vs[1]) > 1e-3 and max_diff(vs[1], vs[3]) > 1e-3
    for t, v in zip(TEXTS, vs):
        assert max_diff(embed(client, model, t).data[0].embedding, v) < 1e-4, t


def test_concurrent_requests_get_their_own_vectors(client, model):
    want = [embed(client, model, t).data[0].embedding for t in TEXTS]
    got = [None] * (2 * len(TEXTS))

    def run(i):
        got[i] = embed(client, model, TEXTS[i % len(TEXTS)]).data[0].embedding

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(got))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, v in enumerate(got):
        assert v is not None and max_diff(v, want[i % len(TEXTS)]) < 1e-4, i


def test_base64_is_the_float32_bytes(client, server, model):
    floats = embed(client, model, TEXTS[1]).data[0].embedding
    # The SDK's default: base64, decoded by the SDK.
    by_sdk = client.embeddings.create(model=model, input=TEXTS[1]).data[0].embedding
    assert max_diff(by_sdk, floats) < 1e-5
    _, raw = server.request("POST", "/v1/embeddings",
                            {"model": model, "input": TEXTS[1], "encoding_format": "base64"})
    b = base64.b64decode(raw["data"][0]["embedding"])
    assert len(b) == 4 * len(floats)
    assert max_diff(struct.unpack(f"<{len(floats)}f", b), floats) < 1e-5


def test_token_ids_and_text_agree(client, model):
    ids = [tokenize(t) for t in TEXTS[:2]]
    by_text = embed(client, model, TEXTS[:2])
    by_ids = embed(client, model, ids)
    one = embed(client, model, ids[1])
    for a, b in zip(by_text.data, by_ids.data):
        assert max_diff(a.embedding, b.embedding) < 1e-4
    assert max_diff(one.data[0].embedding, by_text.data[1].embedding) < 1e-4


def test_dimensions_keep_the_leading_values(client, model):
    raw = embed(client, model, TEXTS[3], extra_body={"normalize": False}).data[0].embedding
    short = embed(client, model, TEXTS[3], dimensions=8).data[0].embedding
    assert len(short) == 8 and abs(norm(short) - 1) < 1e-5
    lead = raw[:8]
    assert max_diff(short, [x / norm(lead) for x in lead]) < 1e-4
    assert abs(norm(raw) - 1) > 1e-3  # normalize off: the state as it is


def test_bad_requests_name_the_field(client, model, info):
    with pytest.raises(openai.BadRequestError, match="empty"):
        embed(client, model, "")
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        embed(client, model, "x", dimensions=info["d_model"] + 1)
    with pytest.raises(openai.BadRequestError, match="context"):
        embed(client, model, [1] * (info["context_length"] + 1))
    with pytest.raises(openai.BadRequestError, match="unknown field"):
        embed(client, model, "x", extra_body={"temperature": 0})
    with pytest.raises(openai.NotFoundError):
        embed(client, "no-such-model", "x")
    assert len(embed(client, model, "still serving").data) == 1


@pytest.fixture(scope="module")
def mean_server():
    with Server(pith_bin(), os.environ["PITH_MODEL"], "--pooling", "mean") as s:
        c = make_client(s, api_key="unused")
        yield c
        c.close()


def test_mean_pooling_is_the_mean_of_prefix_states(client, model, mean_server):
    # Over 256 tokens: the inferlet computes every-token pooling 256 tokens at a time.
    ids = tokenize(" ".join(TEXTS * 12))
    assert len(ids) > 256
    mean = embed(mean_server, model, ids, extra_body={"normalize": False}).data[0].embedding
    lasts = embed(client, model, [ids[:i + 1] for i in range(len(ids))],
                  extra_body={"normalize": False})
    want = [sum(col) / len(ids) for col in zip(*(d.embedding for d in lasts.data))]
    scale = 1 + max(abs(x) for x in want)
    assert max_diff(mean, want) < 1e-4 * scale
    # Normalised, it is unit length and differs from last-token pooling.
    unit = embed(mean_server, model, ids).data[0].embedding
    assert abs(norm(unit) - 1) < 1e-5
    assert max_diff(unit, embed(client, model, ids).data[0].embedding) > 1e-3
