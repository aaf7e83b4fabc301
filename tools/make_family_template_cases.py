"""Renders the chat templates of the model families pith runs (Qwen3, Gemma 2, Phi-3.5, the
DeepSeek-R1 distill of Qwen, Qwen3.5, Gemma 4) with Hugging Face transformers' own chat-template
code, as reference data for pith's Jinja engine: writes `NAME.jinja` and `NAME.expected.json` into
tests/data/templates in the format of the existing cases (see that README), which
chat_template_test and the e2e chat-template test read.

    python3 tools/make_family_template_cases.py LLAMA_CPP_TEMPLATES_DIR

LLAMA_CPP_TEMPLATES_DIR is llama.cpp's models/templates (the templates as published on Hugging
Face, e.g. from the PyPI sdist of llama-cpp-python). Needs transformers; pith never runs it.
Qwen3.5's template (Qwen3.5-4B.jinja) is the one every Qwen3.5 checkpoint ships; Gemma 4's is
llama.cpp's copy of the 31B instruction-tuned model's (google-gemma-4-31B-it.jinja). The
conversations are those of the existing cases (Qwen2.5's file), each with
add_generation_prompt true and false.
"""
import json
import os
import sys

import transformers
from transformers.utils.chat_template_utils import render_jinja_template

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "templates")

# Template file stem -> (bos_token, eos_token) as the model's tokenizer_config.json sets them.
TEMPLATES = {
    "Qwen-Qwen3-0.6B": (None, "<|im_end|>"),
    "google-gemma-2-2b-it": ("<bos>", "<eos>"),
    "microsoft-Phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "Qwen3.5-4B": (None, "<|im_end|>"),
    "google-gemma-4-31B-it": ("<bos>", "<eos>"),
}


def conversations():
    seen = {}
    for case in json.load(open(os.path.join(HERE, "Qwen-Qwen2.5-7B-Instruct.expected.json"))):
        seen.setdefault(case["name"].split("/")[0], case["messages"])
    return seen


def main():
    src_dir = sys.argv[1]
    convs = conversations()
    for stem, (bos, eos) in TEMPLATES.items():
        source = open(os.path.join(src_dir, stem + ".jinja"), encoding="utf-8").read()
        cases = []
        for name, messages in convs.items():
            for agp in (True, False):
                kwargs = {}
                if bos is not None:
                    kwargs["bos_token"] = bos
                kwargs["eos_token"] = eos
                output, exception = None, None
                try:
                    rendered = render_jinja_template(conversations=[messages], tools=None,
                                                     documents=None, chat_template=source,
                                                     add_generation_prompt=agp, **kwargs)
                    output = rendered[0][0] if isinstance(rendered, tuple) else rendered[0]
                except Exception as e:  # raise_exception in the template
                    exception = str(e)
                cases.append({"name": f"{name}/agp={'true' if agp else 'false'}",
                              "messages": messages, "add_generation_prompt": agp,
                              "bos_token": bos, "eos_token": eos, "tools": None,
                              "documents": None, "extra_context": {}, "output": output,
                              "exception": exception})
        with open(os.path.join(HERE, stem + ".jinja"), "w", encoding="utf-8") as f:
            f.write(source)
        with open(os.path.join(HERE, stem + ".expected.json"), "w", encoding="utf-8") as f:
            json.dump(cases, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print(f"{stem}: {len(cases)} cases ({sum(c['exception'] is not None for c in cases)} "
              f"raise), transformers {transformers.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
