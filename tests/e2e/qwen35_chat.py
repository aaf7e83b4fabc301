#!/usr/bin/env python3
"""End-to-end: Qwen3.5's chat template through the OpenAI chat endpoint, on a served random
Qwen3.5 (hybrid) model: its XML tool calls and its thinking section.

Usage: qwen35_chat.py PITH VOCAB_GGUF TEMPLATE

- The published template (tests/data/templates/Qwen3.5-4B.jinja) selects the qwen3_coder
  tool-call format and, because its generation prompt opens <think>, reads the output as a
  thought first: a plain request's text comes back as reasoning_content.
- chat_template_kwargs {"enable_thinking": false} makes the template close the thought in the
  prompt: the same request's text comes back as content.
- tool_choice "required" / a named function: the grammar writes an XML call whose parameters
  satisfy the schema (an enum, a bounded integer, an object), parsed back into tool_calls with
  typed JSON arguments; streamed, the same call arrives in pieces.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402
from tool_chat import TOOLS, WEATHER, chat, check_call, streamed_call  # noqa: E402

pith, vocab, template = sys.argv[1], sys.argv[2], sys.argv[3]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "qwen35.gguf")
        subprocess.run([pith, "model", "gen", "--preset", "tiny", "--arch", "qwen35", "--dtype", "f32",
                        "--seed", "5", "--vocab", vocab, "-q", "-o", model], check=True)
        with Server(pith, model, "--chat-template", template) as s:
            thinking = chat(s, max_tokens=8)["choices"][0]["message"]
            assert thinking.get("reasoning_content"), thinking
            assert not thinking.get("content"), thinking
            plain = chat(s, max_tokens=8, chat_template_kwargs={"enable_thinking": False})
            answer = plain["choices"][0]["message"]
            assert answer.get("content") and not answer.get("reasoning_content"), answer
            print(f"thinking on: {len(thinking['reasoning_content'])} chars of reasoning; "
                  f"enable_thinking false: {len(answer['content'])} chars of content")

            r = chat(s, tools=TOOLS, tool_choice="required", max_tokens=200)
            c = r["choices"][0]
            assert c["finish_reason"] == "tool_calls", c
            for call in c["message"]["tool_calls"]:
                if call["function"]["name"] == "noop":
                    assert json.loads(call["function"]["arguments"]) == {}, call
                else:
                    check_call(call)
            named = chat(s, tools=TOOLS, max_tokens=200, tool_choice=WEATHER)
            args = check_call(named["choices"][0]["message"]["tool_calls"][0])

            # Streamed: the call's arguments arrive as deltas that add up to the same call.
            name, streamed = streamed_call(s, max_tokens=200, tool_choice=WEATHER)
            assert name == "get_weather" and streamed == args, (name, streamed)
            print(f"required: {[c['function']['name'] for c in c['message']['tool_calls']]}; named: "
                  f"get_weather({json.dumps(args)}), streamed alike")
    print("1 passed, 0 failed")


main()
