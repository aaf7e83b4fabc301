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
from pith_harness import Server, parse_sse  # noqa: E402

pith, vocab, template = sys.argv[1], sys.argv[2], sys.argv[3]
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Lima"]},
                       "days": {"type": "integer", "minimum": 1, "maximum": 7},
                       "options": {"type": "object", "properties": {"hourly": {"type": "boolean"}},
                                   "required": ["hourly"]}},
        "required": ["city", "days", "options"]}}},
    {"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}},
]
MESSAGES = [{"role": "user", "content": "What is the weather in Lima this week?"}]


def chat(s, **extra):
    body = {"messages": MESSAGES, "max_tokens": 48, "temperature": 0}
    body.update(extra)
    return s.request("POST", "/v1/chat/completions", body)[1]


def check_call(call):
    assert call["type"] == "function" and call["id"], call
    assert call["function"]["name"] == "get_weather", call
    args = json.loads(call["function"]["arguments"])
    assert args["city"] in ("Paris", "Lima"), args
    assert isinstance(args["days"], int) and 1 <= args["days"] <= 7, args
    assert isinstance(args["options"]["hourly"], bool), args
    return args


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
            weather = {"type": "function", "function": {"name": "get_weather"}}
            named = chat(s, tools=TOOLS, max_tokens=200, tool_choice=weather)
            args = check_call(named["choices"][0]["message"]["tool_calls"][0])

            # Streamed: the call's arguments arrive as deltas that add up to the same call.
            conn = s.connection()
            conn.request("POST", "/v1/chat/completions", body=json.dumps(
                {"messages": MESSAGES, "max_tokens": 200, "temperature": 0, "tools": TOOLS,
                 "tool_choice": weather, "stream": True}), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200
            pieces, name = [], None
            for _, _, data in parse_sse(resp):
                if data == "[DONE]":
                    break
                for ch in json.loads(data)["choices"]:
                    for tc in ch["delta"].get("tool_calls") or []:
                        name = tc.get("function", {}).get("name") or name
                        pieces.append(tc.get("function", {}).get("arguments") or "")
            conn.close()
            assert name == "get_weather" and json.loads("".join(pieces)) == args, (name, pieces)
            print(f"required: {[c['function']['name'] for c in c['message']['tool_calls']]}; named: "
                  f"get_weather({json.dumps(args)}), streamed alike")
    print("1 passed, 0 failed")


main()
