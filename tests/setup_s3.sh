#!/bin/sh
# tests/setup_s3.sh - a throwaway S3 server (Ceph radosgw) for the object-store tests.
#
#   sh tests/setup_s3.sh start DIR   bring up one monitor, one OSD (memstore) and radosgw,
#                                    all under DIR and on 127.0.0.1 only; print the
#                                    shell-sourceable AWS_* lines a client needs, exit 0
#   sh tests/setup_s3.sh stop DIR    stop those daemons by their PIDs and remove DIR
#   sh tests/setup_s3.sh tools       the Ceph packages alone (installed when missing and root)
#
# SETUP_S3_ALSO_LISTEN=ADDR: radosgw answers on ADDR too, at the same port (a benchmark runs
# the cluster in a network namespace and reaches it over a shaped link: tests/bench/slot_link.py).
#
# A real object store rather than a mock, so that signing, ranged GETs and multipart uploads
# meet a real implementation.  When it cannot be had (no packages and no root, a daemon that
# does not come up) start prints "SKIP: <reason>" as its last stdout line and exits 77, so the
# tests skip instead of failing.  Progress and logs go to stderr only: stdout is the interface.
# Facts and pitfalls behind the choices: ../shared/reference/s3-test-server.md.
set -u

# Fixed credentials: the cluster lives only as long as one test run, on 127.0.0.1.
S3_USER=tqtest
S3_KEY=tqtestkey
S3_SECRET=tqtestsecret
S3_REGION=us-east-1
# memstore keeps the objects in the OSD's memory (its RSS grows about twice as fast as the
# data stored); the cap keeps a runaway test from eating the machine.  A full store does not
# fail writes: they stall (Ceph waits for space).  SETUP_S3_MEM_BYTES changes the cap.
MEM_BYTES=${SETUP_S3_MEM_BYTES:-6442450944}
ALSO_LISTEN=${SETUP_S3_ALSO_LISTEN:-}
# Ports: monitor, radosgw, and a range for the OSD's messengers (it binds 4 with msgr2 only).
NPORTS=12

