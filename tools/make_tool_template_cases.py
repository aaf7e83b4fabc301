"""Renders tool-calling chat requests with Hugging Face transformers' own chat-template code, as
reference data for pith's tests (tests/data/templates/tool_conversations.json).

    python3 tools/make_tool_template_cases.py > tests/data/templates/tool_conversations.json

Needs transformers (PyPI); pith never runs it. Each case holds the request as an OpenAI client
sends it (`openai_messages`: tool-call arguments as JSON strings) and the rendering of the same
conversation in Hugging Face's form (arguments as objects), which is what a server must turn
the former into before rendering.
"""
import copy
import json
import os
import sys

import transformers
from transformers.utils.chat_template_utils import render_jinja_template

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "templates")
TEMPLATES = ["Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct", "Qwen3.5-4B"]

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string"},
                                      "unit": {"type": "string", "enum": ["c", "f"]}},
                       "required": ["city"]},
    },
}]

CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"c\"}"}}

CASES = {
    "tools_offered": [{"role": "user", "content": "Weather in Paris?"}],
    "tool_round_trip": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
    ],
}


def hf_form(messages):
    out = copy.deepcopy(messages)
    for m in out:
        if m.get("content") is None:
            m["content"] = ""
        for c in m.get("tool_calls", []):
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return out


def main():
    cases = []
    for t in TEMPLATES:
        source = open(os.path.join(HERE, t + ".jinja")).read()
        for name, messages in CASES.items():
            rendered = render_jinja_template(conversations=[hf_form(messages)], tools=TOOLS,
                                             chat_template=source, add_generation_prompt=True,
                                             bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                             date_string="26 Jul 2024")
            text = rendered[0][0] if isinstance(rendered, tuple) else rendered[0]
            cases.append({"template": t, "name": name, "openai_messages": messages,
                          "tools": TOOLS, "bos_token": "<|begin_of_text|>",
                          "eos_token": "<|eot_id|>", "date_string": "26 Jul 2024",
                          "output": text})
    json.dump({"generator": f"transformers {transformers.__version__}", "cases": cases},
              sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
