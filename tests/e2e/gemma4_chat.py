#!/usr/bin/env python3
"""End-to-end: Gemma 4's tokenizer and chat template through the OpenAI chat endpoint, on a
served random Gemma 4 model whose vocabulary is llama.cpp's gemma-4 vocabulary (262 144 tokens).

Usage: gemma4_chat.py PITH GEMMA4_VOCAB_GGUF TEMPLATE

- The model file carries the gemma4 tokenizer; the published template
  (tests/data/templates/google-gemma-4-31B-it.jinja) renders the conversation with its turn
  markers, which must tokenize to single special tokens (the prompt is short);
- the template selects the gemma4 tool-call format: a named tool_choice makes the grammar write <|tool_call>call:NAME{...}<tool_call|> with <|"|>-quoted strings, parsed
  back into tool_calls whose JSON arguments satisfy each function's schema (an enum, a bounded
  integer, a nested object); streamed, the same call arrives in pieces.
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
        model = os.path.join(tmp, "gemma4.gguf")
        subprocess.run([pith, "model", "gen", "--preset", "tiny", "--arch", "gemma4", "--dtype",
                        "f32", "--seed", "5", "--vocab", vocab, "-q", "-o", model], check=True)
        with Server(pith, model, "--chat-template", template) as s:
            plain = chat(s, max_tokens=8)
            usage = plain["usage"]
            # "<bos><|turn>user\n" + 10 words + "<turn|>\n<|turn>model\n": the markers are single
            # special tokens, so the prompt stays short.
            assert usage["prompt_tokens"] < 24, usage
            assert plain["choices"][0]["message"].get("content") is not None, plain
            print(f"plain chat: {usage['prompt_tokens']} prompt tokens, "
                  f"{usage['completion_tokens']} completion tokens")

            weather = {"type": "function", "function": {"name": "get_weather"}}
            # One call per request (parallel_tool_calls false): the grammar ends the output after
            # it. (Each step masks 262 144 tokens against the grammar: slow on a small CPU.)
            # (A random model spells the call out in small text pieces: give it room.)
            named = chat(s, tools=TOOLS, max_tokens=120, tool_choice=weather, parallel_tool_calls=False)
            args = check_call(named["choices"][0]["message"]["tool_calls"][0])

            conn = s.connection()
            conn.request("POST", "/v1/chat/completions", body=json.dumps(
                {"messages": MESSAGES, "max_tokens": 120, "temperature": 0, "tools": TOOLS,
                 "tool_choice": weather, "parallel_tool_calls": False, "stream": True}),
                headers={"Content-Type": "application/json"})
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
            print(f"named: get_weather({json.dumps(args)}), streamed alike")
    print("1 passed, 0 failed")


main()
