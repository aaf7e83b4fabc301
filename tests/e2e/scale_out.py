#!/usr/bin/env python3
"""End-to-end: pith replicas behind stock infrastructure (docs/scale-out.md), all on loopback.

Usage: scale_out.py PITH MODEL INFERLET_DIR VENV_PYTHON [--report FILE]

Starts redis-server, three `pith serve --replica-id rN --state-store redis://...` replicas, the
pinned sglang-router (cache-aware, and a round-robin one for comparison) from the venv of
scripts/setup-python.sh, and nginx configured by scripts/pith-nginx-conf.py. Then checks:
  2. OpenAI traffic through the router: with a few shared system prompts and a KV pool that holds
     only some of them per replica, cache-aware routing gets more cached prompt tokens than
     round-robin under the same load (the fractions are printed, --report writes them as JSON);
  3. the lifecycle API through nginx: launches spread over the replicas, every later call reaches
     the replica the instance id names; `pith run --server NGINX` and the Python client unchanged;
  4. shared state: the key-value store counts launches on every replica in Redis, agent_swarm
     runs with its members on different replicas, an import of KV pages exported on another
     replica fails with a log line naming that replica;
  5. faults: kill -9 of a replica under load loses no request to the live ones, its instance's
     client gets a `terminated` event saying the replica is gone, the restarted replica rejoins
     (router and nginx send it work again; an id of its earlier run gets a clear 404); Redis
     stopping gives inferlets clear errors while the replicas keep serving, and its return
     makes the store and pub/sub work again.
Exit code 77 (ctest: skipped) only when the router package is not installed in the venv.
"""
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
from pith_harness import Server, free_port, require_inferlets  # noqa: E402
from pith_client import Client, PithError  # noqa: E402

pith, model, inferlets, venv_python = sys.argv[1:5]
report_path = sys.argv[sys.argv.index("--report") + 1] if "--report" in sys.argv else None
ROOT = os.path.join(HERE, "..", "..")
T0 = time.time()


def check(cond, msg, *ctx):
    if not cond:
        sys.exit("FAIL: " + msg + "\n" + "\n".join(str(c) for c in ctx))


def healthy(url):
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def log(msg):
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if pred():
                return
        except Exception:  # noqa: BLE001 - a service still starting
            pass
        time.sleep(0.05)
    sys.exit(f"FAIL: timed out waiting for {what}")


if not os.path.exists(venv_python) or subprocess.run(
        [venv_python, "-c", "import sglang_router"], capture_output=True).returncode != 0:
    print(f"SKIP: sglang-router is not installed in {venv_python}'s venv (scripts/setup-python.sh installs it)")
    sys.exit(77)
TOOLS = {t: shutil.which(t) or shutil.which(t, path="/usr/sbin:/usr/bin") for t in ("redis-server", "redis-cli", "nginx")}
for tool, path in TOOLS.items():
    check(path, f"{tool} not found: `make deps` installs Debian's nginx and redis-server")
echo_wasm, swarm_wasm, modular_wasm = require_inferlets(
    f"{inferlets}/echo.wasm", f"{inferlets}/agent_swarm.wasm", f"{inferlets}/modular_caching.wasm")

def watchdog():  # a hang anywhere (a stream that never ends) fails the test instead
    print("FAIL: the test did not finish in 170 s", flush=True)
    cleanup()
    os._exit(1)


watchdog_timer = threading.Timer(170, watchdog)
watchdog_timer.daemon = True
watchdog_timer.start()
tmp = tempfile.TemporaryDirectory(prefix="pith-scale-out-")
procs, servers = [], []


@atexit.register
def cleanup():  # also after a failed check: nothing may outlive the test
    for s in servers:
        if s.alive():
            s.proc.kill()
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def spawn(args, name):
    out = open(os.path.join(tmp.name, name + ".log"), "wb")
    p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    procs.append(p)
    return p


def log_of(name):
    with open(os.path.join(tmp.name, name + ".log"), "rb") as f:
        return f.read().decode("utf-8", "replace")[-3000:]


# ---- the deployment ----
redis_port = free_port()
REDIS = f"redis://127.0.0.1:{redis_port}"


