#!/usr/bin/env python3
"""End-to-end: Mistral's Tekken tokenizer and tool calling through the OpenAI chat endpoint, on a
served random Mistral model whose vocabulary is Tekken (131 072 tokens, tests/data/tokenizer/
tekken-240911.gguf) and whose chat template is Mistral NeMo's published one.

Usage: mistral_chat.py PITH TEKKEN_VOCAB_GGUF TEMPLATE

- [INST], [/INST] and [AVAILABLE_TOOLS] tokenize to single control tokens (the prompt is short);
- the template selects the mistral tool-call format: a named or required tool_choice makes the
  grammar write the JSON array of calls, parsed back into tool_calls whose arguments satisfy the
  schema and whose ids are the 9 letters and digits Mistral's templates read back; streamed, the
  same call arrives in pieces;
- a conversation that sends those calls back (or calls with other ids, which the template itself
  would refuse) renders and continues.
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
    print("1 passed, 0 failed")


main()
