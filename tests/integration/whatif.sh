#!/usr/bin/env bash
# gpusched whatif on hand-worked cluster dumps (tests/data/whatif/*.yaml, each explained in its
# header comment): the JSON lines must equal the .expected file exactly. Then bad input: exit 2
# with one message naming the file and place, and a run that does not settle: exit 3.
set -uo pipefail
bin=$1 src=$2
d=$src/tests/data/whatif
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

case_() { # [EXPECT=E] case_ NAME [extra args...]: NAME.yaml (NAME if it ends in .json)
    local name=$1 exp=${EXPECT:-$1} file=$d/$1.yaml # against E.expected (E: NAME)
    shift
    case $name in *.json) file=$d/$name ;; esac
    local what=$exp
    [ "$name" = "$exp" ] || what="$name as $exp"
    "$bin" whatif --cluster "$file" --json "$@" >"$tmp/$exp.out" 2>"$tmp/$exp.err"
    local rc=$?
    if [ $rc != 0 ] || ! diff -u "$d/$exp.expected" "$tmp/$exp.out"; then
        echo "FAIL: $what: rc $rc"
        cat "$tmp/$exp.err"
        fail=1
    else
        echo "ok: $what ($(wc -l <"$tmp/$exp.out") lines)"
    fi
}
case_ selector
case_ preempt
# The same dump as `kubectl get -o json` writes it: managedFields, resourceVersions, uids, what
# admission and defaulting add (spec.priority, preemptionPolicy, tolerations, requests), Node
# capacity; the decisions are the same, line for line.
EXPECT=preempt case_ preempt.json
# The translation rules, each worked out in translation.yaml's header.
case_ translation
# preemptionPolicy Never pods wait; the same pod with PreemptLowerPriority evicts.
case_ preempt_never
EXPECT=preempt_never.timeline case_ preempt_never --timeline "$d/preempt_never.timeline.yaml"
# Preemptible classes without the label: all of them, or KAI's rule below N (100 or given).
case_ kai_queue
case_ kai_threshold
EXPECT=kai_threshold.kai case_ kai_threshold --kai-preemptible-threshold
EXPECT=kai_threshold.151 case_ kai_threshold --kai-preemptible-threshold=151
case_ pdb
case_ pdb_late --timeline "$d/pdb_late.timeline.yaml"
case_ foreign
case_ reclaim
# Priority preemption across queues (only pods above their queue's quota, for a pod within its
# own), and a pod that fits no node holding up nothing behind it.
case_ cross_queue
# Preferred node affinity: its weights, summed over the terms a node matches.
case_ preferred
case_ gang --timeline "$d/gang.timeline.yaml" --policy bestfit
case_ lifecycle --timeline "$d/lifecycle.timeline.yaml" --policy bestfit
case_ gang_loss --timeline "$d/gang_loss.timeline.yaml" --policy bestfit
case_ queue_edit --timeline "$d/queue_edit.timeline.yaml" --policy bestfit
case_ inventory
case_ xres --policy bestfit
case_ sharing_memory
case_ sharing_mig
case_ sharing_timeslice
case_ sharing_adopt
case_ sharing_refused
case_ sharing_modes --timeline "$d/sharing_modes.timeline.yaml"
case_ mig_capacity
case_ by_model --policy bestfit
# NVLink peers in the inventory: two 2-GPU pods on pairs, a 1-GPU pod on the GPU whose partner
# is taken (nvlink.yaml's header works it out).
case_ nvlink
EXPECT=nvlink case_ nvlink --policy bestfit
# The broken inventory of inventory.yaml's n2 is one warning naming the node and the field.
want="gpusched whatif: warning: node n2: annotation gpusched.io/gpus: gpus[1].uuid: not a non-empty string of at most 95 bytes; GPUs read from status.capacity"
if [ "$(cat "$tmp/inventory.err")" != "$want" ]; then
    echo "FAIL: inventory: stderr is not the one warning"
    cat "$tmp/inventory.err"
    fail=1
