"""pith_client against a real `pith serve` on the tiny model (fixtures in conftest.py)."""
import hashlib
import socket
import threading
import time

import pytest

from conftest import API_KEY
from pith_client import Client, PithError


# ---------------------------------------------------------------- health, programs

def test_health_and_models(client):
    h = client.health()
    assert h["status"] == "ok"
    models = client.models()
    assert [m["id"] for m in models] == [h["model"]]


def test_upload_by_path_and_bytes(client, inferlet):
    path = inferlet("echo")
    data = open(path, "rb").read()
    digest = hashlib.sha256(data).hexdigest()
    assert client.upload(path) == digest
    assert client.upload(data) == digest          # same bytes: same program
    assert client.ensure_program(path) == digest  # present: no upload
    assert client.program_exists(digest)
    assert not client.program_exists("0" * 64)
    entry = [p for p in client.programs() if p["hash"] == digest]
    assert len(entry) == 1 and entry[0]["size"] == len(data) and not entry[0]["builtin"]


def test_delete_program(client, inferlet):
    data = open(inferlet("traps"), "rb").read()
    digest = client.upload(data)
    client.delete_program(digest)
    assert not client.program_exists(digest)
    with pytest.raises(PithError) as e:
        client.delete_program(digest)
    assert e.value.status == 404 and e.value.type == "not_found"


def test_invalid_upload_is_400(client):
    with pytest.raises(PithError) as e:
        client.upload(b"not a wasm module")
    assert e.value.status == 400 and e.value.type == "bad_request"


# ---------------------------------------------------------------- instances

def test_run_text_completion(client, inferlet):
    r = client.run(inferlet("text_completion"), ["--prompt", "Hello", "--max-tokens", "4", "--tokens"])
    assert r.ok, r.exit
    ids = r.messages[-1].split(",")
    assert len(ids) == 4 and all(i.isdigit() for i in ids), r.messages
    assert any(level == "info" and text.startswith("finish: length") for level, text in r.logs), r.logs


def test_messages_round_trip(client, inferlet):
    inst = client.launch(inferlet("echo"), ["one"])
    inst.send("first")
    inst.send(b"second \xff")  # arbitrary bytes; the event shows U+FFFD for the invalid one
    inst.close()
    events = list(inst.events())
    texts = [e.text for e in events if e.type == "message"]
    assert texts[1:] == ["arg 1: one", "echo: first", "echo: second \ufffd"], texts
    assert any(e.type == "log" and e.text.startswith("hello from instance") for e in events)
    assert events[-1].type == "terminated" and events[-1].data["kind"] == "exited"
    ids = [e.id for e in events]
    assert ids == list(range(ids[0], ids[0] + len(ids))), ids
    # A finished instance's events stay readable, and `after` resumes past an id.
    again = list(inst.events(after=ids[1]))
    assert [e.id for e in again] == ids[2:]
    info = inst.info()
    assert info["state"] == "finished" and info["exit"]["code"] == 0


def test_send_after_close_is_409(client, inferlet):
    inst = client.launch(inferlet("echo"), ["--no-wait"])
    assert inst.wait()["kind"] == "exited"
    with pytest.raises(PithError) as e:
        inst.send("late")
    assert e.value.status == 409


def test_trap_reason_and_terminate(client, inferlet):
    trapped = client.run(inferlet("traps"), ["unreachable"])
    assert trapped.exit["kind"] == "trapped" and "unreachable" in trapped.exit["reason"], trapped.exit
    assert trapped.messages == ["doing unreachable"]

    waiting = client.launch(inferlet("echo"), [])  # waits for messages until its inbox closes
    assert waiting.id in [i["id"] for i in client.ps()]
    waiting.terminate()
    exit = waiting.wait()
    assert exit["kind"] == "killed" and "by client" in exit["reason"], exit
    assert waiting.id not in [i["id"] for i in client.ps()]
    assert waiting.id in [i["id"] for i in client.ps(all=True)]


def test_unknown_program_and_instance_are_404(client):
    with pytest.raises(PithError) as e:
        client.launch("ab" * 32)
    assert (e.value.status, e.value.type) == (404, "not_found")
    with pytest.raises(PithError) as e:
        client.instance("999999999").info()
    assert e.value.status == 404


