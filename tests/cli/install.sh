#!/bin/sh
# make install puts tq, libtq, tq.h, the man pages and tq.pc under PREFIX
# (DESTDIR-staged), and a program built with `pkg-config --cflags --libs
# --static tq` alone links against the installed library and runs.
set -u
. tests/cli/common.inc

behaviour install_stages_every_part_under_destdir
make -s install PREFIX=/usr DESTDIR="$tmp/root" >"$tmp/log" 2>&1 || fail "make install: $(tail -5 "$tmp/log")"
for f in bin/tq lib/libtq.a lib/libtq.so include/tq.h lib/pkgconfig/tq.pc share/man/man1/tq.1 \
         share/man/man1/tq-encode-kvdump.1; do
    [ -f "$tmp/root/usr/$f" ] || fail "missing /usr/$f"
done
"$tmp/root/usr/bin/tq" --version | grep -q '^tq ' || fail "the installed tq does not run"
grep -q '^prefix=/usr$' "$tmp/root/usr/lib/pkgconfig/tq.pc" || fail "tq.pc prefix: $(head -1 "$tmp/root/usr/lib/pkgconfig/tq.pc")"

behaviour the_shared_library_exports_tq_h_functions_alone
# libtq.so is built with hidden visibility: its dynamic symbols are exactly the functions
# tq.h declares (TQ_API), none of formats/' or lib/'s internals
command -v nm >/dev/null || { echo "nm not installed"; exit 77; }
nm -D --defined-only "$tmp/root/usr/lib/libtq.so" | awk '{print $3}' | sort >"$tmp/exported"
grep -oE '\btq_[a-z0-9_]+ *\(' "$tmp/root/usr/include/tq.h" | tr -d ' (' | sort -u >"$tmp/declared"
extra=$(comm -23 "$tmp/exported" "$tmp/declared" | head -5 | tr '\n' ' ')
missing=$(comm -13 "$tmp/exported" "$tmp/declared" | head -5 | tr '\n' ' ')
[ -z "$extra" ] || fail "libtq.so exports what tq.h does not declare: $extra"
[ -z "$missing" ] || fail "tq.h declares what libtq.so does not export: $missing"
[ "$(wc -l <"$tmp/exported")" -gt 50 ] || fail "only $(wc -l <"$tmp/exported") symbols exported"

behaviour the_library_links_only_what_lib_calls
# libtq is lib/ alone: no file format, HTTP, JSON, XML or archive library behind it
deps=$(ldd "$tmp/root/usr/lib/libtq.so" | awk '{print $1}' | tr '\n' ' ')
case $deps in
    *curl* | *expat* | *jansson* | *archive* | *zstd* | *xxhash*) fail "libtq.so links: $deps" ;;
esac
libs=$(sed -n 's/^Libs.private: //p' "$tmp/root/usr/lib/pkgconfig/tq.pc")
case $libs in
    *curl* | *expat* | *jansson* | *archive* | *zstd* | *xxhash*) fail "tq.pc lists: $libs" ;;
esac
[ ! -e "$tmp/root/usr/lib/libtqformats.a" ] || fail "the private formats library was installed"

behaviour a_program_links_with_pkg_config_alone
command -v pkg-config >/dev/null || { echo "pkg-config not installed"; exit 77; }
sed "s|^prefix=/usr$|prefix=$tmp/root/usr|" "$tmp/root/usr/lib/pkgconfig/tq.pc" >"$tmp/tq.pc"
cat >"$tmp/p.c" <<'C'
#include <stdio.h>
#include <tq.h>
int main(void)
{
    tq_ctx *ctx = tq_ctx_new();
    float x[32] = {1.0f, -2.0f};
    unsigned char out[64];
    tq_status st = tq_quantize(ctx, TQ_DT_Q8_0, x, 32, out);
    printf("%s %d\n", tq_version(), (int)st);
    tq_ctx_free(ctx);
    return st != TQ_OK;
}
C
flags=$(PKG_CONFIG_PATH="$tmp" pkg-config --cflags --libs --static tq) || fail "pkg-config"
# shellcheck disable=SC2086
${CC:-cc} -o "$tmp/p" "$tmp/p.c" $flags -fopenmp -Wl,-rpath,"$tmp/root/usr/lib" 2>"$tmp/e" || fail "link: $(cat "$tmp/e")"
out=$("$tmp/p") || fail "the program failed: $out"
[ "$out" = "$("$tmp/root/usr/bin/tq" --version | sed 's/^tq \([^ ]*\).*/\1/') 0" ] || fail "printed '$out'"
# without --static: the shared library's exported calls alone
flags=$(PKG_CONFIG_PATH="$tmp" pkg-config --cflags --libs tq) || fail "pkg-config (shared)"
# shellcheck disable=SC2086
${CC:-cc} -o "$tmp/q" "$tmp/p.c" $flags -Wl,-rpath,"$tmp/root/usr/lib" 2>"$tmp/e" || fail "link (shared): $(cat "$tmp/e")"
ldd "$tmp/q" | grep -q "$tmp/root/usr/lib/libtq.so" || fail "not linked to the installed libtq.so: $(ldd "$tmp/q")"
[ "$("$tmp/q")" = "$out" ] || fail "the shared-linked program printed '$("$tmp/q")'"
exit 0