say() { echo "setup_s3: $*" >&2; }
usage() { echo "usage: sh tests/setup_s3.sh start|stop DIR, or tools" >&2; exit 2; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
elapsed() { t=$(( $(now_ms) - T0 )); printf '%d.%03ds' $((t / 1000)) $((t % 1000)); }

# Every ceph CLI call under timeout: the CLI waits forever for a monitor that is not there.
ceph_cli() { timeout -k 2 10 ceph -c "$CONF" "$@"; }

# alive PID BINARY: the process runs and is BINARY.  Zombies count as dead: a process whose
# parent has gone is left to PID 1, which in a container may reap it late or never.  The name
# check guards against killing an unrelated process that got a recycled PID.
alive() {
    [ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
    state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ] || return 1
    tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | head -n 1 | grep -q "$2\$"
}

# stop_one NAME BINARY: TERM, then KILL after 5 s; wait until it is gone.
stop_one() {
    pidf="$DIR/$1.pid"
    [ -f "$pidf" ] || return 0
    pid=$(cat "$pidf")
    if alive "$pid" "$2"; then
        kill -TERM "$pid" 2>/dev/null
        i=0
        while alive "$pid" "$2" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        if alive "$pid" "$2"; then
            say "$1 (pid $pid) ignored TERM; killing it"
            kill -KILL "$pid" 2>/dev/null
            i=0
            while alive "$pid" "$2" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        fi
    fi
    rm -f "$pidf"
}

# radosgw first (it is the monitor's and OSD's client), then the OSD, then the monitor.
stop_daemons() {
    stop_one rgw radosgw
    stop_one osd ceph-osd
    stop_one mon ceph-mon
}

# fail REASON LOG...: stop what started, show the tail of each log there is on stderr, skip.
# DIR stays for a look at the logs; stop removes it.
fail() {
    reason=$1
    shift
    say "start failed after $(elapsed): $reason"
    for log in "$@"; do
        [ -s "$log" ] || continue
        say "last lines of $log:"
        tail -n 20 "$log" >&2
    done
    stop_daemons
    # The ports were free when picked, but another program (another cluster starting at the
    # same moment) can take one before a daemon binds it: then start again on new ports.
    if [ -d "$DIR/log" ] && grep -qs "Address already in use" "$DIR"/log/* &&
       [ "${SETUP_S3_ATTEMPT:-1}" -lt 3 ]; then
        say "a port was taken meanwhile; starting again on other ports"
        rm -rf "$DIR"
        mkdir -p "$DIR" || { echo "SKIP: $reason"; exit 77; }
        SETUP_S3_ATTEMPT=$((${SETUP_S3_ATTEMPT:-1} + 1)) exec sh "$0" start "$DIR"
    fi
    echo "SKIP: $reason"
    exit 77
}

# ensure_tools: the Ceph daemons and CLIs, and curl to see radosgw answer; installed from
# Debian when missing and we are root.
ensure_tools() {
    missing=
    for t in radosgw radosgw-admin ceph-mon ceph-osd ceph monmaptool curl timeout; do
        command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
    done
    [ -z "$missing" ] && return 0
    say "missing:$missing"
    [ "$(id -u)" = 0 ] || { echo "SKIP: missing$missing and not root to install them"; exit 77; }
    command -v apt-get >/dev/null 2>&1 || { echo "SKIP: missing$missing and no apt-get"; exit 77; }
    pkgs="radosgw ceph-mon ceph-osd"
    command -v curl >/dev/null 2>&1 || pkgs="$pkgs curl"
    say "installing $pkgs (about 40 s)"
    # The package lists may be stale or absent (fresh container): update once on failure.
    # shellcheck disable=SC2086 # $pkgs is a list of words
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs >&2
    then
        DEBIAN_FRONTEND=noninteractive apt-get update >&2
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs >&2 ||
            { echo "SKIP: apt-get install $pkgs failed"; exit 77; }
    fi
    for t in radosgw radosgw-admin ceph-mon ceph-osd ceph monmaptool curl timeout; do
        command -v "$t" >/dev/null 2>&1 ||
            { echo "SKIP: $t still missing after installing $pkgs"; exit 77; }
    done
}

# pick_ports: NPORTS consecutive ports that nothing uses now, at a random place below the
# ephemeral range (so an outgoing connection cannot be holding one), so that two clusters
# started at once pick different ones.  The ports in use come from /proc/net/tcp*, in any
# state; ss or python3 need not be there.
pick_ports() {
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null) || lo=32768
    [ "$lo" -gt 12000 ] 2>/dev/null || lo=32768
    used=$(awk 'function hex(s,  i, n) {
                    n = 0
                    for (i = 1; i <= length(s); i++)
                        n = n * 16 + index("0123456789ABCDEF", toupper(substr(s, i, 1))) - 1
                    return n
                }
                FNR > 1 { split($2, a, ":"); print hex(a[2]) }' \
                /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -un)
    tries=0
    while [ $tries -lt 50 ]; do
        r=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
        BASE=$((10000 + r % (lo - 10000 - NPORTS)))
        clash=$(echo "$used" | awk -v b=$BASE -v n=$NPORTS '$1 >= b && $1 < b + n' | head -n 1)
        [ -z "$clash" ] && return 0
        tries=$((tries + 1))
    done
    fail "no $NPORTS free consecutive ports found"
}

write_conf() {
    # Ceph expands $name and $id itself: they are escaped here.
    cat >"$CONF" <<EOF
# Throwaway cluster for tests/setup_s3.sh; everything lives under $DIR.
[global]
fsid = $FSID
mon host = v2:127.0.0.1:$MON_PORT
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
# Only msgr2 (the monitor is addressed as v2): half the ports bound.
ms bind msgr1 = false
ms bind port min = $((BASE + 2))
ms bind port max = $((BASE + NPORTS - 1))
# No cephx.  radosgw's default "ms mon client mode" is "secure", which needs cephx: without
# crc it retries silently and exits after 300 s.
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
keyring = $DIR/keyring
# Nothing outside DIR: sockets, pid files, logs, crash dumps.
run dir = $DIR/run
pid file = $DIR/run/\$name.pid
log file = $DIR/log/\$name.log
mon cluster log file = $DIR/log/cluster.log
crash dir = $DIR/crash
mon data = $DIR/mon/\$id
osd data = $DIR/osd/\$id
rgw data = $DIR/rgw
# One OSD, so one replica and no failure domain above it.
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
osd crush chooseleaf type = 0
# radosgw makes 7 pools: at the default 32 PGs each they come close to mon max pg per osd.
osd pool default pg num = 8
osd pool default pgp num = 8
mon warn on pool no redundancy = false
# The temp disk may be fuller than the monitor likes; that is no reason to refuse to start.
mon data avail warn = 2
mon data avail crit = 1
osd objectstore = memstore
osd journal = $DIR/osd/\$id/journal
# Every monitor update (pool create, osd up) waits out this interval, 1 s by default; radosgw
# makes a dozen of them before it answers.
paxos propose interval = 0.05
paxos min wait = 0.01
memstore device bytes = $MEM_BYTES

[client.rgw.tq]
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT${ALSO_LISTEN:+ endpoint=$ALSO_LISTEN:$RGW_PORT}
# Fail within a minute rather than the default five when the cluster is not there.
rgw init timeout = 60
# Path-style requests (http://127.0.0.1:PORT/bucket/key).
rgw dns name = localhost
# An overwritten or deleted object's data is freed by radosgw's garbage collector, by default
# hours later: in memstore it stays in the OSD's memory meanwhile, and a benchmark that
# rewrites a key slowed 3x after a few hundred MB (uploads 0.9 -> 1.9 s).  Collect at once.
rgw gc obj min wait = 0
rgw gc processor period = 1
rgw gc processor max time = 1
EOF
}

# launch NAME CMD...: a daemon in the background, output to a file (a caller that captures
# our stdout would otherwise wait for the daemons), its PID recorded for stop.  A subshell
# stays behind as its parent to reap it: orphaned to a PID 1 that does not reap (as in some
# containers), a stopped daemon would linger as a zombie under its own name and confuse
# "is radosgw still running" checks; so only a short "sh" zombie can be left there.
launch() {
    name=$1
    shift
    rm -f "$DIR/$name.pid"
    (
        "$@" </dev/null >"$DIR/log/$name.out" 2>&1 &
        echo $! >"$DIR/$name.pid.tmp" && mv "$DIR/$name.pid.tmp" "$DIR/$name.pid"
        wait
    ) </dev/null >/dev/null 2>&1 &
    while [ ! -s "$DIR/$name.pid" ]; do sleep 0.01; done
}

start() {
    T0=$(now_ms)
    if [ -e "$DIR" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
        echo "setup_s3: $DIR exists and is not empty; refusing to start there" >&2
        exit 2
    fi
    ensure_tools
    mkdir -p "$DIR/run" "$DIR/log" "$DIR/crash" "$DIR/mon/a" "$DIR/osd" "$DIR/rgw" ||
        { echo "SKIP: cannot create $DIR"; exit 77; }
    # The marker lets stop remove DIR, and only a DIR that this script made.
    : >"$DIR/.setup_s3" && : >"$DIR/keyring"
    # An interrupted start leaves no daemons behind.
    trap 'stop_daemons; exit 130' INT TERM HUP

    pick_ports
    MON_PORT=$BASE
    RGW_PORT=$((BASE + 1))
    FSID=$(cat /proc/sys/kernel/random/uuid)
    OSD_UUID=$(cat /proc/sys/kernel/random/uuid)
    say "ports: mon $MON_PORT, radosgw $RGW_PORT, osd $((BASE + 2))-$((BASE + NPORTS - 1))"
    write_conf

    monmaptool --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_PORT]" "$DIR/monmap" \
        >"$DIR/log/monmaptool.out" 2>&1 || fail "monmaptool failed" "$DIR/log/monmaptool.out"
    ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/keyring" \
        >"$DIR/log/mon-mkfs.out" 2>&1 || fail "ceph-mon --mkfs failed" "$DIR/log/mon-mkfs.out"
    launch mon ceph-mon -c "$CONF" -f -i a
    say "$(elapsed) monitor started"

    # "osd new" is the first call the monitor must answer: retried until it does.  The same
    # UUID gives the same id, so a retry after a lost answer is harmless.
    deadline=$(($(now_ms) + 20000))
    while :; do
        alive "$(cat "$DIR/mon.pid")" ceph-mon ||
            fail "ceph-mon exited" "$DIR/log/mon.out" "$DIR/log/mon.a.log"
        OSD_ID=$(ceph_cli osd new "$OSD_UUID" 2>>"$DIR/log/ceph-cli.err") && break
        [ "$(now_ms)" -lt $deadline ] || fail "the monitor does not answer after 20 s" \
            "$DIR/log/ceph-cli.err" "$DIR/log/mon.a.log"
        sleep 0.2
    done
    mkdir -p "$DIR/osd/$OSD_ID"
    ceph-osd -c "$CONF" -i "$OSD_ID" --mkfs --osd-uuid "$OSD_UUID" \
        >"$DIR/log/osd-mkfs.out" 2>&1 || fail "ceph-osd --mkfs failed" "$DIR/log/osd-mkfs.out"
    launch osd ceph-osd -c "$CONF" -f -i "$OSD_ID"
    say "$(elapsed) osd.$OSD_ID started"
    # radosgw now rather than after the OSD is up: it waits for the OSD by itself, and its
    # start-up overlaps the OSD's.
    launch rgw radosgw -c "$CONF" -f -n client.rgw.tq
    say "$(elapsed) radosgw started"

    # Waited for on its own, though radosgw cannot answer without it, to name the culprit.
    deadline=$(($(now_ms) + 30000))
    while ! ceph_cli osd dump 2>>"$DIR/log/ceph-cli.err" | grep -q "^osd\.$OSD_ID up"; do
        alive "$(cat "$DIR/osd.pid")" ceph-osd ||
            fail "ceph-osd exited" "$DIR/log/osd.out" "$DIR/log/osd.$OSD_ID.log"
        [ "$(now_ms)" -lt $deadline ] || fail "osd.$OSD_ID not up after 30 s" \
            "$DIR/log/ceph-cli.err" "$DIR/log/osd.$OSD_ID.log"
        sleep 0.2
    done
    say "$(elapsed) osd.$OSD_ID up"

    # Any HTTP answer will do (anonymous GET / lists no buckets).
    deadline=$(($(now_ms) + 60000))
    while ! curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$RGW_PORT/"; do
        alive "$(cat "$DIR/rgw.pid")" radosgw ||
            fail "radosgw exited" "$DIR/log/rgw.out" "$DIR/log/client.rgw.tq.log"
        [ "$(now_ms)" -lt $deadline ] ||
            fail "radosgw not answering after 60 s" "$DIR/log/client.rgw.tq.log"
        sleep 0.1
    done
    say "$(elapsed) radosgw answers on 127.0.0.1:$RGW_PORT"

    timeout -k 2 30 radosgw-admin -c "$CONF" user create --uid="$S3_USER" \
        --display-name="$S3_USER" --access-key="$S3_KEY" --secret-key="$S3_SECRET" \
        >"$DIR/log/user-create.out" 2>&1 ||
        fail "radosgw-admin user create failed" "$DIR/log/user-create.out"
    say "$(elapsed) S3 user $S3_USER created; ready"
    trap - INT TERM HUP

    # Also kept in DIR, for a test that wants to source it later.
    cat >"$DIR/s3.env" <<EOF
AWS_ENDPOINT_URL=http://127.0.0.1:$RGW_PORT
AWS_ACCESS_KEY_ID=$S3_KEY
AWS_SECRET_ACCESS_KEY=$S3_SECRET
AWS_REGION=$S3_REGION
EOF
    cat "$DIR/s3.env"
}

stop() {
    T0=$(now_ms)
    [ -d "$DIR" ] || return 0
    # Only a DIR that start made: its PID files are ours, and it may be removed.
    if [ ! -f "$DIR/.setup_s3" ]; then
        say "$DIR was not made by this script; left alone"
        return 0
    fi
    stop_daemons
    rm -rf "$DIR"
    say "stopped in $(elapsed)"
}

# tools: the packages alone, installed before tests that start clusters at once (tests/run.sh)
if [ "${1:-}" = tools ] && [ $# -eq 1 ]; then
    ensure_tools
    exit 0
fi
if [ $# -ne 2 ] || [ -z "$2" ]; then usage; fi
DIR=$2
# Absolute, so that a caller's later cd does not matter to the daemons or to stop.
case $DIR in /*) ;; *) DIR=$(pwd)/$DIR ;; esac
CONF=$DIR/ceph.conf
case $1 in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
