#!/usr/bin/env bash
# The C ABI's acceptance tests, against the live broker at LAGLESS_BOOTSTRAP:
#   build liblagless (release), check the committed header, install to a temporary prefix and
#   build every C program through pkg-config with -std=c99 -Wall -Wextra -Werror -pedantic;
#   check the exports, soname and ABI baseline; run produce / error-path / two-process group /
#   recovery-stream / learner-assignment / learner hand-over (readiness reported later, prepare
#   to leave) / batch hand-over / transaction / consumer metrics / statistics callback / admin
#   client tests, the producer's statistics and error callbacks and the TLS/SASL round trips
#   (over the security listeners of `kafka_broker.py --security`) plainly, under
#   AddressSanitizer and (produce, errors, lookups, batch, admin) under valgrind; the two-process group
#   again under group.protocol=consumer (KIP-848);
#   the C++ consumer; the example; the Python ctypes test.
# Usage: python3 tests/kafka_broker.py run --security -- bash tests/c/run.sh
# LAGLESS_C_SKIP_VALGRIND=1 skips the valgrind runs; LAGLESS_VALGRIND_GROUP=1 adds the group test.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${LAGLESS_BOOTSTRAP:?set LAGLESS_BOOTSTRAP=host:port of a live Kafka broker}"
started=$(date +%s)
step() { echo; echo "== $* ($(( $(date +%s) - started ))s)"; }

step "build liblagless"
cargo build --release -p lagless-ffi
step "header is up to date"
bash ffi/check-header.sh

work="$(mktemp -d /tmp/lagless-c.XXXXXX)"
trap 'rm -rf "$work"' EXIT
run_id="$(date +%s)-$$"
LAGLESS_NO_BUILD=1 bash ffi/install.sh "$work/prefix" >/dev/null
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
export LD_LIBRARY_PATH="$work/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
so="$work/prefix/lib/liblagless.so"

step "exports and soname"
others="$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^lagless_' || true)"
if [[ -n "$others" ]]; then echo "exported symbols outside lagless_*:"; echo "$others"; exit 1; fi
echo "$(nm -D --defined-only "$so" | wc -l) symbols, all lagless_*"
readelf -d "$so" | grep -q 'SONAME.*\[liblagless\.so\.0\]' || { echo "soname is not liblagless.so.0"; exit 1; }
echo "soname liblagless.so.0"

step "ABI against the committed baseline"
# An incompatible change to liblagless.so.0 fails here unless the soname changes too.
bash ffi/check-abi.sh

step "compile (C99 pedantic, C++11, example, static link)"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
CFLAGS=(-std=c99 -Wall -Wextra -Werror -pedantic -g "-DEXPECTED_VERSION=\"$version\"")
read -r -a PC <<<"$(pkg-config --cflags --libs lagless)"
for t in test_produce test_errors group_member produce_n test_recovery test_recovery_thread test_learners test_handover test_lookups test_security test_batch test_transactions test_metrics test_statistics test_producer_callbacks test_admin; do
  cc "${CFLAGS[@]}" -o "$work/$t" "tests/c/$t.c" "${PC[@]}" -pthread
  cc "${CFLAGS[@]}" -fsanitize=address -fno-omit-frame-pointer -o "$work/asan-$t" "tests/c/$t.c" "${PC[@]}" -pthread
done
echo '#include <lagless.h>' | g++ -std=c++11 -Wall -Wextra -Werror -x c++ -fsyntax-only $(pkg-config --cflags lagless) -
g++ -std=c++11 -Wall -Wextra -Werror -o "$work/consume_cpp" tests/c/consume.cpp "${PC[@]}"
make -s -C examples/c clean consume && make -s -C examples/c clean
cc "${CFLAGS[@]}" -o "$work/consume_static" examples/c/consume.c $(pkg-config --cflags lagless) \
  "$work/prefix/lib/liblagless.a" -lpthread -ldl -lm
out="$("$work/consume_static" 2>&1 || true)"; [[ "$out" == *usage* ]] # the static build runs
echo "all compiled"

