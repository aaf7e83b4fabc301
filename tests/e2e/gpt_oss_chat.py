#!/usr/bin/env python3
"""End-to-end: gpt-oss's harmony format through the OpenAI chat endpoint, on a served random
gpt-oss model whose vocabulary holds the harmony tokens (tests/data/tokenizer/
byte-vocab-harmony.gguf: the bytes and gpt-oss's control tokens) and whose chat template is
gpt-oss's published one.

Usage: gpt_oss_chat.py PITH HARMONY_VOCAB_GGUF TEMPLATE

- the template selects the harmony formats; the prompt ends by opening the assistant message;
- a named tool_choice: the grammar writes the call's header and its arguments to the schema,
  parsed into tool_calls (finish_reason stop); streamed, the same call arrives in pieces;
  required: finish_reason tool_calls;
- with logit_bias on the byte "a" the model takes the analysis channel the grammar offers
  first: the thought is served as reasoning_content (no marker in it or in content), and the
  budget then closes the thought and writes the call;
- response_format: the answer is the final message, its JSON the content;
- the call, its thought and its result sent back render and the conversation continues;
- through the Responses API the call is a function_call item.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402

from tool_chat import MESSAGES, TOOLS, WEATHER, chat, check_call, streamed_call  # noqa: E402

pith, vocab, template = sys.argv[1], sys.argv[2], sys.argv[3]
MARKERS = ("<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|constrain|>")
# A forced call's shortest completion is ~120 byte tokens: room for it and a thought.
BUDGET = 256


def no_markers(text):
    return text is None or not any(m in text for m in MARKERS)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "gpt-oss.gguf")
        subprocess.run([pith, "model", "gen", "--preset", "tiny", "--arch", "gpt-oss", "--dtype",
                        "f32", "--seed", "5", "--vocab", vocab, "-q", "-o", model], check=True)
        with Server(pith, model, "--chat-template", template) as s:
            assert "separate reasoning (harmony)" in s.server_log(), s.server_log()
            tokens = s.request("POST", "/tokenize", {"messages": MESSAGES,
                                                     "return_token_strs": True})[1]
            strs = tokens["token_strs"]
            # System and user messages, then the assistant's opened: markers are single tokens.
            assert "".join(strs).endswith("<|start|>assistant"), strs[-12:]
            assert strs.count("<|message|>") == 2 and strs.count("<|start|>") == 3, strs
            a_token = tokens["tokens"][strs.index("a")]

            named = chat(s, tools=TOOLS, tool_choice=WEATHER, max_tokens=BUDGET)
            choice = named["choices"][0]
            check_call(choice["message"]["tool_calls"][0])
            assert choice["finish_reason"] == "stop", choice  # a named function
            assert no_markers(choice["message"].get("content")), choice
            assert no_markers(choice["message"].get("reasoning_content")), choice
            name, streamed = streamed_call(s, tool_choice=WEATHER, max_tokens=BUDGET)
            assert name == "get_weather" and streamed["city"] in ("Paris", "Lima"), streamed
            required = chat(s, tools=TOOLS, tool_choice="required", max_tokens=BUDGET)
            assert required["choices"][0]["finish_reason"] == "tool_calls", required
            print("tool calls: named, streamed and required calls parsed from harmony headers")

            thought = chat(s, tools=TOOLS, tool_choice=WEATHER, max_tokens=BUDGET,
                           logit_bias={str(a_token): 100})["choices"][0]
            reasoning = thought["message"]["reasoning_content"]
            assert reasoning and set(reasoning) == {"a"}, thought  # the biased byte, no marker
            args = check_call(thought["message"]["tool_calls"][0])
            assert thought["finish_reason"] == "stop", thought
            print(f"thought: {len(reasoning)} characters of analysis as reasoning_content, "
                  f"then the call {json.dumps(args)}")

            schema = {"type": "object", "properties": {"n": {"type": "integer"}},
                      "required": ["n"], "additionalProperties": False}
            answer = chat(s, max_tokens=BUDGET, response_format={
                "type": "json_schema", "json_schema": {"name": "n", "schema": schema}})
            content = answer["choices"][0]["message"]["content"]
            value = json.loads(content)
            assert isinstance(value["n"], int), content
            print(f"response_format: the final message's JSON {content.strip()[:40]} as content")

            call = named["choices"][0]["message"]["tool_calls"][0]
            history = MESSAGES + [
                {"role": "assistant", "content": None, "reasoning_content": "Need the weather.",
                 "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": "15 C, sunny"}]
            rendered = s.request("POST", "/tokenize", {"messages": history,
                                                       "return_token_strs": True})[1]
            text = "".join(rendered["token_strs"])
            assert "<|channel|>analysis<|message|>Need the weather.<|end|>" in text, text
            assert " to=functions.get_weather<|channel|>commentary json<|message|>" in text, text
            assert "<|start|>functions.get_weather to=assistant<|channel|>commentary" in text, text
            after = chat(s, messages=history, tools=TOOLS, max_tokens=16)
            assert after["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls"), after
            print("conversation: the thought, call and result render as harmony and continue")

            # The Responses API reads the same session: the call is a function_call item.
            fn = TOOLS[0]["function"]
            r = s.request("POST", "/v1/responses", {
                "input": MESSAGES[0]["content"], "max_output_tokens": BUDGET, "temperature": 0,
                "tools": [{"type": "function", "name": fn["name"], "parameters": fn["parameters"]}],
                "tool_choice": {"type": "function", "name": "get_weather"}})[1]
            items = [item for item in r["output"] if item["type"] == "function_call"]
            assert len(items) == 1 and items[0]["name"] == "get_weather", r["output"]
            assert json.loads(items[0]["arguments"])["city"] in ("Paris", "Lima"), items
            assert all(no_markers(json.dumps(item)) for item in r["output"]), r["output"]
            print("responses: the call as a function_call item")


if __name__ == "__main__":
    main()