else
    echo "ok: inventory warning: $want"
fi

# sharing_mig.yaml's GPU 2 has overlapping instances: one warning naming node, GPU and fault.
want="gpusched whatif: warning: node n1: GPU 2: MIG layout: instance 1 (2g.20gb at 2) overlaps instance 0 (3g.40gb at 0) in memory slices 2-3; unusable"
if [ "$(cat "$tmp/sharing_mig.err")" != "$want" ]; then
    echo "FAIL: sharing_mig: stderr is not the one warning"
    cat "$tmp/sharing_mig.err"
    fail=1
else
    echo "ok: sharing_mig warning"
fi

# mig_capacity.yaml's n2: counts no layout holds: one warning naming node and profiles.
want="gpusched whatif: warning: node n2: nvidia.com/mig-7g.80gb: 1, nvidia.com/mig-1g.10gb: 1 fit no MIG layouts of H100-80GB on the 1 GPU(s) beside the 1 without MIG; its MIG capacity is unusable"
if [ "$(cat "$tmp/mig_capacity.err")" != "$want" ]; then
    echo "FAIL: mig_capacity: stderr is not the one warning"
    cat "$tmp/mig_capacity.err"
    fail=1
else
    echo "ok: mig_capacity warning"
fi

# The shipped PriorityClasses (deploy/priorityclasses.yaml) mean the same with and without
# --kai-preemptible-threshold: a gpusched-normal pod preempts a running gpusched-batch pod
# (value 100, which KAI's rule alone would make unpreemptible; its label "true" wins).
{
    printf 'apiVersion: v1\nkind: List\nitems:\n'
    awk 'BEGIN {first = 1} /^#/ {next} /^---/ {first = 1; next} first {print "- " $0; first = 0; next} {print "  " $0}' \
        "$src/deploy/priorityclasses.yaml"
    printf -- '- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: "8", memory: 64Gi, pods: "110", nvidia.com/gpu: "1"}}}\n'
    printf -- '- {apiVersion: v1, kind: Pod, metadata: {name: b, namespace: t}, spec: {schedulerName: gpusched, nodeName: n1, priorityClassName: gpusched-batch, containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}, status: {phase: Running}}\n'
    printf -- '- {apiVersion: v1, kind: Pod, metadata: {name: n, namespace: t}, spec: {schedulerName: gpusched, priorityClassName: gpusched-normal, containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}}\n'
} >"$tmp/shipped.yaml"
for opt in "" --kai-preemptible-threshold; do
    # shellcheck disable=SC2086 # the option is one word or none
    if ! "$bin" whatif --cluster "$tmp/shipped.yaml" --json $opt 2>"$tmp/err" |
        grep -qxF '{"t_s":0.0,"cycle":1,"event":"evict","pod":"t/b","node":"n1","reason":"preemption","by":"t/n","why":"priority 1000 > 100 in queue default"}'; then
        echo "FAIL: shipped classes ${opt:-without the option}"
        cat "$tmp/err"
        fail=1
    else
        echo "ok: shipped classes ${opt:-without the option}: batch is preempted by normal"
    fi
done

# Without a globalDefault class a pod without a class has priority 0 (translation.yaml has one,
# so it cannot show this): a class of value 1 preempts it; at 0 it would not.
printf 'kind: List\nitems:\n- {kind: PriorityClass, metadata: {name: one}, value: 1}\n- {kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: "8", memory: 64Gi, pods: "110", nvidia.com/gpu: "1"}}}\n- {kind: Pod, metadata: {name: zero, namespace: t}, spec: {schedulerName: gpusched, nodeName: n1, containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}, status: {phase: Running}}\n- {kind: Pod, metadata: {name: p1, namespace: t}, spec: {schedulerName: gpusched, priorityClassName: one, containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}}\n' >"$tmp/zero.yaml"
if ! "$bin" whatif --cluster "$tmp/zero.yaml" --json 2>"$tmp/err" |
    grep -qxF '{"t_s":0.0,"cycle":1,"event":"evict","pod":"t/zero","node":"n1","reason":"preemption","by":"t/p1","why":"priority 1 > 0 in queue default"}'; then
    echo "FAIL: no class and no globalDefault: priority 0"
    cat "$tmp/err"
    fail=1
