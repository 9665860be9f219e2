"""tq slot proxy (issue 54), against the real llama-server (tests/setup_server.sh) with SmolLM2-135M
and Gemma 3 270M, default flags, driven by real clients (the openai package, tests/clients.txt;
curl -N for a stream):

- conversations: six turns on a system prompt of over 2,000 tokens (the llama.cpp server's
  README, a package's text), the server restarted before every turn: each later turn's
  server processes at most what the turn adds to the previous prompt + 8 tokens, also when the
  client sends back only the first half of each answer; the first turn, nothing stored yet,
  processes all of its prompt (make test-full also sends the last turn straight to a
  restarted server: it processes all of it);
- a stream reaches the client event by event while the server generates (curl -N);
- --preset lossless: the answer after a restore through the proxy equals the answer the same
  server gives after restoring its own raw save (greedy, 32 tokens), and a streamed answer's
  content equals the unstreamed one, each from a fresh restore;
- SIGTERM drains: the proxy exits 0, every save complete, no slot file left.
- the same by /completion on a tiny generated hybrid model (qwen3next, a recurrent state), half
  answers sent back;
- the half-answers conversation on Gemma 3 with --swa-full.
make test runs Gemma 3's conversation with half answers only and leaves --swa-full's to make
test-full (TQ_TEST_FULL=1), which runs every conversation.
Every server and proxy is stopped at the end, also on failure."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED, FULL, fail, gemma, need, ok, smollm2  # noqa: E402
from _proxy import Proxy, raw_files  # noqa: E402
from _server import Server, server_binary, servers_stopped  # noqa: E402
from _texts import source_text  # noqa: E402

TURNS = 6
ANSWER = 24  # tokens an answer may have


def system_prompt():
    """Over 2,000 tokens of the llama.cpp server's README (a package's text; checked)."""
    return source_text("reference").decode()[:6400]


def questions():
    """A user's turns: sentences of the Lee corpus (a package's text)."""
    lines = [l.strip() for l in source_text("prose").decode().splitlines() if len(l.strip()) > 80]
    return [l[:200] for l in lines[:TURNS]]


def chat(client, messages, **kw):
    """One chat turn through the openai client: the answer's text, its prompt tokens and the
    tokens the server processed (timings.prompt_n)."""
    r = client.chat.completions.create(model="m", messages=messages, max_tokens=ANSWER,
                                       temperature=0, **kw)
    extra = r.model_extra or {}
    return r.choices[0].message.content or "", r.usage.prompt_tokens, extra["timings"]["prompt_n"]


def conversation(server, proxy, label, halve):
    """TURNS turns through the proxy, the server restarted before each; the client sends back
    each answer whole, or its first half (halve).  Returns the last turn's messages."""
    from openai import OpenAI

    client = OpenAI(base_url=proxy.url + "/v1", api_key="none", max_retries=0, timeout=600)
    messages = [{"role": "system", "content": system_prompt()}]
    prev = None
    worst = []
    done = len(proxy.lines(r"^tq slot: /\S*completion\S* \d+ slot"))
    stored_before = any(Path(proxy.store).rglob("*.tqkv"))
    for i, q in enumerate(questions()):
        messages.append({"role": "user", "content": q})
        if i:
            server.restart()
        answer, n_prompt, _ = chat(client, messages)
        # the turn's saves complete before the server goes down (a restart racing a save
        # loses it, as it would without a test)
        proxy.wait_requests(done + i + 1)
        proxy.wait_idle()
        # what the server processed for the turn, the prompt's end on windowed models included
        processed = int(re.findall(r"server processed (\d+)", proxy.lines(r"slot \d+: prompt")[-1])[0])
        if i == 0 and n_prompt < 2000:
            fail(f"the_system_prompt_has_2000_tokens_{label}", f"{n_prompt} tokens")
        if i == 0 and not stored_before:  # the control: what a turn costs with nothing kept
            name = f"a_first_turn_with_nothing_stored_processes_all_{label}"
            if processed < n_prompt - 1:
                fail(name, f"processed {processed} of {n_prompt}")
            else:
                ok(name)
        if prev is not None:
            allowed = n_prompt - prev + 8
            worst.append((processed, allowed))
        messages.append({"role": "assistant", "content": answer[:len(answer) // 2] if halve else answer})
        prev = n_prompt
    name = f"every_turn_restores_after_a_restart_{label}{'_half_answers' if halve else ''}"
    print(f"  {name}: (processed, allowed) turn by turn from the second: {worst}")
    bad = [(i + 2, p, a) for i, (p, a) in enumerate(worst) if p > a]
    if bad or len(worst) != TURNS - 1:
        fail(name, f"turns processing more than they add + 8 (turn, processed, allowed): {bad}; "
                   f"all: {worst}; requests: {proxy.lines('slot 0: prompt')[-TURNS:]}; notes: "
                   f"{proxy.lines('not saved|not stored|once more|refused|note')}")
    else:
        ok(name)
    return messages[:-1]


def prompt_of(server, messages):
    """A chat's prompt tokens as the server makes them (its template, then its tokenizer)."""
    text = server.post("/apply-template", {"messages": messages})["prompt"]
    return server.post("/tokenize", {"content": text, "add_special": True})["tokens"]


def is_windowed(server):
    return "gemma" in server.model.name


def straight_processes_all(server, messages, label):
    """The last turn straight to a restarted server: the whole prompt is processed."""
    from openai import OpenAI

    server.restart()
    client = OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="none", max_retries=0,
                    timeout=600)
    _, n_prompt, processed = chat(client, messages)
    name = f"without_the_proxy_a_restarted_server_processes_all_{label}"
    if processed < n_prompt - 1:
        fail(name, f"processed {processed} of {n_prompt}")
    else:
        ok(name)


def streamed_event_by_event(server, proxy, label):
    """curl -N through the proxy: the events arrive while the server generates, not at once."""
    body = {"messages": [{"role": "system", "content": system_prompt()},
                         {"role": "user", "content": questions()[0]}],
            "max_tokens": 48, "temperature": 0, "stream": True, "ignore_eos": True}
    p = subprocess.Popen(["curl", "-sN", "--max-time", "300", "-H", "Content-Type: application/json",
                          "-d", json.dumps(body), proxy.url + "/v1/chat/completions"],
                         stdout=subprocess.PIPE)
    times = []
    for line in p.stdout:
        if line.startswith(b"data: ") and b"[DONE]" not in line:
            times.append(time.monotonic())
    p.wait()
    name = f"a_stream_arrives_event_by_event_{label}"
    # 48 tokens: the first events arrive well before the last (each token's decode apart)
    spread = times[-1] - times[0] if times else 0
    gaps = sum(1 for a, b in zip(times, times[1:]) if b - a > 0.002)
    if p.returncode or len(times) < 40 or gaps < 20:
        fail(name, f"curl exit {p.returncode}, {len(times)} events over {spread:.3f} s, "
                   f"{gaps} apart")
    else:
        ok(name)


def lossless_equal(server, store, label):
    """--preset lossless: through the proxy after a restart, the answer equals the server's
    own after restoring its raw save of the same slot; a streamed one equals it too."""
    from openai import OpenAI

    Path(store).mkdir(parents=True, exist_ok=True)
    with Proxy(server, store, "--preset", "lossless", log=Path(store).parent / "lossless.log") as proxy:
        client = OpenAI(base_url=proxy.url + "/v1", api_key="none", max_retries=0, timeout=600)
        messages = [{"role": "system", "content": system_prompt()},
                    {"role": "user", "content": questions()[0]}]
        answer, _, _ = chat(client, messages)
        proxy.wait_requests(1)
        proxy.wait_idle()
        first = prompt_of(server, messages)
        messages += [{"role": "assistant", "content": answer},
                     {"role": "user", "content": questions()[1]}]
        kw = {"max_tokens": 32, "temperature": 0, "top_k": 1, "seed": 1, "ignore_eos": True}
        if is_windowed(server):
            # the proxy restores at the first prompt's end and processes the second prompt
            # alone before the request: the server's own raw save of that point, and the same
            # two calls after it
            server.restart()
            server.post("/completion", {"prompt": first, "n_predict": 0, "id_slot": 0})
        server.post("/slots/0?action=save", {"filename": "raw-lossless.bin"})
        server.restart()
        server.post("/slots/0?action=restore", {"filename": "raw-lossless.bin"})
        (Path(server.slots) / "raw-lossless.bin").unlink()
        if is_windowed(server):
            server.post("/completion", {"prompt": prompt_of(server, messages), "n_predict": 0,
                                        "id_slot": 0})
        direct = OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="none", max_retries=0)
        want = direct.chat.completions.create(model="m", messages=messages, extra_body=kw,
                                              max_tokens=32).choices[0].message.content
        server.restart()
        got = client.chat.completions.create(model="m", messages=messages, extra_body=kw,
                                             max_tokens=32).choices[0].message.content
        server.restart()
        parts = client.chat.completions.create(model="m", messages=messages, extra_body=kw,
                                               max_tokens=32, stream=True)
        streamed = "".join(c.choices[0].delta.content or "" for c in parts if c.choices)
    restored = proxy.lines(r"restored [1-9]\d* from")
    name = f"lossless_restore_answers_as_the_servers_raw_restore_{label}"
    if got != want or len(restored) < 2:
        fail(name, f"through the proxy {got!r}, the raw restore {want!r}; restores: {restored}")
    else:
        ok(name)
    name = f"a_streamed_answer_equals_the_unstreamed_one_{label}"
    if streamed != got:
        fail(name, f"streamed {streamed!r}, unstreamed {got!r}")
    else:
        ok(name)


def hybrid_conversation(binary, tmp):
    """The same conversation by /completion on a tiny generated hybrid (qwen3next: a recurrent
    state on three layers of four), the server restarted before every turn, half of each
    answer sent back: each turn processes at most what it adds + 8."""
    import urllib.request

    from _tiny_models import build

    model = build("qwen3next", tmp / "models")
    slots = tmp / "hybrid-slots"
    slots.mkdir()

    def complete(url, prompt):
        req = urllib.request.Request(url + "/completion", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"prompt": prompt, "n_predict": 16,
                                                      "temperature": 0}).encode())
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.loads(r.read())

    words = source_text("prose").decode().split()
    prompt = " ".join(words[:250])
    worst = []
    prev = None
    with Server(binary, model, slots) as server, \
            Proxy(server, tmp / "hybrid-store", "--min-tokens", "256",
                  log=tmp / "hybrid.log") as proxy:
        for i in range(TURNS):
            if i:
                server.restart()
            r = complete(proxy.url, prompt)
            n_prompt = r["tokens_evaluated"]
            proxy.wait_requests(i + 1)
            proxy.wait_idle()
            processed = int(re.findall(r"server processed (\d+)", proxy.lines(r"slot \d+: prompt")[-1])[0])
            if prev is not None:
                worst.append((processed, n_prompt - prev + 8))
            prev = n_prompt
            prompt += r["content"][:len(r["content"]) // 2] + " " + " ".join(words[250 + 12 * i:262 + 12 * i])
    name = "every_turn_restores_after_a_restart_hybrid_half_answers"
    print(f"  {name}: (processed, allowed) turn by turn from the second: {worst}")
    if any(p > a for p, a in worst) or len(worst) != TURNS - 1:
        fail(name, f"(processed, allowed): {worst}; requests: {proxy.lines('slot 0: prompt')}; "
                   f"notes: {proxy.lines('not saved|not stored|once more|refused|note')}")
    else:
        ok(name)


def run_model(binary, model, label, tmp):
    slots = tmp / f"{label}-slots"
    store = tmp / f"{label}-store"
    slots.mkdir()
    with Server(binary, model, slots) as server:
        with Proxy(server, store) as proxy:
            # both conversations where they are cheap (SmolLM2) or asked for: Gemma's whole
            # answers restore as its halves do, the half answers being the harder case
            whole = FULL or label == "smollm2"
            if whole:
                conversation(server, proxy, label, halve=False)
            messages = conversation(server, proxy, label, halve=True)
            streamed_event_by_event(server, proxy, label)
            proxy.wait_requests(TURNS * (2 if whole else 1) + 1)
            proxy.wait_idle()
        name = f"sigterm_drains_and_leaves_no_slot_file_{label}"
        left = raw_files(slots)
        pending = proxy.lines("not saved|not stored")
        if proxy.exit_code != 0 or left or pending or "proxy: stopped" not in proxy.text():
            fail(name, f"exit {proxy.exit_code}, files left {left}, {pending}")
        else:
            ok(name)
        if FULL:  # the same control as the first turn's, by the last turn straight
            straight_processes_all(server, messages, label)
        lossless_equal(server, tmp / f"{label}-lossless", label)


def swa_full_conversation(binary, tmp):
    """Gemma 3 with --swa-full (its sliding-window cache kept whole, as users run it for
    prompt caching): the half-answers conversation restores every turn after a restart."""
    slots = tmp / "swa-full-slots"
    slots.mkdir()
    with Server(binary, gemma(), slots, "--swa-full") as server:
        with Proxy(server, tmp / "swa-full-store", log=tmp / "swa-full.log") as proxy:
            conversation(server, proxy, "gemma3_swa_full", halve=True)


def main():
    need("openai")
    binary = server_binary()
    models = {"smollm2": smollm2, "gemma3": gemma, "hybrid": None, "gemma3_swa_full": None}
    only = sys.argv[1:] or list(models)  # a model's name alone: that model's behaviours
    if not FULL and not sys.argv[1:]:
        only.remove("gemma3_swa_full")
    with tempfile.TemporaryDirectory() as d:
        for label in only:
            tmp = Path(d) / label
            tmp.mkdir()
            if models[label]:
                run_model(binary, models[label](), label, tmp)
            elif label == "hybrid":
                hybrid_conversation(binary, tmp)
            else:
                swa_full_conversation(binary, tmp)
            if os.environ.get("TQ_KEEP"):  # a developer's look at the logs
                subprocess.run(["cp", "-r", str(tmp), os.environ["TQ_KEEP"]])
    servers_stopped()
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
