#!/usr/bin/env python3
"""Writes the chat template of Mistral's reasoning models (Magistral, Ministral reasoning: Tekken
v13 with [THINK] thinking chunks) as mistral-common generates it, and its renderings over the
existing cases' conversations plus one that sends a thought back as `reasoning_content`, as
reference data for pith's Jinja engine and its `mistral` reasoning format
(tests/data/templates/mistral-common-v13-thinking.{jinja,expected.json}, the format of the
other cases: see that folder's README).

    python3 -m venv /tmp/mc && /tmp/mc/bin/pip install mistral-common==1.13.1 jinja2==3.1.6
    /tmp/mc/bin/python tools/make_mistral_template_cases.py

The renderings use jinja2 as Hugging Face transformers' apply_chat_template configures it
(sandboxed, trim_blocks, lstrip_blocks, loop controls, its tojson and raise_exception). pith
never runs this.
"""
import json
import os
import sys

import jinja2
from mistral_common.integrations.chat_templates.chat_templates import generate_chat_template
from mistral_common.tokens.tokenizers.base import TokenizerVersion

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_jinja import environment  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "templates")
STEM = "mistral-common-v13-thinking"
BOS, EOS = "<s>", "</s>"
THOUGHT_SENT_BACK = [
    {"role": "system", "content": "Think first."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "reasoning_content": "Two and two make four.", "content": "4"},
    {"role": "user", "content": "And 3+3?"},
]


def conversations():
    seen = {}
    for case in json.load(open(os.path.join(HERE, "Qwen-Qwen2.5-7B-Instruct.expected.json"))):
        seen.setdefault(case["name"].split("/")[0], case["messages"])
    seen["thought_sent_back"] = THOUGHT_SENT_BACK
    return seen


def main():
    source = generate_chat_template(
        spm=False, tokenizer_version=TokenizerVersion.v13, image_support=False,
        audio_support=False, thinking_support=True, default_system_prompt=None,
        plain_thinking_support=False, use_special_token_variables=True,
        model_settings_fields=None, reasoning_effort_values=None, reasoning_effort_default=None)
    template = environment().from_string(source)
    cases = []
    for name, messages in conversations().items():
        for agp in (True, False):
            output, exception = None, None
            try:
                output = template.render(messages=messages, tools=None, documents=None,
                                         add_generation_prompt=agp, bos_token=BOS, eos_token=EOS)
            except jinja2.exceptions.TemplateError as e:
                exception = str(e)
            cases.append({"name": f"{name}/agp={'true' if agp else 'false'}",
                          "messages": messages, "add_generation_prompt": agp, "bos_token": BOS,
                          "eos_token": EOS, "tools": None, "documents": None,
                          "extra_context": {}, "output": output, "exception": exception})
    with open(os.path.join(HERE, STEM + ".jinja"), "w", encoding="utf-8") as f:
        f.write(source)
    with open(os.path.join(HERE, STEM + ".expected.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{STEM}: {len(cases)} cases ({sum(c['exception'] is not None for c in cases)} raise)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