def start_redis():
    return spawn([TOOLS["redis-server"], "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                  "--appendonly", "no", "--dir", tmp.name], "redis")


def redis_cli(*args):
    return subprocess.run([TOOLS["redis-cli"], "-p", str(redis_port), *args], capture_output=True,
                          text=True, timeout=10).stdout.strip()


redis = start_redis()
wait_for(lambda: redis_cli("PING") == "PONG", 10, "redis-server")

# Each replica's KV pool (64 pages of 16 tokens) holds about 4 of the 9 system prompts below
# (~215 tokens each with the chat template; tiny model: 512 B per token in f32 pages, pinned:
# the CPU's default f16 pool would hold twice as many, and round-robin would then hit the cache
# almost as often as cache-aware routing).
KV = "512K"
ports = [free_port() for _ in range(3)]
names = ["r1", "r2", "r3"]


def replica(i):
    return Server(pith, model, "--replica-id", names[i], "--state-store", REDIS, "--kv-memory", KV,
                  "--kv-dtype", "f32",
                  "--drain-timeout", "2", "--log-interval", "0", port=ports[i],
                  cache_dir=os.path.join(tmp.name, f"cache-{names[i]}"))


for i in range(3):
    servers.append(replica(i))
    servers[-1].start()
workers = [f"http://127.0.0.1:{p}" for p in ports]


def start_router(policy):
    port = free_port()
    spawn([venv_python, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port),
           "--prometheus-port", str(free_port()), "--policy", policy, "--worker-urls", *workers,
           "--health-check-interval-secs", "1", "--health-failure-threshold", "1",
           "--health-success-threshold", "1", "--health-check-endpoint", "/health"], f"router-{policy}")
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: healthy(url), 60, f"sglang-router ({policy})")
    return port, url


router_port, router_url = start_router("cache_aware")
rr_port, rr_url = start_router("round_robin")

nginx_port = free_port()
ngdir = os.path.join(tmp.name, "nginx")
os.makedirs(ngdir)
conf = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "pith-nginx-conf.py"), "--listen",
                       f"127.0.0.1:{nginx_port}", "--router", f"127.0.0.1:{router_port}", "--prefix", ngdir,
                       *sum((["--replica", f"{n}=127.0.0.1:{p}"] for n, p in zip(names, ports)), [])],
                      capture_output=True, text=True, check=True).stdout
with open(os.path.join(ngdir, "pith.conf"), "w") as f:
    f.write(conf)
spawn([TOOLS["nginx"], "-c", os.path.join(ngdir, "pith.conf"), "-g", "daemon off;"], "nginx")
NGINX = f"http://127.0.0.1:{nginx_port}"
front = Client(NGINX)
wait_for(lambda: healthy(NGINX), 20, "nginx")
log("redis, 3 replicas, 2 routers and nginx are up")


def chat(url, system, user, max_tokens=2):
    return Client(url).chat([{"role": "system", "content": system}, {"role": "user", "content": user}],
                            model="tiny-f32", max_tokens=max_tokens, temperature=0)


def metric(server, name):
    try:
        return server.metric(name)
    except KeyError:  # not exported before its first sample
        return 0.0


# ---- 2. cache-aware vs round-robin routing, same load ----
WORDS = "ocean granite lantern meadow copper violet thunder harbor pepper silver orbit canyon".split()


def system_prompts(seed):
    return [" ".join(WORDS[(seed * 7 + k * 5 + j * j) % len(WORDS)] for j in range(60)) + f" (policy {seed}-{k})"
            for k in range(9)]


def run_load(url, prompts, rounds=5):
    """One client per system prompt, all at once (a router balances by load first: sequential
    requests would all find every replica idle), each sending `rounds` requests in turn."""
    before = [metric(s, "pith_prompt_tokens_cached_total") for s in servers]
    usages, errors = [], []

    def client(k, sp):
        time.sleep(0.05 * k)  # arrive one after another, as sessions do
        for r in range(rounds):
            try:
                usages.append(chat(url, sp, f"question {r} about topic {k}", max_tokens=8)["usage"])
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(k, sp)) for k, sp in enumerate(prompts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, "OpenAI requests through the router failed", errors[:3])
    prompt_tokens = sum(u["prompt_tokens"] for u in usages)
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    per_replica = [metric(s, "pith_prompt_tokens_cached_total") - b for s, b in zip(servers, before)]
    return {"requests": len(usages), "prompt_tokens": prompt_tokens, "cached_tokens": cached,
            "cached_fraction": round(cached / prompt_tokens, 4), "cached_tokens_per_replica": per_replica}


aware = run_load(NGINX, system_prompts(1))  # nginx -> the cache-aware router
robin = run_load(rr_url, system_prompts(2))
log(f"cache-aware routing: {aware}")
log(f"round-robin routing: {robin}")
check(aware["cached_fraction"] > robin["cached_fraction"] + 0.15,
      "cache-aware routing did not raise the cached-token fraction", aware, robin)

