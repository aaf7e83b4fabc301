"""Client for a running `pith serve` (docs/server-api.md), standard library only.

Every call opens its own HTTP connection (http.client), so a Client may be shared between
threads; event and completion streams hold theirs until they are exhausted or closed.
"""
import hashlib
import http.client
import json
import os
import time
import urllib.parse
from dataclasses import dataclass, field

from .errors import PithError
from .sse import iter_sse

DEFAULT_URL = "http://127.0.0.1:8080"


@dataclass
class Event:
    """One event of an instance: type is "message", "log", "dropped" or "terminated"."""
    id: int | None
    type: str
    data: dict

    @property
    def text(self):
        """The message or log line (None for other events)."""
        return self.data.get("text")


@dataclass
class RunResult:
    """What `Client.run` collected from one instance."""
    id: str
    messages: list = field(default_factory=list)  # send() payloads, in order
    logs: list = field(default_factory=list)      # (level, text)
    exit: dict | None = None                      # {"kind", "code", "reason"}

    @property
    def ok(self):
        return self.exit is not None and self.exit.get("kind") == "exited" and self.exit.get("code") == 0


def _error_from(status, body):
    try:
        err = json.loads(body)["error"]
        return PithError(status, err.get("type", "error"), err.get("message", ""))
    except (ValueError, KeyError, TypeError):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
        return PithError(status, "http_error", text[:500] or "(no body)")