# The two-process rebalance test: A alone, then B joins; both listeners see the rebalance; A
# commits inside on_revoked; every record is consumed, none twice.
group_test() {
  local bin="$1" label="$2" wrap=("${@:3}")
  local topic="lagless-c-group-$label-$run_id" group="lagless-c-g-$label-$run_id"
  local dir="$work/group-$label" n1=200 n2=200
  mkdir -p "$dir"
  "$work/produce_n" "$topic" 4 "$n1" 1
  "${wrap[@]}" "$work/$bin" "$topic" "$group" A "$dir" > "$dir/A.out" 2>&1 & local pa=$!
  wait_for "A consumed the first $n1 records" "[[ \$(cat $dir/A.records 2>/dev/null | wc -l) -ge $n1 ]]"
  "${wrap[@]}" "$work/$bin" "$topic" "$group" B "$dir" > "$dir/B.out" 2>&1 & local pb=$!
  wait_for "B was assigned partitions and A revoked some" \
    "grep -q '^assigned [1-9]' $dir/B.events 2>/dev/null && grep -q '^revoked [1-9]' $dir/A.events"
  "$work/produce_n" "$topic" 4 "$n2" 0
  wait_for "all $((n1 + n2)) records consumed" \
    "[[ \$(cat $dir/A.records $dir/B.records | sort -u | wc -l) -ge $((n1 + n2)) ]]"
  touch "$dir/stop"
  local rc=0
  wait "$pa" || rc=1
  wait "$pb" || rc=1
  cat "$dir/A.out" "$dir/B.out"
  if [[ $rc != 0 ]]; then echo "--- A.events"; cat "$dir/A.events"; echo "--- B.events"; cat "$dir/B.events"; return 1; fi
  python3 - "$dir" "$n1" "$n2" "$label" <<'PY'
import sys
d, n1, n2, label = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
recs = {m: [tuple(map(int, l.split())) for l in open(f"{d}/{m}.records")] for m in "AB"}
ev = {m: open(f"{d}/{m}.events").read().splitlines() for m in "AB"}
allr = recs["A"] + recs["B"]
per_part = (n1 + n2) // 4
want = {(p, o) for p in range(4) for o in range(per_part)}
assert set(allr) == want, f"missing {sorted(want - set(allr))[:10]}"
dups = len(allr) - len(set(allr))
assert dups == 0, f"{dups} records consumed twice: the commit inside on_revoked did not hold"
assert len(recs["B"]) > 0, "B consumed nothing after the rebalance"
assert any(e.startswith("committed-in-revoked") for e in ev["A"]), ev["A"]
assert ev["A"][0].startswith("assigned 4"), ev["A"]
assert any(e.startswith("assigned ") and not e.startswith("assigned 0") for e in ev["B"]), ev["B"]
# A KIP-848 member makes its own id (22 characters); a classic one gets client.id-UUID.
for m in "AB":
    ids = [e.split()[2] for e in ev[m] if e.startswith("member ")]
    assert len(ids) == 1, ev[m]
    assert (len(ids[0]) == 22) == (label == "kip848"), f"{m}: member id {ids[0]!r} under {label}"
print(f"group: A {len(recs['A'])}, B {len(recs['B'])} records, no duplicates; A events: "
      + "; ".join(e for e in ev["A"] if not e.startswith(("position", "member"))))
PY
}

wait_for() {
  local what="$1" cond="$2" deadline=$(( $(date +%s) + ${WAIT_S:-90} ))
  until eval "$cond"; do
    if (( $(date +%s) > deadline )); then echo "timed out waiting until $what"; return 1; fi
    sleep 0.2
  done
}