else
    echo "ok: no class and no globalDefault: priority 0, preempted by a class of value 1"
fi

# kai_queue.yaml's KAI Queues: one warning per queue naming the fields gpusched ignores (lab,
# kmem), in the order written; none for kcpu, which has none.
reads="(gpusched reads spec.parentQueue and spec.resources.{gpu,cpu,memory}.{quota,limit,overQuotaWeight})"
want="gpusched whatif: warning: Queue lab (scheduling.run.ai/v2): ignored: spec.displayName, spec.priority $reads
gpusched whatif: warning: Queue kmem (scheduling.run.ai/v2): ignored: spec.reclaimMinRuntime, spec.resources.gpu.priority, spec.resources.nic $reads"
if [ "$(cat "$tmp/kai_queue.err")" != "$want" ]; then
    echo "FAIL: kai_queue: stderr is not the two warnings"
    cat "$tmp/kai_queue.err"
    fail=1
else
    echo "ok: kai_queue warnings"
fi

# The table form says the same as the JSON form.
"$bin" whatif --cluster "$d/preempt.yaml" >"$tmp/table" 2>&1
if ! grep -qE '^ +0\.0 +1 +evict +t/low-b +n1 +- +preemption by t/urgent: priority 50 > 10 in queue default$' "$tmp/table" ||
    ! grep -qE '^ +0\.0 +1 +bind +t/urgent +n1 +1 +preempted t/low-b \(priority 10, same queue\)$' "$tmp/table"; then
    echo "FAIL: table form"
    cat "$tmp/table"
    fail=1
fi

# ... with what each sharing kind took on each GPU.
"$bin" whatif --cluster "$d/sharing_mig.yaml" >"$tmp/table" 2>/dev/null
if ! grep -qE '^ +0\.0 +1 +bind +t/pair +n1 +0\(3g\.40gb@0\),0\(3g\.40gb@4\) *$' "$tmp/table"; then
    echo "FAIL: table form of MIG instances"
    cat "$tmp/table"
    fail=1
fi
# ... and a MIG instance read from capacity, whose start the node does not publish.
"$bin" whatif --cluster "$d/mig_capacity.yaml" >"$tmp/table" 2>/dev/null
if ! grep -qE '^ +0\.0 +1 +bind +t/b +n1 +7\(1g\.10gb\) *$' "$tmp/table"; then
    echo "FAIL: table form of MIG instances without a start"
    cat "$tmp/table"
    fail=1
fi
"$bin" whatif --cluster "$d/sharing_memory.yaml" >"$tmp/table" 2>/dev/null
if ! grep -qE '^ +0\.0 +1 +bind +t/hami +n1 +0\(300m\+30000MiB\) *$' "$tmp/table"; then
    echo "FAIL: table form of memory fractions"
    cat "$tmp/table"
    fail=1
fi

