#!/usr/bin/env python3
"""End-to-end: Mistral's Tekken tokenizer and tool calling through the OpenAI chat endpoint, on a
served random Mistral model whose vocabulary is Tekken (131 072 tokens, tests/data/tokenizer/
tekken-240911.gguf) and whose chat template is Mistral NeMo's published one.

Usage: mistral_chat.py PITH TEKKEN_VOCAB_GGUF TEMPLATE [MISTRAL_BYTE_VOCAB MAGISTRAL_TEMPLATE]

- [INST], [/INST] and [AVAILABLE_TOOLS] tokenize to single control tokens (the prompt is short);
- the template selects the mistral tool-call format: a named or required tool_choice makes the
  grammar write the JSON array of calls, parsed back into tool_calls whose arguments satisfy the
  schema and whose ids are the 9 letters and digits Mistral's templates read back; streamed, the
  same call arrives in pieces;
- a conversation that sends those calls back (or calls with other ids, which the template itself
  would refuse) renders and continues;
- with Magistral's template (mistral-common's, Tekken v13) on a vocabulary holding [THINK] and
  [/THINK] as control tokens, a thought sent back as reasoning_content renders as them, and a
  model made to open a thought (logit_bias on [THINK]) has its output served as
  reasoning_content, the markers' text kept for the parser.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402

from tool_chat import MESSAGES, TOOLS, WEATHER, chat, check_call, streamed_call  # noqa: E402

pith, vocab, template = sys.argv[1], sys.argv[2], sys.argv[3]
byte_vocab, magistral_template = (sys.argv[4], sys.argv[5]) if len(sys.argv) > 5 else (None, None)
THOUGHT_SENT_BACK = [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "reasoning_content": "Two and two make four.", "content": "4"},
    {"role": "user", "content": "And 3+3?"},
]


def magistral(tmp):
    model = os.path.join(tmp, "magistral.gguf")
    subprocess.run([pith, "model", "gen", "--preset", "tiny", "--arch", "mistral", "--dtype",
                    "f32", "--seed", "6", "--vocab", byte_vocab, "-q", "-o", model], check=True)
    with Server(pith, model, "--chat-template", magistral_template) as s:
        tokens = s.request("POST", "/tokenize", {"messages": THOUGHT_SENT_BACK,
                                                 "return_token_strs": True})[1]
        strs = tokens["token_strs"]
        assert strs.count("[THINK]") == 1 and strs.count("[/THINK]") == 1, strs
        think = tokens["tokens"][strs.index("[THINK]")]
        opened = chat(s, messages=THOUGHT_SENT_BACK, max_tokens=3,
                      logit_bias={str(think): 100})["choices"][0]
        # The first [THINK] opens the thought; the ones after it are the thought's text.
        assert opened["message"].get("reasoning_content") == "[THINK]" * 2, opened
        assert not opened["message"].get("content"), opened
        assert opened["finish_reason"] == "length", opened
    print("magistral: a thought sent back renders as [THINK] ... [/THINK] control tokens; an "
          "opened thought is served as reasoning_content")
MISTRAL_ID = re.compile(r"^[A-Za-z0-9]{9}$")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "mistral.gguf")
        subprocess.run([pith, "model", "gen", "--preset", "tiny", "--arch", "mistral", "--dtype",
                        "f32", "--seed", "5", "--vocab", vocab, "-q", "-o", model], check=True)
        with Server(pith, model, "--chat-template", template) as s:
            plain = chat(s, max_tokens=8)
            usage = plain["usage"]
            # <s>[INST] + 10 words + [/INST]: the markers are single control tokens.
            assert usage["prompt_tokens"] < 20, usage
            assert plain["choices"][0]["message"].get("content") is not None, plain

            named = chat(s, tools=TOOLS, max_tokens=120, tool_choice=WEATHER,
                         parallel_tool_calls=False)
            call = named["choices"][0]["message"]["tool_calls"][0]
            args = check_call(call)
            assert MISTRAL_ID.match(call["id"]), call
            assert named["choices"][0]["finish_reason"] == "stop", named  # a named function
            name, streamed = streamed_call(s, max_tokens=120, tool_choice=WEATHER,
                                           parallel_tool_calls=False)
            assert name == "get_weather" and streamed == args, (name, streamed)

            required = chat(s, tools=TOOLS, max_tokens=160, tool_choice="required")
            calls = required["choices"][0]["message"]["tool_calls"]
            assert required["choices"][0]["finish_reason"] == "tool_calls", required
            assert calls and all(MISTRAL_ID.match(c["id"]) for c in calls), calls

            # The calls sent back with their results: with the ids given, and with other ids.
            for call_id in (call["id"], "call_7f3a9c2e41d8b6a0f5e2c913"):
                sent = dict(call, id=call_id)
                history = MESSAGES + [
                    {"role": "assistant", "content": None, "tool_calls": [sent]},
                    {"role": "tool", "tool_call_id": call_id, "content": "Sunny, 24 C"}]
                again = chat(s, messages=history, tools=TOOLS, max_tokens=4)
                assert again["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls"), \
                    again
            print(f"named: get_weather({json.dumps(args)}) id {call['id']}, streamed alike; "
                  f"required: {len(calls)} call(s); histories with both ids render")
        if byte_vocab:
            magistral(tmp)
    print("1 passed, 0 failed")


main()