topic="lagless-c-produce-$run_id"
step "produce"
"$work/test_produce" "$topic"
step "error paths"
"$work/test_errors" "$topic"
step "two-process group with rebalance"
group_test group_member plain
step "two-process group under group.protocol=consumer (KIP-848)"
group_test group_member kip848 env LAGLESS_GROUP_PROTOCOL=consumer
step "recovery streams (KIP-333)"
"$work/test_recovery" "lagless-c-recovery-$run_id" "lagless-c-recovery-g-$run_id"
step "recovery streams on a thread of their own"
"$work/test_recovery_thread" "lagless-c-recthread-$run_id" "lagless-c-recthread-g-$run_id"
step "learner assignments"
"$work/test_learners" "lagless-c-learners-$run_id" "lagless-c-learners-g-$run_id"
step "learner hand-over: readiness reported later, prepare to leave"
"$work/test_handover" "lagless-c-handover-$run_id" "lagless-c-handover-g-$run_id"
step "lookups and group controls"
"$work/test_lookups" "lagless-c-lookups-$run_id" "lagless-c-lookups-g-$run_id"
step "TLS and SASL"
"$work/test_security" "lagless-c-security-$run_id"
step "batch hand-over"
"$work/test_batch" "lagless-c-batch-$run_id" "lagless-c-batch-g-$run_id"
step "transactions"
"$work/test_transactions" "lagless-c-txn-$run_id" "lagless-c-txn-g-$run_id"
step "consumer metrics"
"$work/test_metrics" "lagless-c-metrics-$run_id" "lagless-c-metrics-g-$run_id"
step "statistics callback"
"$work/test_statistics" "lagless-c-statistics-$run_id"
step "producer statistics and error callbacks"
"$work/test_producer_callbacks" "lagless-c-pcallbacks-$run_id"
step "admin client"
"$work/test_admin" "lagless-c-admin-$run_id" "lagless-c-admin-g-$run_id"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=23"
step "AddressSanitizer: produce"
"$work/asan-test_produce" "$topic-asan"
step "AddressSanitizer: error paths"
"$work/asan-test_errors" "$topic"
step "AddressSanitizer: two-process group"
group_test asan-group_member asan
step "AddressSanitizer: recovery streams"
"$work/asan-test_recovery" "lagless-c-recovery-asan-$run_id" "lagless-c-recovery-g-asan-$run_id"
step "AddressSanitizer: recovery thread"
"$work/asan-test_recovery_thread" "lagless-c-recthread-asan-$run_id" "lagless-c-recthread-g-asan-$run_id"
step "AddressSanitizer: learner assignments"
"$work/asan-test_learners" "lagless-c-learners-asan-$run_id" "lagless-c-learners-g-asan-$run_id"
step "AddressSanitizer: learner hand-over"
"$work/asan-test_handover" "lagless-c-handover-asan-$run_id" "lagless-c-handover-g-asan-$run_id"
step "AddressSanitizer: lookups and group controls"
"$work/asan-test_lookups" "lagless-c-lookups-asan-$run_id" "lagless-c-lookups-g-asan-$run_id"
step "AddressSanitizer: TLS and SASL"
"$work/asan-test_security" "lagless-c-security-asan-$run_id"
step "AddressSanitizer: batch hand-over"
"$work/asan-test_batch" "lagless-c-batch-asan-$run_id" "lagless-c-batch-g-asan-$run_id"
step "AddressSanitizer: transactions"
"$work/asan-test_transactions" "lagless-c-txn-asan-$run_id" "lagless-c-txn-g-asan-$run_id"
step "AddressSanitizer: consumer metrics"
"$work/asan-test_metrics" "lagless-c-metrics-asan-$run_id" "lagless-c-metrics-g-asan-$run_id"
step "AddressSanitizer: statistics callback"
"$work/asan-test_statistics" "lagless-c-statistics-asan-$run_id"
step "AddressSanitizer: producer statistics and error callbacks"
"$work/asan-test_producer_callbacks" "lagless-c-pcallbacks-asan-$run_id"
step "AddressSanitizer: admin client"
"$work/asan-test_admin" "lagless-c-admin-asan-$run_id" "lagless-c-admin-g-asan-$run_id"
unset ASAN_OPTIONS

if [[ "${LAGLESS_C_SKIP_VALGRIND:-0}" != 1 ]]; then
  VG=(valgrind -q --leak-check=full --error-exitcode=1 --errors-for-leak-kinds=definite
      --show-leak-kinds=definite --suppressions=tests/c/valgrind.supp)
  step "valgrind: produce"
  "${VG[@]}" "$work/test_produce" "$topic-vg"
  step "valgrind: error paths"
  "${VG[@]}" "$work/test_errors" "$topic"
  step "valgrind: lookups and group controls"
  "${VG[@]}" "$work/test_lookups" "lagless-c-lookups-vg-$run_id" "lagless-c-lookups-g-vg-$run_id"
  step "valgrind: batch hand-over"
  "${VG[@]}" "$work/test_batch" "lagless-c-batch-vg-$run_id" "lagless-c-batch-g-vg-$run_id"
  step "valgrind: admin client"
  "${VG[@]}" "$work/test_admin" "lagless-c-admin-vg-$run_id" "lagless-c-admin-g-vg-$run_id"
  if [[ "${LAGLESS_VALGRIND_GROUP:-0}" == 1 ]]; then
    step "valgrind: two-process group"
    WAIT_S=300 group_test group_member valgrind "${VG[@]}"
  fi
fi

step "C++ consumer"
cpp_topic="lagless-c-cpp-$run_id"
"$work/produce_n" "$cpp_topic" 3 90 1
"$work/consume_cpp" "$cpp_topic" "lagless-c-cpp-g-$run_id" 90

step "example consume.c, built with CMake against the installed package"
# find_package(lagless) from the installed prefix, linked through the imported target.
cmake -S examples/c -B "$work/cmake-example" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake-example" >/dev/null
ex_topic="lagless-c-example-$run_id"
"$work/produce_n" "$ex_topic" 2 10 1
"$work/cmake-example/consume" "$LAGLESS_BOOTSTRAP" "$ex_topic" "lagless-c-ex-$run_id" 10 | tail -2 | tee "$work/ex.out"
grep -q "consumed 10 messages" "$work/ex.out"
# The installed library is the stripped one, with no debug sections left.
if readelf -S "$work/prefix/lib/liblagless.so.$version" | grep -q '\.debug_'; then
  echo "the installed liblagless.so still has debug sections"; exit 1
fi
echo "installed: $(du -h "$work/prefix/lib/liblagless.so.$version" | cut -f1) shared, $(du -h "$work/prefix/lib/liblagless.a" | cut -f1) static"

step "Python ctypes"
LAGLESS_LIB="$so" python3 -m pytest -q tests/c/test_ctypes.py

step "all C ABI tests passed in $(( $(date +%s) - started ))s"