bad() { # bad NAME EXPECTED-REGEX [args...]  (cluster file on stdin unless args give one)
    local name=$1 want=$2
    shift 2
    cat >"$tmp/$name.yaml"
    "$bin" whatif --cluster "$tmp/$name.yaml" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ $rc != 2 ] || [ "$(wc -l <"$tmp/err")" != 1 ] || ! grep -qE -- "$want" "$tmp/err"; then
        echo "FAIL: $name: rc $rc"
        cat "$tmp/err"
        fail=1
    else
        echo "ok: $name: $(cat "$tmp/err")"
    fi
}
printf 'kind: List\nitems:\n  - {a: [1, 2}\n' | bad bad_yaml "bad_yaml\.yaml:3:[0-9]+: "
printf 'kind: List\nitems: &x [*x]\n' | bad alias "aliases are not accepted"
printf 'kind: Pod\nmetadata: {name: x}\n' | bad not_a_list "not a List of objects"
printf 'kind: List\nitems:\n- {kind: PodDisruptionBudget, metadata: {name: x, namespace: t}, spec: {selector: {matchExpressions: [{key: app, operator: Has}]}}}\n' |
    bad bad_pdb_operator 'bad_pdb_operator\.yaml: PodDisruptionBudget t/x: spec\.selector\.matchExpressions\[0\]\.operator "Has" is not In, NotIn, Exists or DoesNotExist'
printf 'kind: List\nitems:\n- {kind: PodDisruptionBudget, metadata: {name: x, namespace: t}, spec: {selector: {matchLabels: {app: 3}}}, status: {disruptionsAllowed: 1}}\n' |
    bad bad_pdb_label 'bad_pdb_label\.yaml: PodDisruptionBudget t/x: spec\.selector\.matchLabels\.app is not a string'
printf 'kind: List\nitems:\n- {kind: PodDisruptionBudget, metadata: {name: x, namespace: t}, spec: {selector: {matchLabels: {app: db}}}, status: {disruptionsAllowed: -1}}\n' |
    bad bad_pdb_allowed 'bad_pdb_allowed\.yaml: PodDisruptionBudget t/x: status\.disruptionsAllowed is not a whole number >= 0'
printf 'kind: List\nitems:\n- {kind: Node, metadata: {name: n}, status: {allocatable: {cpu: lots}}}\n' |
    bad bad_quantity 'bad_quantity\.yaml: node n: status\.allocatable\.cpu is "lots", not a quantity$'
printf 'kind: List\nitems:\n- {kind: Node, metadata: {name: n}, status: {allocatable: {example.com/fpga: [1]}}}\n' |
    bad bad_other_quantity 'node n: status\.allocatable\.example\.com/fpga is a list, not a quantity$'
# The API server keeps one object per name: a dump with two is refused, naming both places.
printf 'kind: List\nitems:\n- {kind: Pod, metadata: {name: p, namespace: t}}\n- {kind: Node, metadata: {name: p}}\n- {kind: Pod, metadata: {name: p, namespace: t}}\n' |
    bad duplicate_pod 'duplicate_pod\.yaml: items\[2\]: Pod t/p already exists \(items\[0\]\)$'
printf 'kind: List\nitems:\n- {kind: Queue, apiVersion: scheduling.gpusched.io/v1alpha1, metadata: {name: q}, spec: {parentQueue: nope}}\n' |
    bad missing_parent "missing_parent\.yaml: Queue q: spec\.parentQueue nope does not exist"
printf 'kind: List\nitems:\n- {kind: Queue, apiVersion: scheduling.gpusched.io/v1alpha1, metadata: {name: q}, spec: {resources: {gpu: {byModel: {H100: {quota: 4, limit: 2}}}}}}\n' |
    bad bad_by_model "bad_by_model\.yaml: Queue q: spec\.resources\.gpu\.byModel\.H100\.limit: 2 is below the quota 4$"
printf 'kind: List\nitems:\n- {kind: Queue, apiVersion: scheduling.gpusched.io/v1alpha1, metadata: {name: q}, spec: {resources: {gpu: {byModel: {H100: {limit: many}}}}}}\n' |
    bad bad_by_model_qty 'bad_by_model_qty\.yaml: Queue q: spec\.resources\.gpu\.byModel\.H100\.limit is "many", not a number of GPUs$'
