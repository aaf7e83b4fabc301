"""End-to-end: the official `openai` Python SDK's Responses API (`client.responses`) against a
real `pith serve`: create, stream, parse, function tools, previous_response_id, retrieve and
delete, aborts, reasoning items and typed errors; each checked against the chat request it
translates to where there is one. Server, client and helpers: openai_sdk_common.py.
"""
import json
import os

import openai
import pytest

from openai_sdk_common import (API_KEY, CHAT, R1_TEMPLATE, GetWeather, Server, Verdict, chat,
                               finished_instance, make_client, pith_bin)


def respond(client, model, **kw):
    kw.setdefault("input", "Tell me something.")
    return client.responses.create(model=model, **kw)


def weather_tool(**kw):
    """GetWeather as a Responses function tool (flat: name and parameters at the top)."""
    fn = openai.pydantic_function_tool(GetWeather, name="get_weather")["function"]
    return {"type": "function", "name": fn["name"], "parameters": fn["parameters"],
            "strict": True, **kw}


def test_responses_create(client, model):
    r = respond(client, model, max_output_tokens=8, temperature=1.0)
    assert r.object == "response" and r.model == model and r.id.startswith("resp_")
    assert r.status in ("completed", "incomplete")
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    assert isinstance(r.output_text, str)
    assert r.usage.output_tokens <= 8 and r.usage.input_tokens > 0
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.output_tokens_details.reasoning_tokens == 0
    assert r.max_output_tokens == 8 and r.temperature == 1.0 and r.tool_choice == "auto"
    assert [item.type for item in r.output] == ["message"]
    assert r.output[0].role == "assistant" and r.output[0].content[0].type == "output_text"


