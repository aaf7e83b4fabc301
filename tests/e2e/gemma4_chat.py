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
from pith_harness import Server  # noqa: E402

from tool_chat import TOOLS, WEATHER, chat, check_call, streamed_call  # noqa: E402

# The CUDA backend does not run this family yet (engine/cuda/family_support.h).

pith, vocab, template = sys.argv[1], sys.argv[2], sys.argv[3]


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

            # One call per request (parallel_tool_calls false): the grammar ends the output after
            # it. (Each step masks the 262 144 tokens through the host's vocabulary trie.)
            # (A random model spells the call out in small text pieces: give it room.)
            named = chat(s, tools=TOOLS, max_tokens=120, tool_choice=WEATHER,
                         parallel_tool_calls=False)
            args = check_call(named["choices"][0]["message"]["tool_calls"][0])

            name, streamed = streamed_call(s, max_tokens=120, tool_choice=WEATHER,
                                           parallel_tool_calls=False)
            assert name == "get_weather" and streamed == args, (name, streamed)
            print(f"named: get_weather({json.dumps(args)}), streamed alike")
    print("1 passed, 0 failed")


main()
