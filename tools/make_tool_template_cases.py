"""Renders tool-calling chat requests with Hugging Face transformers' own chat-template code, as
reference data for pith's tests (tests/data/templates/tool_conversations.json).

    python3 tools/make_tool_template_cases.py > tests/data/templates/tool_conversations.json

Needs transformers (PyPI); pith never runs it. Each case holds the request as an OpenAI client
sends it (`openai_messages`: tool-call arguments as JSON strings) and the rendering of the same
conversation in Hugging Face's form (arguments as objects), which is what a server must turn
the former into before rendering. Gemma 4's template gets more cases (nested parameter types,
parallel calls with reasoning, results as text, thinking turned on through
`chat_template_kwargs`), as its tool syntax is its own.
"""
import copy
import json
import os
import sys

import transformers
from transformers.utils.chat_template_utils import render_jinja_template

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "templates")
TEMPLATES = ["Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct", "Qwen3.5-4B",
             "google-gemma-4-31B-it"]
# bos / eos per template where the Llama 3 ones would not be the model's own.
SPECIAL_TOKENS = {"google-gemma-4-31B-it": ("<bos>", "<eos>")}

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


FLIGHTS = {
    "type": "function",
    "function": {
        "name": "search_flights",
        "description": "Find flights",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string", "description": "IATA code"},
                "passengers": {"type": "integer"},
                "flexible": {"type": "boolean", "nullable": True},
                "stops": {"type": "array", "items": {"type": "string", "enum": ["none", "one"]}},
                "window": {"type": "object", "description": "Dates",
                           "properties": {"start": {"type": "string"},
                                          "end": {"type": "string"}},
                           "required": ["start"]},
            },
            "required": ["origin", "passengers"],
        },
    },
}

CALL_2 = {"id": "call_2", "type": "function",
          "function": {"name": "search_flights",
                       "arguments": json.dumps({"origin": "CDG", "passengers": 2, "flexible": None,
                                                "stops": ["none"],
                                                "window": {"start": "2025-05-01", "end": None},
                                                "max_price": 99.5})}}

# Gemma 4 only: (name, messages, tools, chat_template_kwargs).
GEMMA4_CASES = [
    ("nested_tools_offered", [{"role": "system", "content": "  Be brief.  "},
                              {"role": "user", "content": "Fly me to Rome"}],
     TOOLS + [FLIGHTS], {}),
    ("parallel_calls_with_reasoning", [
        {"role": "user", "content": "Weather in Paris, then flights?"},
        {"role": "assistant", "content": None, "reasoning_content": "Two tools needed.",
         "tool_calls": [CALL, CALL_2]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
        {"role": "tool", "tool_call_id": "call_2", "content": "no flights"},
    ], TOOLS + [FLIGHTS], {}),
    ("answer_after_results", [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1",
         "content": [{"type": "text", "text": "sun"}, {"type": "text", "text": "ny"}]},
        {"role": "assistant", "content": "<|channel>thought\nsummarize<channel|>Sunny."},
        {"role": "user", "content": "Thanks"},
    ], TOOLS, {}),
    ("thinking_on_after_results", [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ], TOOLS, {"enable_thinking": True}),
]


def hf_form(messages):
    out = copy.deepcopy(messages)
    for m in out:
        if m.get("content") is None:
            m["content"] = ""
        for c in m.get("tool_calls", []):
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return out


def render(source, messages, tools, bos, eos, kwargs):
    rendered = render_jinja_template(conversations=[hf_form(messages)], tools=tools,
                                     chat_template=source, add_generation_prompt=True,
                                     bos_token=bos, eos_token=eos, date_string="26 Jul 2024",
                                     **kwargs)
    return rendered[0][0] if isinstance(rendered, tuple) else rendered[0]


def main():
    cases = []
    for t in TEMPLATES:
        source = open(os.path.join(HERE, t + ".jinja")).read()
        bos, eos = SPECIAL_TOKENS.get(t, ("<|begin_of_text|>", "<|eot_id|>"))
        todo = [(name, messages, TOOLS, {}) for name, messages in CASES.items()]
        if t == "google-gemma-4-31B-it":
            todo += GEMMA4_CASES
        for name, messages, tools, kwargs in todo:
            case = {"template": t, "name": name, "openai_messages": messages,
                    "tools": tools, "bos_token": bos, "eos_token": eos,
                    "date_string": "26 Jul 2024"}
            if kwargs:
                case["chat_template_kwargs"] = kwargs
            case["output"] = render(source, messages, tools, bos, eos, kwargs)
            cases.append(case)
    json.dump({"generator": f"transformers {transformers.__version__}", "cases": cases},
              sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
