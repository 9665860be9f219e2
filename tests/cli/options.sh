#!/bin/sh
# Every option that takes a value, of every subcommand (as `--list-options`
# lists them): given without its value, or with a malformed one, tq exits 2
# with one line on stderr, prints nothing on stdout and writes no output.
set -u
. tests/cli/common.inc
seed_state=tests/fuzz/seeds/fuzz_state_read/stories16.ggsq
seed_snap=tests/fuzz/seeds/fuzz_tqkv_read/lossless.tqkv
seed_model=tests/fuzz/seeds/fuzz_gguf_read/tiny.gguf
out=$tmp/out.x
# the arguments each subcommand needs besides the option under test
args() {
    case $1 in
        encode-kvdump) echo "$seed_state -o $out" ;;
        decode-kvdump) echo "$seed_snap -o $out" ;;
        quantize-tq4|rotate-weights) echo "$seed_model $out" ;;
        inspect) echo "$seed_model" ;;
        bench) echo "codec" ;;
    esac
}
check() { # SUB ARGS...: exit 2, one line, nothing on stdout, no output file
    sub=$1; shift
    expect_err 2 "" "$sub" "$@"
    [ -e "$out" ] && fail "'$sub $*' left $out behind"
    return 0
}
n=0
for sub in encode-kvdump decode-kvdump quantize-tq4 rotate-weights inspect bench; do
    behaviour "${sub}_refuses_missing_and_malformed_values"
    $tq $sub --list-options >"$tmp/opts" || fail "$sub --list-options"
    [ -s "$tmp/opts" ] || fail "$sub lists no options"
    while read -r name kind rest; do
        [ "$kind" = flag ] && continue
        case " $rest " in *" optional "*) optional=1 ;; *) optional=0 ;; esac
        # shellcheck disable=SC2046
        [ $optional = 1 ] || check $sub $(args $sub) "$name"
        check $sub $(args $sub) "$name="
        case $kind in
            integer) check $sub $(args $sub) "$name" x; check $sub $(args $sub) "$name" 99999999999999999999 ;;
            choice) check $sub $(args $sub) "$name=bogus-choice" ;;
            value) check $sub $(args $sub) "$name" "(" ;;
        esac
        n=$((n + 1))
    done <"$tmp/opts"
done
behaviour forty_options_or_more_are_checked
[ $n -ge 40 ] || fail "only $n options with values were checked"
echo "$n options checked"
