"""End-to-end: vLLM's `return_token_ids` extension through the official SDK (`extra_body`)
against the session's `pith serve` (openai_sdk_common.py): RL and agent frameworks train on the
exact tokens a chat or completion request consumed and produced, so the response carries the
prompt's token ids (chat: at the top; completions: per choice) and each choice's generated ids;
streamed, the first chunk carries the prompt's and every chunk the ids since the last one.
"""
import pytest

from openai_sdk_common import chat, tokenize

IDS = {"extra_body": {"return_token_ids": True, "ignore_eos": True}}


def server_tokenize(server, body):
    _, out = server.request("POST", "/tokenize", body)
    return out["tokens"]


def test_chat_returns_prompt_and_completion_ids(client, model, server):
    r = chat(client, model, max_tokens=12, temperature=0, **IDS)
    messages = [{"role": "user", "content": "Tell me something."}]
    assert r.prompt_token_ids == server_tokenize(server, {"model": model, "messages": messages})
    assert len(r.prompt_token_ids) == r.usage.prompt_tokens
    ids = r.choices[0].token_ids
    assert len(ids) == r.usage.completion_tokens == 12
    _, text = server.request("POST", "/detokenize", {"model": model, "tokens": ids})
    assert text["prompt"] == r.choices[0].message.content
    plain = chat(client, model, max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
    assert getattr(plain, "prompt_token_ids", None) is None
    assert getattr(plain.choices[0], "token_ids", None) is None


def test_completions_carry_ids_per_choice(client, model):
    r = client.completions.create(model=model, prompt=["Once upon", "A B C"], n=2, max_tokens=6,
                                  temperature=0.8, seed=5, **IDS)
    assert len(r.choices) == 4
    for c in r.choices:
        prompt = ["Once upon", "A B C"][c.index // 2]
        assert c.prompt_token_ids == tokenize(prompt)
        assert len(c.token_ids) == 6
    assert sum(len(c.token_ids) for c in r.choices) == r.usage.completion_tokens


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_streamed_ids_add_up_to_the_whole(client, model, endpoint):
    kw = dict(max_tokens=16, temperature=0, **IDS)
    if endpoint == "chat":
        whole = chat(client, model, **kw)
        stream = chat(client, model, stream=True, **kw)
        want_prompt = whole.prompt_token_ids
    else:
        whole = client.completions.create(model=model, prompt="Hello there", **kw)
        stream = client.completions.create(model=model, prompt="Hello there", stream=True, **kw)
        want_prompt = whole.choices[0].prompt_token_ids
    ids, prompts = [], []
    for i, chunk in enumerate(stream):
        extra = chunk.model_extra or {}
        if "prompt_token_ids" in extra:  # chat: the first chunk only
            assert i == 0
            prompts.append(extra["prompt_token_ids"])
        for c in chunk.choices:
            ids += (c.model_extra or {}).get("token_ids") or []
            if (c.model_extra or {}).get("prompt_token_ids") is not None:
                prompts.append(c.model_extra["prompt_token_ids"])
    assert prompts == [want_prompt]
    assert ids == whole.choices[0].token_ids


def test_stop_strings_keep_the_generated_ids(client, model):
    whole = chat(client, model, max_tokens=24, temperature=0, **IDS)
    text = whole.choices[0].message.content
    stop = text[len(text) // 2:len(text) // 2 + 2]
    r = chat(client, model, max_tokens=24, temperature=0, stop=[stop], **IDS)
    assert r.choices[0].finish_reason == "stop"
    # Every token the model generated, the one that completed the stop string too.
    assert r.choices[0].token_ids == whole.choices[0].token_ids[:len(r.choices[0].token_ids)]
    assert len(r.choices[0].token_ids) == r.usage.completion_tokens
