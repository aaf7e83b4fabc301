#!/usr/bin/env python3
"""Renders gpt-oss's chat template (the harmony format, as OpenAI publishes it with the model;
llama.cpp keeps a copy in models/templates/openai-gpt-oss-120b.jinja) over the existing cases'
conversations plus conversations with tools, a tool call and its result, a thought sent back
and each reasoning effort, as reference data for pith's Jinja engine
(tests/data/templates/openai-gpt-oss-120b.{jinja,expected.json}; format: that folder's README).
    python3 -m venv /tmp/j && /tmp/j/bin/pip install jinja2==3.1.6
    /tmp/j/bin/python tools/make_gpt_oss_template_cases.py LLAMA_CPP_DIR/models/templates
jinja2 is configured as Hugging Face transformers' apply_chat_template configures it (sandboxed,
trim_blocks, lstrip_blocks, loop controls, its tojson, raise_exception and strftime_now). The
template writes today's date; the references hold DATE and the test puts its own date in its
place (the case's "date" field). pith never runs this.
"""
import json
import os
import shutil
import sys

import jinja2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_jinja  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "templates")
STEM = "openai-gpt-oss-120b"
DATE = "2026-12-02"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["c", "f"]},
        "days": {"type": "integer"}, "hourly": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["city"]}}}
TOOL_ROUND = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "assistant", "content": "21 degrees.", "thinking": "The tool said 21."},
    {"role": "user", "content": "Thanks"},
]
THOUGHT_SENT_BACK = [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "thinking": "Two and two make four.", "content": "4"},
    {"role": "user", "content": "And 3+3?"},
]
# name -> (messages, tools, extra context)
EXTRA = {
    "tool_round": (TOOL_ROUND, [WEATHER], {"reasoning_effort": "high"}),
    "thought_sent_back": (THOUGHT_SENT_BACK, None, {"reasoning_effort": "low"}),
    "builtin_and_identity": (THOUGHT_SENT_BACK, None,
                             {"builtin_tools": ["browser", "python"],
                              "model_identity": "You are a test model."}),
}


def environment():
    env = hf_jinja.environment()
    env.globals["strftime_now"] = lambda fmt: DATE if fmt == "%Y-%m-%d" else fmt
    return env


def conversations():
    seen = {}
    for case in json.load(open(os.path.join(HERE, "Qwen-Qwen2.5-7B-Instruct.expected.json"))):
        seen.setdefault(case["name"].split("/")[0], (case["messages"], None, {}))
    seen.update(EXTRA)
    return seen


def main():
    src = os.path.join(sys.argv[1], STEM + ".jinja")
    template = environment().from_string(open(src, encoding="utf-8").read())
    cases = []
    for name, (messages, tools, extra) in conversations().items():
        for agp in (True, False):
            output, exception = None, None
            try:
                output = template.render(messages=messages, tools=tools, add_generation_prompt=agp,
                                         **extra)
            except jinja2.exceptions.TemplateError as e:
                exception = str(e)
            cases.append({"name": f"{name}/agp={'true' if agp else 'false'}",
                          "messages": messages, "add_generation_prompt": agp, "bos_token": None,
                          "eos_token": None, "tools": tools, "documents": None,
                          "extra_context": extra, "date": DATE, "output": output,
                          "exception": exception})
    shutil.copyfile(src, os.path.join(HERE, STEM + ".jinja"))
    with open(os.path.join(HERE, STEM + ".expected.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{STEM}: {len(cases)} cases ({sum(c['exception'] is not None for c in cases)} raise)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
