"""pith_client: a standard-library-only client for `pith serve` (docs/server-api.md).

    from pith_client import Client
    c = Client("http://127.0.0.1:8080")
    r = c.run("text_completion.wasm", ["--prompt", "Hello", "--max-tokens", "8"])
    print(r.messages, r.exit)
    print(c.complete("Hello", max_tokens=8)["choices"][0]["text"])
"""
from .client import Client, Event, Instance, RunResult
from .errors import PithError
from .sse import SseEvent, iter_sse

__all__ = ["Client", "Event", "Instance", "PithError", "RunResult", "SseEvent", "iter_sse"]
__version__ = "0.1.0"