# ---- 3. the lifecycle API through nginx, instance affinity ----
ids = []
for i in range(6):
    inst = front.launch(echo_wasm, ["hello", str(i)])
    ids.append(inst.id)
    inst.send(f"ping {i}")
    inst.send("quit")
    got = [e.text for e in inst.events() if e.type == "message"]
    check(got == ["arg 0: echo", "arg 1: hello", f"arg 2: {i}", f"echo: ping {i}"] or
          got[-1] == f"echo: ping {i}", "echo through nginx", inst.id, got)
    check(inst.info()["state"] == "finished", "instance info through nginx", inst.id)
doomed = front.launch(echo_wasm, ["until-terminated"])
doomed.send("ping")
end = None
for e in doomed.events(timeout=30):
    if e.type == "message" and e.text == "echo: ping":  # it counted its launch: now end it
        doomed.terminate()  # DELETE through nginx reaches the replica in the id
    elif e.type == "terminated":
        end = e.data
check(end and end["kind"] == "killed" and "killed by client" in end["reason"], "terminate through nginx", end)
spread = {i.split("-")[0] for i in ids}
check(len(spread) >= 2, "launches through nginx did not spread over the replicas", ids)
check(all(i.split("-")[0] in names and len(i.split("-")) == 3 for i in ids), "instance ids name the replica", ids)
cli = subprocess.run([pith, "run", "--server", NGINX, echo_wasm, "--", "from-cli"], input="hi\n",
                     capture_output=True, text=True, timeout=60)
check(cli.returncode == 0 and "echo: hi" in cli.stdout and "arg 1: from-cli" in cli.stdout,
      "pith run --server NGINX", cli.returncode, cli.stdout, cli.stderr)
log(f"lifecycle through nginx: instances {ids}; pith run --server works")

# ---- 4. shared state ----
launches = int(redis_cli("GET", "pith:kv:echo.launches") or 0)
check(launches == 8, "echo's launch counter in the shared store", launches)


def swarm(tag, n=3):
    prog = front.upload(swarm_wasm)
    coord = front.launch(prog, ["--role", "coordinator", "--swarm", tag, "--workers", str(n)])
    events = coord.events()
    first = next(events)
    check(first.type == "message" and first.text == "listening", "swarm coordinator", first)
    members = [coord.id]
    for i in range(1, n + 1):
        target = Client(workers[i % 3])  # deterministic spread: worker i on replica i % 3
        members.append(target.launch(prog, ["--role", "worker", "--swarm", tag, "--workers", str(n),
                                            "--index", str(i), "--tokens", "3"]).id)
    msgs, done = [], []

    def follow():
        for e in events:
            if e.type == "message":
                msgs.append(e.text)
            elif e.type == "terminated":
                done.append(e.data)

    threading.Thread(target=follow, daemon=True).start()
    deadline = time.time() + 30
    while not done and time.time() < deadline:  # a worker that failed ends the wait at once
        for m in members[1:]:
            info = Client(NGINX).instance(m).info()
            check(not info["exit"] or info["exit"]["code"] == 0, f"swarm {tag}: worker {m} failed", info)
        time.sleep(0.1)
    exit_ = done[0] if done else None
    check(exit_ and exit_["code"] == 0, f"agent_swarm {tag} across replicas", members, exit_, msgs)
    final = json.loads(msgs[-1])
    check([p["agent"] for p in final["pipeline"]] == list(range(n + 1)), "swarm pipeline", final)
    return members


members = swarm("spread")
check(len({m.split("-")[0] for m in members}) == 3, "swarm members on three replicas", members)
log(f"agent_swarm across replicas: {members}")

a, b = Client(workers[0]), Client(workers[1])
pre = a.run(modular_wasm, ["--prefill", "--cache", "mc", "--module", "p=You are a helpful bot.",
                           "--module", "q=The sea is blue."])
check(pre.exit and pre.exit["code"] == 0, "modular_caching prefill on r1", pre.exit, pre.logs)
use = b.run(modular_wasm, ["--cache", "mc", "--use", "p,q", "--question", "Why?"])
check(use.exit and use.exit["code"] != 0, "import on r2 of pages exported on r1 must fail", use.exit)
check(any("held by replica 'r1'" in text for _, text in use.logs), "the import's log names r1", use.logs)
log("an import on another replica fails naming the replica that holds the pages")

# ---- 5a. kill -9 a replica under load ----
victim = servers[2]
lost = Client(workers[2]).launch(echo_wasm, ["waits"])
lost_events, lost_done = [], threading.Event()


def follow():
    try:
        for e in Client(NGINX).instance(lost.id).events(timeout=30):
            lost_events.append(e)
    except PithError as e:
        lost_events.append(e)
    lost_done.set()


threading.Thread(target=follow, daemon=True).start()
wait_for(lambda: any(getattr(e, "type", "") == "message" for e in lost_events), 10, "the victim's instance stream")

results, stop_load = [], threading.Event()