class Client:
    """A pith server. url defaults to $PITH_SERVER or http://127.0.0.1:8080, api_key to
    $PITH_API_KEY; timeout (seconds) bounds each socket operation."""

    def __init__(self, url=None, api_key=None, timeout=300.0):
        url = url or os.environ.get("PITH_SERVER") or DEFAULT_URL
        if "://" not in url:
            url = "http://" + url
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"unsupported URL scheme in {url!r}")
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("PITH_API_KEY") or None
        self.timeout = timeout

    def __repr__(self):
        return f"Client({self.url!r})"

    # ---- transport ----
    def _connect(self, timeout):
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=timeout)

    def _open(self, method, path, body=None, headers=None, timeout=None):
        """Sends a request; returns (connection, response) with the body unread."""
        h = dict(headers or {})
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        conn = self._connect(self.timeout if timeout is None else timeout)
        try:
            conn.request(method, self._prefix + path, body=body, headers=h)
            return conn, conn.getresponse()
        except OSError as e:
            conn.close()
            raise PithError(0, "connection", f"cannot reach the pith server at {self.url}: {e}") from e
        except http.client.HTTPException as e:
            conn.close()
            raise PithError(0, "connection", f"{method} {self.url}{path}: {e!r}") from e

    def request(self, method, path, body=None, content_type=None, headers=None):
        """One request; returns (status, body bytes). Raises PithError for status >= 400."""
        h = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            content_type = content_type or "application/json"
        elif isinstance(body, str):
            body = body.encode()
        if content_type:
            h["Content-Type"] = content_type
        conn, resp = self._open(method, path, body, h)
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise PithError(0, "connection", f"{method} {self.url}{path}: {e!r}") from e
        finally:
            conn.close()
        if resp.status >= 400:
            raise _error_from(resp.status, data)
        return resp.status, data

    def _json(self, method, path, body=None, content_type=None):
        _, data = self.request(method, path, body, content_type)
        return json.loads(data) if data else None

    # ---- health ----
    def health(self):
        """{"status": "ok", "model": NAME}, or {"status": "loading"|"stopping"} (no exception for 503)."""
        conn, resp = self._open("GET", "/health")
        try:
            return json.loads(resp.read() or b"{}")
        finally:
            conn.close()

    def models(self):
        """The served models (OpenAI /v1/models "data")."""
        return self._json("GET", "/v1/models")["data"]

    def metrics(self):
        """Prometheus text of /metrics."""
        return self.request("GET", "/metrics")[1].decode()

    # ---- programs ----
    def upload(self, program):
        """Uploads a .wasm (a path or the bytes); returns its SHA-256 hex hash."""
        data = _read_program(program)
        return self._json("POST", "/v1/programs", data, "application/wasm")["hash"]

    def program_exists(self, program_hash):
        conn, resp = self._open("HEAD", f"/v1/programs/{program_hash}")
        try:
            resp.read()
        finally:
            conn.close()
        if resp.status == 404:
            return False
        if resp.status >= 400:
            raise PithError(resp.status, "http_error", f"HEAD /v1/programs/{program_hash}")
        return True

    def ensure_program(self, program):
        """The hash of a path or bytes, uploading them only if the server lacks that hash."""
        data = _read_program(program)
        digest = hashlib.sha256(data).hexdigest()
        if not self.program_exists(digest):
            uploaded = self.upload(data)
            if uploaded != digest:
                raise PithError(0, "mismatch", f"the server stored the program as {uploaded}, expected {digest}")
        return digest

    def programs(self):
        """[{"hash", "size", "uploaded_at", "native_ready", "builtin", ["name"]}, ...]"""
        return self._json("GET", "/v1/programs")["programs"]

    def delete_program(self, program_hash):
        self.request("DELETE", f"/v1/programs/{program_hash}")

    # ---- instances ----
    def launch(self, program, args=(), detach=True):
        """Starts an instance of `program`: a hash (or built-in name), a .wasm path or bytes
        (uploaded when missing). detach=False ties it to its event stream (docs/server-api.md)."""
        if isinstance(program, (bytes, bytearray, os.PathLike)) or (isinstance(program, str) and os.path.isfile(program)):
            program = self.ensure_program(program)
        body = self._json("POST", "/v1/instances", {"program": program, "args": [str(a) for a in args], "detach": detach})
        return Instance(self, body["id"])

    def instance(self, instance_id):
        return Instance(self, str(instance_id))

    def instances(self):
        """Every instance the server lists (running, and finished ones for a while)."""
        return self._json("GET", "/v1/instances")["instances"]

    def ps(self, all=False):
        """Running instances (all=True: finished ones too)."""
        return [i for i in self.instances() if all or i.get("state") == "running"]

    def run(self, program, args=(), messages=(), close_input=True, timeout=None):
        """Launches `program`, sends `messages`, collects its events until it ends."""
        inst = self.launch(program, args, detach=True)
        result = RunResult(inst.id)
        for m in messages:
            inst.send(m)
        if close_input:
            inst.close()
        for ev in inst.events(timeout=timeout):
            if ev.type == "message":
                result.messages.append(ev.text)
            elif ev.type == "log":
                result.logs.append((ev.data.get("level"), ev.text))
            elif ev.type == "terminated":
                result.exit = ev.data
        return result

    # ---- OpenAI-compatible ----
    def complete(self, prompt, stream=False, **params):
        """POST /v1/completions. Returns the response dict, or with stream=True an iterator of
        chunk dicts (the `[DONE]` marker ends it). params: max_tokens, temperature, top_p,
        top_k, min_p, seed, stop, n, logprobs, ..."""
        return self._openai("/v1/completions", dict(params, prompt=prompt), stream)

    def chat(self, messages, stream=False, **params):
        """POST /v1/chat/completions; `messages` is a list of {"role", "content"} or one user
        message as a str. Same return shapes as complete()."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        return self._openai("/v1/chat/completions", dict(params, messages=list(messages)), stream)

    def embed(self, input, **params):
        """POST /v1/embeddings. `input`: a str, token ids, or a list of either. Returns the list
        of vectors (one per input, in order) as floats; params: dimensions, normalize,
        truncate_prompt_tokens, add_special_tokens, model."""
        body = dict(params, input=input, encoding_format="float")
        data = self._json("POST", "/v1/embeddings", body)["data"]
        return [d["embedding"] for d in sorted(data, key=lambda d: d["index"])]

    def _openai(self, path, body, stream):
        body["stream"] = bool(stream)
        if not stream:
            return self._json("POST", path, body)
        # The request is sent now, so a 4xx surfaces here rather than at the first next().
        conn, resp = self._open("POST", path, json.dumps(body).encode(),
                                {"Content-Type": "application/json", "Accept": "text/event-stream"})
        if resp.status >= 400:
            data = resp.read()
            conn.close()
            raise _error_from(resp.status, data)
        return _chunks(conn, resp)


def _chunks(conn, resp):
    try:
        for ev in iter_sse(resp):
            if ev.data == "[DONE]":
                return
            chunk = json.loads(ev.data)
            if "error" in chunk:
                e = chunk["error"]
                raise PithError(e.get("code", 500), e.get("type", "internal"), e.get("message", ""))
            yield chunk
        raise PithError(0, "connection", "the completion stream ended without [DONE]")
    except (OSError, http.client.HTTPException) as e:
        raise PithError(0, "connection", f"completion stream broken: {e!r}") from e
    finally:
        conn.close()


def _read_program(program):
    if isinstance(program, (bytes, bytearray)):
        return bytes(program)
    with open(program, "rb") as f:
        return f.read()


class Instance:
    """A running (or finished) instance on the server."""

    def __init__(self, client, instance_id):
        self.client = client
        self.id = str(instance_id)

    def __repr__(self):
        return f"Instance({self.id!r})"

    @property
    def _base(self):
        return f"/v1/instances/{self.id}"

    def info(self):
        """{"id", "program", "args", "state", "age_s", "kv_pages", "exit"}"""
        return self.client._json("GET", self._base)

    def send(self, message):
        """Delivers a message (str or bytes) to the instance's receive()."""
        self.client.request("POST", self._base + "/messages", message, "application/octet-stream")

    def close(self):
        """Closes the inbox: the instance's pending and later receive() return CLOSED."""
        self.client.request("POST", self._base + "/close")

    def terminate(self):
        """Ends the instance (reason "killed by client")."""
        self.client.request("DELETE", self._base)

    def events(self, after=None, reconnect=5, timeout=None):
        """Iterates the instance's events until `terminated` (inclusive).

        after: start after this event id (None: from the first one still buffered).
        reconnect: how many times a dropped connection is re-established, resuming with
        Last-Event-ID from the last event seen (a non-detached instance ends 5 s after its
        last stream went away, so this happens at once).
        timeout: socket timeout; the server sends a keep-alive every 2 s, so the default of
        60 s only trips on a dead server.
        """
        last = after
        failures = 0
        while True:
            headers = {"Accept": "text/event-stream"}
            if last is not None:
                headers["Last-Event-ID"] = str(last)
            try:
                conn, resp = self.client._open("GET", self._base + "/events", headers=headers,
                                               timeout=60 if timeout is None else timeout)
            except PithError:
                failures += 1
                if failures > reconnect:
                    raise
                time.sleep(0.2 * failures)
                continue
            if resp.status >= 400:
                data = resp.read()
                conn.close()
                raise _error_from(resp.status, data)
            before = last
            try:
                for sse in iter_sse(resp):
                    data = json.loads(sse.data) if sse.data else {}
                    if sse.id is not None:
                        last = sse.id
                    yield Event(sse.id, sse.event, data)
                    if sse.event == "terminated":
                        return
            except (OSError, http.client.HTTPException):
                pass  # the connection broke: resume below
            finally:
                conn.close()
            if last != before:
                failures = 0  # it made progress: count a new outage from zero
            failures += 1
            if failures > reconnect:
                raise PithError(0, "connection", f"the event stream of instance {self.id} ended without a terminated event")
            time.sleep(0.05 * failures)

    def wait(self, timeout=None):
        """Consumes the events; returns the terminated event's data {"kind", "code", "reason"}."""
        for ev in self.events(timeout=timeout):
            if ev.type == "terminated":
                return ev.data
        return None
