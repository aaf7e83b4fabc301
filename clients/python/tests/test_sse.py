"""iter_sse on its own: no server needed."""
from pith_client import iter_sse

STREAM = (b": keep-alive\r\n\r\n"
          b"id: 3\nevent: message\ndata: {\"text\":\"hello\"}\n\n"
          b"id: 4\r\nevent: log\r\ndata: line one\r\ndata:line two\r\n\r\n"
          b"event: ping\n\n"
          b"data: [DONE]\n\n")


def test_events_fields_and_defaults():
    ev = list(iter_sse(STREAM.splitlines(keepends=True)))
    assert [(e.id, e.event, e.data) for e in ev] == [
        (3, "message", '{"text":"hello"}'),
        (4, "log", "line one\nline two"),
        (None, "message", "[DONE]"),   # the data-less "ping" was not dispatched; its type reset
    ]


def test_unfinished_event_is_not_dispatched():
    assert list(iter_sse([b"id: 1\n", b"data: x\n"])) == []
