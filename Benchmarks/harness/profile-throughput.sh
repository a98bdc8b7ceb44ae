#!/usr/bin/env bash
# Profiles PeerKit's 100 B one-way path: runs the release `peerkit-bench sink` and `source` under
# `perf record -e cpu-clock` (virtual machines rarely have hardware counters), then prints each
# process's CPU time per message and its hottest symbols, self and inclusive, demangled.
#
#   Benchmarks/harness/profile-throughput.sh [MESSAGES] [SIZE] [--sessions]      (defaults: 300000 100)
#
# --sessions: both sides offer resumable sessions, the library's default (`peerkit-bench`'s own
# default is without them, as in every round's figures). API=send in the environment profiles
# `send(_:to:)` instead of `broadcast(_:)`.
#
# Needs perf (apt-get install linux-perf) and a release build (`swift build -c release
# --product peerkit-bench`). Leaves sink.data and source.data in a temporary folder it names.
set -euo pipefail
cd "$(dirname "$0")/../.."

messages="${1:-300000}"
size="${2:-100}"
extra=()
case "${3:-}" in
    "") ;;
    --sessions) extra=(--sessions) ;;
    *) echo "profile: the third argument can only be --sessions, not \"$3\"." >&2; exit 2 ;;
esac
bench="$(swift build -c release --show-bin-path)/peerkit-bench"
[ -x "$bench" ] || { echo "profile: $bench is missing; run swift build -c release --product peerkit-bench first." >&2; exit 1; }
command -v perf >/dev/null || { echo "profile: perf is missing; install linux-perf." >&2; exit 1; }
out="$(mktemp -d /tmp/peerkit-profile.XXXXXX)"
window=$(( size > 4096 ? 64 : 20000 ))
# With sessions, what is in flight must stay within a session's 8 MiB bound (see the sessions group
# in suite.py): 10,000 messages.
if [ ${#extra[@]} -gt 0 ] && [ $window -gt 10000 ]; then window=10000; fi

/usr/bin/time -f "sink: %U s user, %S s system, %w voluntary context switches" -o "$out/sink.time" \
    perf record -q -e cpu-clock -F 1999 --call-graph dwarf,16384 -o "$out/sink.data" \
    "$bench" sink --ack-every $(( window / 2 )) --service-type bprofile --timeout 120 "${extra[@]}" >"$out/sink.out" 2>"$out/sink.err" &
sink_pid=$!
for _ in $(seq 100); do grep -q ready "$out/sink.out" 2>/dev/null && break; sleep 0.1; done
port="$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$out/sink.out" | head -1)"
[ -n "$port" ] || { echo "profile: the sink did not start: $(cat "$out/sink.err")" >&2; kill "$sink_pid" 2>/dev/null; exit 1; }

/usr/bin/time -f "source: %U s user, %S s system, %w voluntary context switches" -o "$out/source.time" \
    perf record -q -e cpu-clock -F 1999 --call-graph dwarf,16384 -o "$out/source.data" \
    "$bench" source --connect "127.0.0.1:$port" --size "$size" --count "$messages" --window "$window" \
    --service-type bprofile --timeout 120 ${API:+--api $API} "${extra[@]}" 2>"$out/source.err"
wait "$sink_pid"

echo "Result: $(tail -1 "$out/sink.out")"
set +o pipefail  # `head` ends the report pipelines early on purpose.
for side in sink source; do
    echo
    cat "$out/$side.time"
    python3 - "$out/$side.time" "$messages" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
user, system = map(float, re.findall(r"([0-9.]+) s (?:user|system)", text))
print(f"  {(user + system) / int(sys.argv[2]) * 1e6:.2f} µs of CPU per message (perf's own overhead included)")
EOF
    echo "== $side: hottest symbols (self)"
    perf report -q -i "$out/$side.data" --no-children --sort dso,symbol --stdio 2>/dev/null \
        | grep -E '^ +[0-9]' | head -15 | swift demangle --simplified | cut -c1-150
    echo "== $side: PeerKit and Foundation frames (inclusive)"
    perf report -q -i "$out/$side.data" --children --sort symbol --stdio --no-call-graph 2>/dev/null \
        | swift demangle --simplified \
        | grep -E 'PeerTransceiver|MessageCodec|Payload(En|De)coder|Envelope|JSON(Reader|Scanner|Encoder|Decoder)|PeerConnection|ConnectionManager|MessageDispatcher|AsyncStream|peerMessageType|String.init<A>\(describing|libc_write|getGenericMetadata$|FrameDecoder' \
        | awk '{ $2 = ""; print }' | sort -u -k3 | sort -t% -k1 -rn | head -25 | cut -c1-150
done
echo
echo "perf data: $out"