def load(worker_index):
    k = 0
    while not stop_load.is_set():
        t = time.time()
        try:
            chat(NGINX, f"load {worker_index}", f"request {k}")
            results.append((t, time.time(), None))
        except Exception as e:  # noqa: BLE001 - recorded and judged below
            results.append((t, time.time(), repr(e)))
        k += 1


threads = [threading.Thread(target=load, args=(w,), daemon=True) for w in range(3)]
for t in threads:
    t.start()
time.sleep(1.0)
kill_at = time.time()
os.kill(victim.proc.pid, signal.SIGKILL)
victim.proc.wait()
time.sleep(4.0)
stop_load.set()
for t in threads:
    t.join(30)
started_after = [r for r in results if r[0] > kill_at + 0.05]
failed_after = [r for r in started_after if r[2]]
in_flight = [r for r in results if r[0] <= kill_at < r[1]]
log(f"kill -9 r3: {len(results)} requests, {len(started_after)} started after the kill, "
    f"{len(failed_after)} of them failed; {len(in_flight)} in flight at the kill")
check(len(started_after) >= 10 and not failed_after, "requests to live replicas failed", failed_after[:3])
check(all(r[2] is None for r in results if r[1] < kill_at), "requests before the kill failed")
check(lost_done.wait(20), "the victim's instance client was not told")
last = lost_events[-1]
check(getattr(last, "type", "") == "terminated" and "unreachable" in last.data.get("reason", ""),
      "the dead replica's instance ends with a clear reason", lost_events)
log(f"the dead replica's client saw: {last.data['reason']}")

# ---- 5b. the replica restarts and rejoins ----
servers[2] = replica(2)
servers[2].start()
st, body = servers[2].request("GET", f"/v1/instances/{lost.id}", check=False)
check(st == 404 and "earlier run" in json.dumps(body), "an id of the earlier run", st, body)


launched_on = set()


def rejoined():
    # The round-robin router (the cache-aware one sends idle-time requests to the first idle
    # replica) and nginx's launches (least connections, round-robin among equals).
    chat(rr_url, "rejoin", "are you back?")
    inst = front.launch(echo_wasm, ["--no-wait"])
    inst.wait(timeout=30)
    launched_on.add(inst.id.split("-")[0])
    return metric(servers[2], "pith_openai_requests_total") > 0 and "r3" in launched_on


deadline = time.time() + 30
while time.time() < deadline and not rejoined():
    time.sleep(0.1)
check(time.time() < deadline, "the restarted replica got no work from the router and nginx",
      launched_on, log_of("router-round_robin"))
log("r3 restarted and rejoined (router and nginx send it work)")

# ---- 5c. Redis stops and returns ----
redis.kill()
redis.wait()
r = Client(workers[0]).run(echo_wasm, ["--no-wait"])
check(r.exit and r.exit["code"] == 1 and any("state store" in t and "unreachable" in t for _, t in r.logs),
      "with Redis down the store fails with a clear error", r.exit, r.logs)
check(healthy(workers[0]) and chat(NGINX, "redis down", "still serving?"), "serving without Redis")
check(metric(servers[0], "pith_state_store_failures_total") > 0, "the failures metric")
wait_for(lambda: metric(servers[0], "pith_state_store_subscribed") == 0, 5, "the subscribed gauge to drop")
log(f"Redis down: inferlets see {[t for _, t in r.logs if 'state store' in t][0]!r}; replicas keep serving")
redis = start_redis()
wait_for(lambda: redis_cli("PING") == "PONG", 10, "redis-server restart")
wait_for(lambda: Client(workers[0]).run(echo_wasm, ["--no-wait"]).exit["code"] == 0, 10,
         "the store working again after Redis returned")
wait_for(lambda: all(metric(s, "pith_state_store_subscribed") == 1 for s in servers), 10,
         "every replica to subscribe again")
swarm("after-redis", n=2)
log("Redis back: store and pub/sub work again")

if report_path:
    with open(report_path, "w") as f:
        json.dump({"cache_aware": aware, "round_robin": robin, "kill": {
            "requests": len(results), "started_after_kill": len(started_after),
            "failed_after_kill": len(failed_after), "in_flight_at_kill": len(in_flight)}}, f, indent=1)

for s in servers:
    s.proc.send_signal(signal.SIGTERM)
    try:
        s.proc.wait(30)
    except subprocess.TimeoutExpired:
        pass
    text = s.server_log()
    code = s.stop()
    check(code == 0, "a replica did not exit 0 on SIGTERM", code, text[-4000:])
for p in procs:
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
log("PASS")
tmp.cleanup()  # os._exit skips the finalizer that would remove it
os._exit(0)  # the watchdog timer thread must not keep the process alive