class CuttingProxy:
    """A TCP proxy in front of the server that drops its first connection right after the
    first complete SSE event of the response, so the client has to reconnect."""

    def __init__(self, target_port):
        self.target = target_port
        self.connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(c, self.connections == 1), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _serve(self, c, cut):
        u = socket.create_connection(("127.0.0.1", self.target))
        threading.Thread(target=self._pump, args=(c, u), daemon=True).start()
        if not cut:
            return self._pump(u, c)
        buf = b""
        while data := u.recv(65536):
            buf += data
            start = buf.find(b"data: ")
            end = buf.find(b"\n\n", start) if start >= 0 else -1
            if end >= 0:
                c.sendall(buf[:end + 2])
                break
        # shutdown, not just close: the pump thread's pending recv() keeps a closed fd open.
        for sock in (c, u):
            sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self):
        self.sock.close()


def test_events_reconnect_with_last_event_id(server, client, inferlet):
    inst = client.launch(inferlet("echo"), ["--no-wait", "a", "b", "c"])
    full = list(inst.events())
    proxy = CuttingProxy(server.port)
    try:
        via_proxy = Client(f"http://127.0.0.1:{proxy.port}").instance(inst.id)
        t0 = time.time()
        resumed = list(via_proxy.events(timeout=30))
        elapsed = time.time() - t0
    finally:
        proxy.close()
    assert proxy.connections == 2  # it reconnected once...
    assert elapsed < 10, elapsed   # ...because the cut was seen, not after a socket timeout
    assert [(e.id, e.type, e.data) for e in resumed] == [(e.id, e.type, e.data) for e in full]


# ---------------------------------------------------------------- OpenAI

def test_complete_stream_matches_non_stream(client):
    r = client.complete("Once upon a time", max_tokens=5, temperature=0)
    choice = r["choices"][0]
    assert r["object"] == "text_completion" and isinstance(choice["text"], str)
    assert r["usage"]["completion_tokens"] <= 5 and r["usage"]["prompt_tokens"] > 0
    chunks = list(client.complete("Once upon a time", max_tokens=5, temperature=0, stream=True))
    assert chunks and all(c["object"] == "text_completion" for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == choice["text"]  # greedy: same text
    assert chunks[-1]["choices"][0]["finish_reason"] == choice["finish_reason"]


def test_chat_stream_matches_non_stream(client):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    r = client.chat(messages, max_tokens=4, temperature=0)
    msg = r["choices"][0]["message"]
    assert r["object"] == "chat.completion" and msg["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or ""
                   for c in client.chat(messages, max_tokens=4, temperature=0, stream=True))
    assert text == msg["content"]
    assert client.chat("Hi", max_tokens=2)["choices"][0]["message"]["role"] == "assistant"


def test_embed_one_vector_per_input(client):
    one, two, again = client.embed(["first text", "second text", "first text"])
    assert len(one) == len(two) > 0
    assert abs(sum(x * x for x in one) - 1) < 1e-4  # unit length
    assert max(abs(a - b) for a, b in zip(one, again)) < 1e-5
    assert max(abs(a - b) for a, b in zip(one, two)) > 1e-3
    assert len(client.embed("first text", dimensions=4)[0]) == 4
    with pytest.raises(PithError) as e:
        client.embed("")
    assert e.value.status == 400


def test_openai_bad_request_is_raised_before_iteration(client):
    with pytest.raises(PithError) as e:
        client.complete("x", max_tokens=-3, stream=True)
    assert e.value.status == 400 and e.value.type == "invalid_request_error"


# ---------------------------------------------------------------- auth, transport

def test_api_key(keyed_server):
    url = f"http://127.0.0.1:{keyed_server.port}"
    anonymous = Client(url, api_key="")
    assert anonymous.health()["status"] == "ok"  # /health needs no key
    for bad in (anonymous, Client(url, api_key="wrong")):
        with pytest.raises(PithError) as e:
            bad.programs()
        assert (e.value.status, e.value.type) == (401, "unauthorized")
    assert isinstance(Client(url, api_key=API_KEY).programs(), list)


def test_api_key_from_environment(keyed_server, monkeypatch):
    monkeypatch.setenv("PITH_SERVER", f"http://127.0.0.1:{keyed_server.port}")
    monkeypatch.setenv("PITH_API_KEY", API_KEY)
    assert isinstance(Client().instances(), list)


def test_connection_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PithError) as e:
        Client(f"127.0.0.1:{port}").programs()
    assert e.value.status == 0 and e.value.type == "connection" and str(port) in e.value.message
