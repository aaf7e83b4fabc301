"""Server-Sent Events parsing (the text/event-stream format pith serve writes)."""
from dataclasses import dataclass


@dataclass
class SseEvent:
    id: int | None  # the `id:` field when numeric
    event: str      # "message" unless the stream named a type
    data: str       # the data lines joined with "\n"


def iter_sse(lines):
    """Yields an SseEvent per complete event from an iterable of byte (or str) lines.

    Lines end in LF or CRLF; comment lines (":" first, keep-alives) are skipped; an event is
    dispatched at a blank line and only if it carried data, as the WHATWG spec says.
    """
    ev_id, event, data, has_data = None, "message", [], False
    for raw in lines:
        line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        line = line.rstrip("\r\n")
        if not line:
            if has_data:
                yield SseEvent(ev_id, event, "\n".join(data))
            ev_id, event, data, has_data = None, "message", [], False
            continue
        if line.startswith(":"):
            continue
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
            has_data = True
        elif field == "event":
            event = value or "message"
        elif field == "id" and value.isdigit():
            ev_id = int(value)