def test_responses_is_the_chat_request_it_translates_to(client, model):
    # instructions + input are the system and user messages of the same chat request: the same
    # prompt tokens, and greedy decoding gives the same text.
    r = respond(client, model, instructions="Be brief.", max_output_tokens=6, temperature=0)
    c = chat(client, model, max_completion_tokens=6, temperature=0,
             messages=[{"role": "system", "content": "Be brief."}] + CHAT)
    assert r.usage.input_tokens == c.usage.prompt_tokens
    assert r.output_text == c.choices[0].message.content
    assert r.usage.output_tokens == c.usage.completion_tokens
    assert (r.status == "incomplete") == (c.choices[0].finish_reason == "length")
    items = respond(client, model, max_output_tokens=6, temperature=0, input=[
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": CHAT[0]["content"]}]}])
    assert items.output_text == r.output_text


def test_responses_stream_events(client, model):
    # Raw events: the order and numbering the SDK's accumulator relies on, and deltas that add up
    # to the text of the same request unstreamed.
    with client.responses.stream(model=model, input="Tell me something.", max_output_tokens=8,
                                 temperature=0) as s:
        events = list(s)
    types = [e.type for e in events]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert types[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert types[-4:-1] == ["response.output_text.done", "response.content_part.done",
                            "response.output_item.done"]
    assert types[-1] in ("response.completed", "response.incomplete")
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    final = events[-1].response
    assert "".join(deltas) == final.output_text
    assert events[-4].text == final.output_text
    item_id = events[2].item.id
    assert all(e.item_id == item_id for e in events if e.type == "response.output_text.delta")
    assert final.output[0].id == item_id
    unstreamed = respond(client, model, max_output_tokens=8, temperature=0)
    assert unstreamed.output_text == final.output_text and unstreamed.status == final.status
    assert final.usage.output_tokens == unstreamed.usage.output_tokens


def test_responses_parse_structured_output(client, model):
    r = client.responses.parse(model=model, input="Tell me something.", text_format=Verdict,
                               max_output_tokens=64, temperature=1.0)
    assert r.status == "completed"
    assert isinstance(r.output_parsed, Verdict)
    assert Verdict.model_validate_json(r.output_text) == r.output_parsed
    # Streamed, to the end: response.completed, so the SDK hands back the parsed response.
    with client.responses.stream(model=model, input="Tell me something.", text_format=Verdict,
                                 max_output_tokens=64, temperature=1.0) as s:
        deltas = [e.delta for e in s if e.type == "response.output_text.delta"]
        final = s.get_final_response()
    assert isinstance(final.output_parsed, Verdict)
    assert "".join(deltas) == final.output_text


def test_responses_json_object(client, model):
    r = respond(client, model, text={"format": {"type": "json_object"}}, max_output_tokens=1024,
                temperature=1.0)
    assert r.status == "completed"
    assert isinstance(json.loads(r.output_text), dict)


def test_responses_function_tool_round_trip(client, model):
    tools = [weather_tool()]
    r = respond(client, model, tools=tools, tool_choice="required", max_output_tokens=64,
                temperature=1.0)
    calls = [item for item in r.output if item.type == "function_call"]
    assert calls and r.status == "completed"
    call = calls[0]
    assert call.name == "get_weather" and call.call_id and call.id.startswith("fc_")
    GetWeather.model_validate(json.loads(call.arguments))
    # The caller runs the function and sends its output back with the call, statelessly...
    history = [{"role": "user", "content": "Tell me something."}, call.model_dump(
        include={"type", "call_id", "name", "arguments"}),
        {"type": "function_call_output", "call_id": call.call_id, "output": "21 degrees"}]
    after = respond(client, model, input=history, tools=tools, tool_choice="none",
                    max_output_tokens=4, temperature=0)
    assert after.status in ("completed", "incomplete") and after.output[0].type == "message"
    # ... or through previous_response_id: the same conversation, the same prompt.
    chained = respond(client, model, previous_response_id=r.id, tools=tools, tool_choice="none",
                      max_output_tokens=4, temperature=0, input=[history[-1]])
    assert chained.usage.input_tokens == after.usage.input_tokens
    assert chained.output_text == after.output_text
    # As the chat endpoint sees the same round trip.
    c = chat(client, model, tools=[openai.pydantic_function_tool(GetWeather, name="get_weather")],
             tool_choice="none", max_completion_tokens=4, temperature=0, messages=CHAT + [
                 {"role": "assistant", "content": None,
                  "tool_calls": [{"id": call.call_id, "type": "function",
                                  "function": {"name": call.name, "arguments": call.arguments}}]},
                 {"role": "tool", "tool_call_id": call.call_id, "content": "21 degrees"}])
    assert c.usage.prompt_tokens == after.usage.input_tokens


def test_responses_function_call_stream(client, model):
    tools = [weather_tool()]
    with client.responses.stream(model=model, input="Tell me something.", tools=tools,
                                 tool_choice={"type": "function", "name": "get_weather"},
                                 max_output_tokens=64, temperature=1.0) as s:
        events = list(s)
        final = s.get_final_response()
    types = [e.type for e in events]
    assert "response.function_call_arguments.delta" in types
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    call = next(item for item in final.output if item.type == "function_call")
    assert done.arguments == call.arguments and call.name == "get_weather"
    # A strict tool's arguments are parsed by the SDK (a dict: the tool was given as a dict).
    assert GetWeather.model_validate(call.parsed_arguments) == GetWeather.model_validate_json(
        call.arguments)


def test_responses_previous_response_id(client, model):
    first = respond(client, model, max_output_tokens=4, temperature=0)
    second = respond(client, model, previous_response_id=first.id, input="And then?",
                     max_output_tokens=4, temperature=0)
    assert second.previous_response_id == first.id
    c = chat(client, model, max_completion_tokens=4, temperature=0, messages=CHAT + [
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "And then?"}])
    assert second.usage.input_tokens == c.usage.prompt_tokens
    assert second.output_text == c.choices[0].message.content
    # A third turn carries both earlier ones.
    third = respond(client, model, previous_response_id=second.id, input="Why?",
                    max_output_tokens=2, temperature=0)
    assert third.usage.input_tokens > second.usage.input_tokens + second.usage.output_tokens


def test_responses_retrieve_and_delete(client, model):
    r = respond(client, model, max_output_tokens=4, metadata={"run": "e2e"}, user="tester")
    got = client.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text and got.usage == r.usage
    assert got.metadata == {"run": "e2e"} and got.user == "tester"
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError) as e:
        respond(client, model, previous_response_id=r.id, max_output_tokens=1)
    assert e.value.body["param"] == "previous_response_id"
    # store: false keeps nothing.
    unstored = respond(client, model, max_output_tokens=2, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def test_responses_abort_mid_stream_ends_the_generation(client, model, server, info):
    max_tokens = info["context_length"] // 2 - 11  # finds the request's instance below
    stream = client.responses.create(model=model, input="Tell me something.", stream=True,
                                     max_output_tokens=max_tokens, temperature=1.0)
    seen = 0
    for event in stream:
        seen += event.type == "response.output_text.delta"
        if seen >= 3:
            break
    stream.close()

    ended = finished_instance(server, "--max-tokens", max_tokens)
    assert ended["state"] == "finished", "the aborted generation kept running"
    assert "client disconnected" in ended["exit"]["reason"]
    assert respond(client, model, max_output_tokens=2).usage.output_tokens <= 2


def test_responses_reasoning_item_of_a_thinking_template(tmp_path, model):
    # The random model never closes its thought: a reasoning item holding what chat returns as
    # reasoning_content, then an empty message; streamed as response.reasoning_text.delta.
    template = tmp_path / "r1.jinja"
    template.write_text(R1_TEMPLATE)
    s = Server(pith_bin(), os.environ["PITH_MODEL"], "--chat-template", str(template),
               api_key=API_KEY)
    s.start()
    try:
        c = make_client(s)
        r = respond(c, model, max_output_tokens=8, temperature=0)
        assert [item.type for item in r.output] == ["reasoning", "message"]
        thought = r.output[0].content[0].text
        assert thought and r.output_text == "" and r.status == "incomplete"
        ref = chat(c, model, max_completion_tokens=8, temperature=0).choices[0].message
        assert thought == ref.reasoning_content
        with c.responses.stream(model=model, input="Tell me something.", max_output_tokens=8,
                                temperature=0) as st:
            events = list(st)
        streamed = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
        assert streamed == thought
        assert events[-1].response.output[0].content[0].text == thought
        # Sent back as input (input += output), the reasoning item is accepted.
        again = respond(c, model, max_output_tokens=2, input=[
            {"role": "user", "content": "Tell me something."},
            *[item.model_dump(exclude_none=True) for item in r.output],
            {"role": "user", "content": "Go on."}])
        assert again.status in ("completed", "incomplete")
        c.close()
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("kw, exc, param", [
    ({"reasoning": {"effort": "low"}}, openai.BadRequestError, "reasoning"),
    ({"truncation": "auto"}, openai.BadRequestError, "truncation"),
    ({"temperature": 5}, openai.BadRequestError, "temperature"),
    ({"max_output_tokens": 10 ** 8}, openai.BadRequestError, "max_output_tokens"),
    ({"input": [{"type": "web_search_call", "id": "ws_1"}]}, openai.BadRequestError, "input[0]"),
    ({"tools": [{"type": "web_search"}]}, openai.BadRequestError, "tools"),
    ({"text": {"format": {"type": "json_schema", "name": "x",
                          "schema": {"type": "array", "uniqueItems": True}}}},
     openai.BadRequestError, "text"),
    ({"model": "no-such-model"}, openai.NotFoundError, "model"),
    ({"previous_response_id": "resp_missing"}, openai.NotFoundError, "previous_response_id"),
])
def test_responses_typed_errors(client, model, kw, exc, param):
    kw = {"model": model, "input": "Tell me something.", "max_output_tokens": 2, **kw}
    with pytest.raises(exc) as e:
        client.responses.create(**kw)
    err = e.value.response.json()["error"]
    assert err["param"] == param and err["message"] and err["type"] == "invalid_request_error"
    # Worded in the Responses request's terms, never in those of the chat request behind it.
    for chat_name in ("max_completion_tokens", "max_tokens", "response_format", "messages"):
        assert chat_name not in err["message"]