printf 'kind: List\nitems:\n- {kind: PodGroup, apiVersion: scheduling.x-k8s.io/v1alpha1, metadata: {name: g, annotations: {gpusched.io/gang-grace-seconds: soon}}, spec: {minMember: 2}}\n' |
    bad bad_grace "bad_grace\.yaml: PodGroup g: metadata\.annotations gpusched\.io/gang-grace-seconds must be a whole number of seconds \(0 to 1000000000\), not \"soon\""
printf 'kind: List\nitems:\n- {kind: PodGroup, apiVersion: scheduling.x-k8s.io/v1alpha1, metadata: {name: g}, spec: {minMember: 2, scheduleTimeoutSeconds: -5}}\n' |
    bad bad_timeout "bad_timeout\.yaml: PodGroup g: spec\.scheduleTimeoutSeconds must be a whole number >= 0"
printf -- '- {at: 10s, explode: [x]}\n' >"$tmp/tl.yaml"
printf 'kind: List\nitems: []\n' | bad bad_step "tl\.yaml: step 1: unknown action explode" --timeline "$tmp/tl.yaml"
printf -- '- {at: 10s, finish: [nobody]}\n' >"$tmp/tl2.yaml"
printf 'kind: List\nitems: []\n' | bad bad_pod_name "finish\[0\] must be namespace/name" --timeline "$tmp/tl2.yaml"
printf -- '- {at: 20s, create: []}\n- {at: 10s, create: []}\n' >"$tmp/tl3.yaml"
printf 'kind: List\nitems: []\n' | bad backwards "tl3\.yaml: step 2: .at. goes back in time" --timeline "$tmp/tl3.yaml"
printf 'kind: List\nitems: []\n' | bad bad_option "max-cycles must be" --max-cycles 0
printf 'kind: List\nitems: []\n' | bad bad_threshold "^gpusched whatif: --kai-preemptible-threshold must be a whole number from -2147483648 to 2147483647 \(a PriorityClass value\), not '1e3'$" --kai-preemptible-threshold=1e3
printf 'kind: List\nitems:\n- {kind: PriorityClass, metadata: {name: c}, value: 5, preemptionPolicy: Sometimes}\n' |
    bad bad_class_policy "bad_class_policy\.yaml: PriorityClass c: preemptionPolicy must be PreemptLowerPriority or Never$"
# A pod whose request is not a quantity waits, and its reason names the field and the value.
printf 'kind: List\nitems:\n- {kind: Node, metadata: {name: n1}, status: {allocatable: {nvidia.com/gpu: "1"}}}\n- {kind: Pod, metadata: {name: p, namespace: t}, spec: {schedulerName: gpusched, containers: [{name: a}, {name: b, resources: {limits: {nvidia.com/gpu: "1", memory: 12Qi}}}]}}\n' >"$tmp/badreq.yaml"
"$bin" whatif --cluster "$tmp/badreq.yaml" --json >"$tmp/out" 2>"$tmp/err"
want='{"t_s":0.0,"cycle":1,"event":"pending","pod":"t/p","reason":"spec.containers[1].resources.limits.memory is \"12Qi\", not a quantity"}'
if [ "$(cat "$tmp/out")" != "$want" ]; then
    echo "FAIL: bad request reason"; cat "$tmp/out" "$tmp/err"; fail=1
else
    echo "ok: bad request reason"
fi
# Actions on a pod that is gone say what ended it; deleting a finished pod is allowed. Bad
# input anywhere in a run prints no part of the report (exit 2, the message only).
printf 'kind: List\nitems:\n- {kind: Node, metadata: {name: n1}, status: {allocatable: {nvidia.com/gpu: "1"}}}\n- {kind: Pod, metadata: {name: p, namespace: t}, spec: {schedulerName: gpusched, containers: [{name: a, resources: {limits: {nvidia.com/gpu: "1"}}}]}}\n' >"$tmp/one.yaml"
printf -- '- {at: 10s, finish: [t/p]}\n- {at: 15s, delete: [t/p]}\n- {at: 20s, finish: [t/p]}\n' >"$tmp/tl5.yaml"
"$bin" whatif --cluster "$tmp/one.yaml" --timeline "$tmp/tl5.yaml" --json >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc != 2 ] || [ -s "$tmp/out" ] ||
    [ "$(cat "$tmp/err")" != "gpusched whatif: $tmp/tl5.yaml: step 3: finish t/p: the pod was already deleted at t_s 15.0" ]; then
    echo "FAIL: action on an ended pod: rc $rc"; cat "$tmp/out" "$tmp/err"; fail=1
