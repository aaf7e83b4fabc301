"""Test harness: starts the real `pith serve` on a free loopback port and talks to its HTTP API.

    with Server(pith, model) as s:
        r = s.run(f"{inferlets}/text_completion.wasm", ["--prompt", "hi"])
        assert r.exit["kind"] == "exited" and r.exit["code"] == 0
        print(r.messages, r.logs, s.metric("pith_prompt_tokens_computed_total"))

Standard library only (urllib, http.client), so the e2e tests need nothing beyond python3.

Inferlets that were not built make a test fail, never skip (`require_inferlets`, also checked by
`Server.upload`): the message names the missing file and how to build it. The unit tests
(tests/unit/built_inferlet.h) and the Python client's tests follow the same policy.

PITH_TEST_DEVICE (e.g. `cuda`, set by `make test-gpu`) is passed to every `pith serve` the harness
starts as `--device`; unset, the server picks its default device. A test whose model family the
CUDA backend does not run yet says why with `cpu_only="..."`: its servers then get `--device cpu`
under PITH_TEST_DEVICE (and print the reason), so the GPU run checks everything else.
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time


class MissingInferlet(AssertionError):
    pass


def missing_inferlet_message(path):
    name = os.path.splitext(os.path.basename(path))[0]
    return (f"{path} is missing: build it with `cmake --build BUILD --target inferlet_{name}` (or "
            "`make build`); inferlets need clang-14, lld-14 and wasi-libc, which `make deps` installs")


def require_inferlets(*paths):
    """Fails (raises MissingInferlet) unless every path is a built inferlet; returns the paths."""
    for p in paths:
        if not os.path.isfile(p):
            raise MissingInferlet(missing_inferlet_message(p))
    return paths[0] if len(paths) == 1 else paths


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HttpError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body!r}")
        self.status = status
        self.body = body


class RunResult:
    def __init__(self, instance_id):
        self.id = instance_id
        self.messages = []   # send() payloads, in order (str)
        self.logs = []       # (level, text)
        self.exit = None     # {"kind", "code", "reason"}

    def ok(self):
        return self.exit is not None and self.exit["kind"] == "exited" and self.exit["code"] == 0


def shared_native_cache(pith):
    """One native-code cache for every server the suite starts (beside the pith binary's build
    folder): each inferlet is compiled by the C compiler once per build, not once per server
    start (the OpenAI program alone is ~9 CPU-seconds of cc). Tests that pass their own cache_dir
    keep a cold cache; PITH_E2E_NATIVE_CACHE=off gives every server its own."""
    setting = os.environ.get("PITH_E2E_NATIVE_CACHE", "")
    if setting == "off":
        return None
    return setting or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(pith))),
                                   "e2e-native-cache")


class Server:
    """A `pith serve` child process. Extra arguments go to `pith serve` unchanged."""

    def __init__(self, pith, model, *extra, api_key=None, env=None, startup_timeout=120, cache_dir=None,
                 port=None, cpu_only=None):
        self.pith, self.model, self.extra = pith, model, list(extra)
        self.cpu_only = cpu_only  # why this model cannot run on PITH_TEST_DEVICE (a GPU) yet
        self.fixed_port = port  # default: a free port per start
        self.cache_dir = cache_dir  # default: a fresh temporary directory per start
        self.api_key = api_key
        self.env = env
        self.startup_timeout = startup_timeout
        self.proc = None
        self.port = None
        self._tmp = None

    # ---- lifecycle ----
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        self.port = self.fixed_port or free_port()
        self._tmp = tempfile.TemporaryDirectory(prefix="pith-e2e-")
        args = [self.pith, "serve", "-m", self.model, "--host", "127.0.0.1", "--port", str(self.port),
                "--cache-dir", self.cache_dir or os.path.join(self._tmp.name, "cache")] + self.extra
        shared = shared_native_cache(self.pith)
        if shared and self.cache_dir is None and "--native-cache-dir" not in self.extra:
            args += ["--native-cache-dir", shared]
        if self.api_key and "--api-key" not in self.extra:
            args += ["--api-key", self.api_key]
        device = os.environ.get("PITH_TEST_DEVICE")
        if device and "--device" not in self.extra:
            if self.cpu_only:
                print(f"note: serving on the CPU, not {device}: {self.cpu_only}", flush=True)
                device = "cpu"
            args += ["--device", device]
        self.log_path = os.path.join(self._tmp.name, "server.log")
        self._log = open(self.log_path, "wb")
        env = dict(os.environ, **(self.env or {}))
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + self.startup_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pith serve exited with {self.proc.returncode}:\n{self.server_log()}")
            try:
                status, _ = self.request("GET", "/health", check=False)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"pith serve did not become healthy:\n{self.server_log()}")

    def stop(self, timeout=60):
        """SIGTERM, and the server must exit 0 (graceful shutdown: within --drain-timeout, 30 s
        by default, for requests in flight and native builds still running)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self._log.close()
        self.proc = None
        if self._tmp:
            self._tmp.cleanup()
            self._tmp = None
        return code

    def server_log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    # ---- HTTP ----
    def connection(self, timeout=300):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def headers(self, extra=None, auth=True):
        h = {}
        if auth and self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        h.update(extra or {})
        return h

    def request(self, method, path, body=None, headers=None, check=True, auth=True, timeout=300):
        """Returns (status, parsed JSON or raw bytes). check=True raises HttpError on >= 400."""
        conn = self.connection(timeout)
        h = self.headers(headers, auth)
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            body = body.encode()
        try:
            conn.request(method, path, body=body, headers=h)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        if resp.getheader("Content-Type", "").startswith("application/json") and data:
            data = json.loads(data)
        if check and resp.status >= 400:
            raise HttpError(resp.status, data)
        return resp.status, data

    # ---- programs and instances ----
    def upload(self, wasm_path):
        require_inferlets(wasm_path)
        with open(wasm_path, "rb") as f:
            _, body = self.request("POST", "/v1/programs", f.read(), {"Content-Type": "application/wasm"})
        return body["hash"]

    def launch(self, program_hash, args=(), detach=True):
        _, body = self.request("POST", "/v1/instances",
                               {"program": program_hash, "args": list(args), "detach": detach})
        return body["id"]

    def send(self, instance_id, message):
        self.request("POST", f"/v1/instances/{instance_id}/messages", message,
                     {"Content-Type": "application/octet-stream"})

    def close_input(self, instance_id):
        self.request("POST", f"/v1/instances/{instance_id}/close")

    def events(self, instance_id, after=None, timeout=300):
        """Yields (id, event, data) from the instance's SSE stream until it closes."""
        conn = self.connection(timeout)
        path = f"/v1/instances/{instance_id}/events" + (f"?after={after}" if after is not None else "")
        conn.request("GET", path, headers=self.headers({"Accept": "text/event-stream"}))
        resp = conn.getresponse()
        if resp.status != 200:
            raise HttpError(resp.status, resp.read())
        yield from parse_sse(resp)
        conn.close()

    def run(self, wasm_path, args=(), messages=(), close_input=True, timeout=300):
        """Uploads, launches, sends `messages`, collects every event until `terminated`."""
        r = RunResult(self.launch(self.upload(wasm_path), args))
        for m in messages:
            self.send(r.id, m)
        if close_input:
            self.close_input(r.id)
        for _, event, data in self.events(r.id, timeout=timeout):
            d = json.loads(data)
            if event == "message":
                r.messages.append(d["text"])
            elif event == "log":
                r.logs.append((d["level"], d["text"]))
            elif event == "terminated":
                r.exit = d
        return r

    # ---- metrics ----
    def metrics_text(self):
        _, body = self.request("GET", "/metrics")
        return body.decode() if isinstance(body, bytes) else body

    def metric(self, name, labels=None):
        """The value of one series (sum over label sets unless `labels` selects one)."""
        total, found = 0.0, False
        for line in self.metrics_text().splitlines():
            if line.startswith("#"):
                continue
            m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$', line)
            if not m or m.group(1) != name:
                continue
            if labels and not all(f'{k}="{v}"' in (m.group(2) or "") for k, v in labels.items()):
                continue
            total += float(m.group(3))
            found = True
        if not found:
            raise KeyError(name)
        return total


def model_gen_args(oracle_dir, name):
    """(family, extra `pith model gen` arguments) of a tiny model NAME: a family, or a variant of
    ORACLE_DIR/variants.json (a family's tiny preset with config options changed)."""
    variants = json.load(open(os.path.join(oracle_dir, "variants.json")))
    if name not in variants:
        return name, []
    args = []
    for o in variants[name]["options"]:
        args += ["--option", o]
    return variants[name]["arch"], args


def parse_sse(stream):
    """Parses a text/event-stream: yields (id, event, data) per event."""
    ev_id, event, data = None, "message", []
    for raw in stream:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield ev_id, event, "\n".join(data)
            ev_id, event, data = None, "message", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "id":
            ev_id = int(value)
        elif field == "event":
            event = value
        elif field == "data":
            data.append(value)
