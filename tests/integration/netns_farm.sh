#!/usr/bin/env bash
# A farm over real TCP between hosts: the coordinator (with its Redis) in one network namespace,
# two evaluators in two others, each joined to the coordinator's by a veth pair, CURVE on. Once the
# run is under way, evaluator A's link is cut for CUT_S seconds and then restored. Driven by
# tests/integration/netns_farm_test.cc, which checks what this leaves in DIR:
#   coord.log, eval-a.log, eval-b.log    the three processes' logs
#   out/                                 the coordinator's output folder
#   marks                                "cut LINE" and "restored LINE": eval-a.log's line count then
#   rc                                   "coordinator=N"
# Usage: netns_farm.sh KILN DIR TARGETS_DIR [CUT_S] [BUDGET_S]. Needs root and iproute2.
set -u
kiln=${1:?kiln binary}
dir=${2:?work folder}
targets=${3:?targets folder}
cut_s=${4:-30}
budget_s=${5:-75}

tag=k$(($$ % 100000))
ns_c=$tag-c ns_a=$tag-a ns_b=$tag-b
cleanup() {
  for p in $(jobs -p); do kill -9 "$p" 2>/dev/null; done
  for ns in "$ns_c" "$ns_a" "$ns_b"; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT

# Three hosts; host X's link is $tag-cX (coordinator side, 10.77.N.1) <-> $tag-X (10.77.N.2).
n=0
for ns in "$ns_c" "$ns_a" "$ns_b"; do
  ip netns add "$ns" || exit 3
  ip -n "$ns" link set lo up
done
for host in a b; do
  n=$((n + 1))
  ns=$tag-$host
  ip link add "$tag-c$host" netns "$ns_c" type veth peer name "$tag-$host" netns "$ns" || exit 3
  ip -n "$ns_c" addr add "10.77.$n.1/30" dev "$tag-c$host"
  ip -n "$ns" addr add "10.77.$n.2/30" dev "$tag-$host"
  ip -n "$ns_c" link set "$tag-c$host" up
  ip -n "$ns" link set "$tag-$host" up
done

# Keys: the coordinator's, and one per evaluator on the allow-list.
"$kiln" keys new --out "$dir/keys" --name coordinator > /dev/null || exit 4
for host in a b; do "$kiln" keys new --out "$dir/workers" --name "host-$host" > /dev/null || exit 4; done

ip netns exec "$ns_c" "$kiln" coordinator --bind tcp://0.0.0.0:5555 --backend cpu --targets reduce \
  --budget "${budget_s}s" --patience 100000 --in-flight 4 --out "$dir/out" --targets-dir "$targets" \
  --curve-secret "$dir/keys/coordinator.key" --allow "$dir/workers" > "$dir/coord.log" 2>&1 &
coord=$!
n=0
for host in a b; do
  n=$((n + 1))
  ip netns exec "$tag-$host" "$kiln" evaluator --connect "tcp://10.77.$n.1:5555" --backend cpu \
    --worker-id "eval-$host" --heartbeat-ms 500 --targets-dir "$targets" --cache-dir "$dir/cache-$host" \
    --curve-secret "$dir/workers/host-$host.key" --coordinator-key "$dir/keys/coordinator.pub" \
    > "$dir/eval-$host.log" 2>&1 &
done

# The cut, once evaluator A has evaluated something.
for _ in $(seq 1 300); do grep -q "evaluating task" "$dir/eval-a.log" 2>/dev/null && break; sleep 0.1; done
sleep 2
echo "cut $(wc -l < "$dir/eval-a.log")" >> "$dir/marks"
ip -n "$ns_c" link set "$tag-ca" down
sleep "$cut_s"
ip -n "$ns_c" link set "$tag-ca" up
echo "restored $(wc -l < "$dir/eval-a.log")" >> "$dir/marks"

wait "$coord"
echo "coordinator=$?" > "$dir/rc"
