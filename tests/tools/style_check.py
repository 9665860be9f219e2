"""style_check.py FILES... - the layout rules tq's C code keeps (DEVELOPERS
style): no line over 100 columns, one statement a line (no two semicolons
outside a for header on one line), no nested conditional operators.  Comma
operators are clang's -Wcomma (tests/cli/style.sh).  Prints one line per
violation, FILE:LINE: what; exit 1 if any."""
import re
import sys

LIMIT = 100


def mask(s):
    """s with comments, string and character literals and preprocessor lines
    blanked (same length, newlines kept), so that only code is scanned"""
    out = list(s)
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if s.startswith("//", i):
            j = s.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif s.startswith("/*", i):
            j = s.find("*/", i + 2) + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while s[j] != c:
                j += 2 if s[j] == "\\" else 1
            out[i + 1:j] = " " * (j - i - 1)
            i = j + 1
        elif c == "#" and (i == 0 or s[i - 1] == "\n" or s[:i].rstrip(" \t").endswith("\n")):
            e = i
            while True:
                e = s.find("\n", e)
                if e < 0:
                    e = n
                    break
                if s[e - 1] == "\\":
                    e += 1
                    continue
                break
            for k in range(i, e):
                if out[k] != "\n":
                    out[k] = " "
            i = e
        else:
            i += 1
    return "".join(out)


def ternary_extent(m, q):
    """the end (exclusive) of the conditional whose '?' is at q"""
    depth, pending, i = 0, 1, q + 1
    while i < len(m):
        c = m[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return i
            depth -= 1
        elif depth == 0:
            if c == "?":
                pending += 1
            elif c == ":":
                pending -= 1
                if pending < 0:
                    return i
            elif c in ",;" and pending == 0:
                return i
            elif c == ";":
                return i
        i += 1
    return i


def condition_start(m, q):
    depth, i = 0, q - 1
    while i >= 0:
        c = m[i]
        if c == "}" and depth == 0:
            return i + 1
        if c in ")]}":
            depth += 1
        elif c in "([{":
            if depth == 0:
                return i + 1
            depth -= 1
        elif depth == 0 and c in ",;=?:":
            return i + 1
        i -= 1
    return 0


def check(path):
    src = open(path, encoding="utf-8").read()
    m = mask(src)
    line_of = lambda pos: src.count("\n", 0, pos) + 1
    bad = []
    for no, line in enumerate(src.split("\n"), 1):
        if len(line) > LIMIT:
            bad.append((no, f"{len(line)} columns (limit {LIMIT})"))
    # two statements on one line: semicolons at paren depth 0
    depth = 0
    for no, line in enumerate(m.split("\n"), 1):
        semis = 0
        for c in line:
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif c == ";" and depth == 0:
                semis += 1
        if semis > 1:
            bad.append((no, "more than one statement on the line"))
    qs = [i for i, c in enumerate(m) if c == "?"]
    nested = set()
    for q in qs:
        end = ternary_extent(m, q)
        start = condition_start(m, q)
        inner = [r for r in qs if r != q and start <= r < end]
        if inner:
            nested.add(line_of(q))
    for no in sorted(nested):
        bad.append((no, "nested conditional operator"))
    return [(path, no, what) for no, what in sorted(bad)]


def main():
    found = []
    for p in sys.argv[1:]:
        found += check(p)
    for p, no, what in found:
        print(f"{p}:{no}: {what}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
