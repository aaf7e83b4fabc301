"""End-to-end: OpenAI's predicted outputs (`prediction`) through the official SDK against the
session's `pith serve` (openai_sdk_common.py). The built-in inferlet drafts from the predicted
text and verifies each draft in one forward; the output must be exactly what the request gives
without a prediction (greedy), whatever the prediction, and usage must say how much of it was
taken. The model has random weights, whose text tokenizes unlike a trained model's, so only part
of an exact prediction is accepted here; the tests never depend on how much.
"""
import pytest

from openai_sdk_common import chat


def predicted(client, model, text, **kw):
    return chat(client, model, prediction={"type": "content", "content": text}, **kw)


GREEDY = {"max_tokens": 48, "temperature": 0, "extra_body": {"ignore_eos": True}}


def edited(text):
    """The text with a word-sized piece replaced a third of the way in and an insertion later."""
    a, b = len(text) // 3, 2 * len(text) // 3
    return text[:a] + " EDITED " + text[a + 4:b] + " more words here " + text[b:]


@pytest.fixture(scope="module")
def reference(client, model):
    r = chat(client, model, **GREEDY)
    assert r.usage.completion_tokens_details is None or \
        not r.usage.completion_tokens_details.accepted_prediction_tokens
    return r.choices[0].message.content


@pytest.mark.parametrize("kind", ["exact", "edited", "unrelated", "empty-ish"])
def test_prediction_never_changes_greedy_output(client, model, reference, kind):
    text = {"exact": reference, "edited": edited(reference),
            "unrelated": "Completely unrelated text about the weather in spring.",
            "empty-ish": " "}[kind]
    r = predicted(client, model, text, **GREEDY)
    assert r.choices[0].message.content == reference
    assert r.usage.completion_tokens == GREEDY["max_tokens"]
    details = r.usage.completion_tokens_details
    assert details.accepted_prediction_tokens >= 0 and details.rejected_prediction_tokens >= 0
    # A taken draft token is a generated token; each step yields one token of the model's own.
    assert details.accepted_prediction_tokens < r.usage.completion_tokens
    if kind == "exact":
        assert details.accepted_prediction_tokens > 0, details


def test_prediction_tallies_reach_metrics(client, model, server, reference):
    def tallies():
        try:
            return (server.metric("pith_prediction_accepted_tokens_total"),
                    server.metric("pith_prediction_rejected_tokens_total"))
        except KeyError:  # no prediction request yet
            return 0.0, 0.0
    before = tallies()
    r = predicted(client, model, edited(reference), **GREEDY)
    after = tallies()
    d = r.usage.completion_tokens_details
    assert after[0] - before[0] == d.accepted_prediction_tokens
    assert after[1] - before[1] == d.rejected_prediction_tokens
    assert d.accepted_prediction_tokens + d.rejected_prediction_tokens > 0


def test_prediction_streams_the_same_text_and_usage(client, model, reference):
    stream = predicted(client, model, reference, stream=True,
                       stream_options={"include_usage": True}, **GREEDY)
    text, usage = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage:
            usage = chunk.usage
    assert text == reference
    plain = predicted(client, model, reference, **GREEDY)
    assert usage.completion_tokens_details.accepted_prediction_tokens == \
        plain.usage.completion_tokens_details.accepted_prediction_tokens > 0


def test_prediction_keeps_logprobs_stop_strings_and_choices(client, model, reference):
    base = chat(client, model, logprobs=True, top_logprobs=3, n=2, **GREEDY)
    r = predicted(client, model, reference, logprobs=True, top_logprobs=3, n=2, **GREEDY)
    for got, want in zip(r.choices, base.choices):
        assert got.message.content == want.message.content == reference
        for g, w in zip(got.logprobs.content, want.logprobs.content):
            assert g.token == w.token
            assert g.logprob == pytest.approx(w.logprob, abs=2e-3)
            assert [t.token for t in g.top_logprobs] == [t.token for t in w.top_logprobs]
    assert r.usage.completion_tokens_details.accepted_prediction_tokens > 0
    stop = reference[len(reference) // 2:len(reference) // 2 + 3]
    want = chat(client, model, stop=[stop], **GREEDY)
    got = predicted(client, model, reference, stop=[stop], **GREEDY)
    assert got.choices[0].message.content == want.choices[0].message.content
    assert got.choices[0].finish_reason == want.choices[0].finish_reason == "stop"


def test_prediction_with_sampling_and_penalties(client, model, reference):
    # Sampled: the law is sample()'s (unit-tested); here the request succeeds and a seed
    # reproduces its output. Penalties: the greedy text equals the one without a prediction.
    kw = dict(GREEDY, temperature=0.8, seed=11)
    a = predicted(client, model, reference, **kw)
    b = predicted(client, model, reference, **kw)
    assert a.choices[0].message.content == b.choices[0].message.content
    pen = dict(GREEDY, frequency_penalty=0.7, presence_penalty=0.3)
    assert predicted(client, model, reference, **pen).choices[0].message.content == \
        chat(client, model, **pen).choices[0].message.content


def test_prediction_with_structured_output(client, model):
    fmt = {"type": "json_schema", "json_schema": {"name": "t", "schema": {
        "type": "object", "properties": {"a": {"type": "string", "maxLength": 12},
                                         "b": {"type": "integer"}},
        "required": ["a", "b"], "additionalProperties": False}}}
    kw = {"max_tokens": 64, "temperature": 0, "response_format": fmt}
    want = chat(client, model, **kw).choices[0].message.content
    got = predicted(client, model, want, **kw)
    assert got.choices[0].message.content == want
    assert got.usage.completion_tokens_details.accepted_prediction_tokens > 0


@pytest.mark.parametrize("prediction", [
    {"type": "text", "content": "x"}, {"type": "content"}, {"type": "content", "content": 5}])
def test_bad_prediction_is_a_400(client, model, prediction):
    import openai
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, model, prediction=prediction, max_tokens=4)
    assert e.value.body["param"] == "prediction"