else
    echo "ok: action on an ended pod: $(cat "$tmp/err")"
fi
# A pod deleted can be created again under its name (the first two steps pass: their binds
# are checked below without the third); one still there cannot.
printf -- '- {at: 10s, delete: [t/p]}\n- {at: 20s, create: [{kind: Pod, metadata: {name: p, namespace: t}, spec: {schedulerName: gpusched}}]}\n- {at: 30s, create: [{kind: Pod, metadata: {name: p, namespace: t}}]}\n' >"$tmp/tl6.yaml"
"$bin" whatif --cluster "$tmp/one.yaml" --timeline "$tmp/tl6.yaml" --json >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc != 2 ] || [ -s "$tmp/out" ] ||
    [ "$(cat "$tmp/err")" != "gpusched whatif: $tmp/tl6.yaml: step 3: create[0]: Pod t/p already exists (step 2: create[0])" ]; then
    echo "FAIL: create again: rc $rc"; cat "$tmp/out" "$tmp/err"; fail=1
else
    echo "ok: create again: $(cat "$tmp/err")"
fi
head -2 "$tmp/tl6.yaml" >"$tmp/tl7.yaml"
"$bin" whatif --cluster "$tmp/one.yaml" --timeline "$tmp/tl7.yaml" --json >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc != 0 ] || [ "$(grep -c '"event":"bind","pod":"t/p"' "$tmp/out")" != 2 ]; then
    echo "FAIL: create after delete: rc $rc"; cat "$tmp/out" "$tmp/err"; fail=1
else
    echo "ok: create after delete binds the new pod"
fi
# An empty dump says so in the table form (the JSON form has no line to print).
printf 'kind: List\nitems: []\n' >"$tmp/empty.yaml"
if [ "$("$bin" whatif --cluster "$tmp/empty.yaml")" != "nothing to bind, evict or leave pending: 0 node(s) and 0 pod(s) read, none of the pods for scheduler gpusched" ] ||
    [ -n "$("$bin" whatif --cluster "$tmp/empty.yaml" --json)" ]; then
    echo "FAIL: empty dump"; fail=1
else
    echo "ok: empty dump"
fi
# A timeline's shape is checked before anything runs: a bad step after a dump that binds pods
# prints no table before its error.
printf -- '- {at: 5s, create: []}\n- {at: 10s, cordon: n1}\n' >"$tmp/tl4.yaml"
if "$bin" whatif --cluster "$d/preempt.yaml" --timeline "$tmp/tl4.yaml" >"$tmp/out" 2>"$tmp/err" ||
    [ -s "$tmp/out" ] || ! grep -q "tl4.yaml: step 2: cordon must be a list" "$tmp/err"; then
    echo "FAIL: timeline checked up front"; cat "$tmp/out" "$tmp/err"; fail=1
else
    echo "ok: timeline checked up front: $(cat "$tmp/err")"
fi

# A scheduling that does not settle within --max-cycles exits 3 and says so.
"$bin" whatif --cluster "$d/preempt.yaml" --max-cycles 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc != 3 ] || ! grep -q "did not settle within 1 cycle at t=0.0s: cycle 1 still bound or evicted pods" "$tmp/err"; then
    echo "FAIL: max-cycles: rc $rc"
    cat "$tmp/err"
    fail=1
else
    echo "ok: max-cycles exits 3"
fi
exit $fail
