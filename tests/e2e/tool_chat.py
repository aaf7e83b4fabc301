"""Shared by the chat e2e tests of the tool-call formats (qwen35_chat.py, gemma4_chat.py): the
tools offered, the question, a chat request, the check of a get_weather call's arguments against
its schema, and a streamed call read back from its deltas."""
import json

from pith_harness import parse_sse

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
WEATHER = {"type": "function", "function": {"name": "get_weather"}}


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


def streamed_call(s, **extra):
    """(name, arguments) of the call a streamed chat request makes, its argument deltas joined."""
    body = {"messages": MESSAGES, "temperature": 0, "tools": TOOLS, "stream": True}
    body.update(extra)
    conn = s.connection()
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
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
    return name, json.loads("".join(pieces))
