#!/usr/bin/env bash
# Bad input through the real binary: each malformed trace gives exit status 2, one message that
# names the file, line and column, and no output files. Well-formed oddities (CRLF, BOM, quoted
# fields) are read as the plain file would be.
set -uo pipefail
bin=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
nodes=$src/tests/data/slice_nodes.csv pods=$src/tests/data/slice_pods.csv
hdr='name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time'
good='openb-pod-0001,6000,12288,1,460,,LS,Running,0,10,0'

bad() { # bad NAME EXPECTED-LOCATION-REGEX [nodes|pods]  (file content on stdin)
    local name=$1 where=$2 kind=${3:-pods}
    cat >"$tmp/$name.csv"
    local n=$nodes p=$pods
    if [ "$kind" = nodes ]; then n=$tmp/$name.csv; else p=$tmp/$name.csv; fi
    rm -rf "$tmp/out"
    "$bin" simulate --nodes "$n" --pods "$p" --seeds 1 --policy fgd --out "$tmp/out" \
        >"$tmp/stdout" 2>"$tmp/stderr"
    local rc=$?
    local lines
    lines=$(wc -l <"$tmp/stderr")
    if [ $rc != 2 ] || [ "$lines" != 1 ] || ! grep -qE -- "$name\.csv:$where" "$tmp/stderr" ||
        [ -e "$tmp/out" ]; then
        echo "FAIL: $name: rc $rc, $lines stderr line(s), out exists: $([ -e "$tmp/out" ] && echo yes || echo no)"
        cat "$tmp/stderr"
        fail=1
    else
        echo "ok: $name: $(cat "$tmp/stderr")"
    fi
}
printf '%s\n%s\n' "$hdr" 'openb-pod-0001,6000,12288,1,460,,LS,Running,0,10' | bad missing_column '2:11:'
printf '%s\n%s\n' "$hdr" "$good,7" | bad extra_column '2:12:'
printf '%s\n%s\n%s\n' "$hdr" "$good" 'openb-pod-0002,6x00,12288,1,460,,LS,Running,0,10,0' | bad non_numeric '3:2:'
printf '%s\n%s\n' "$hdr" 'openb-pod-0001,6000,-5,1,460,,LS,Running,0,10,0' | bad negative '2:3:'
printf '%s\n%s\n' "$hdr" 'openb-pod-0001,6000,12288,1,1460,,LS,Running,0,10,0' | bad gpu_milli_over_1000 '2:5:'
printf '%s\n%s\n' "$hdr" 'openb-pod-0001,6000,12288,2,500,,LS,Running,0,10,0' | bad shared_multi_gpu '2:[45]:'
printf '' | bad empty_file '1:1:'
printf '%s\n' "$hdr" | bad header_only '2:1:'
{ printf '%s\n' "$hdr"; printf 'openb-pod-0001,'; head -c 10485760 /dev/zero | tr '\0' '9'; printf ',1,1,1000,,LS,Running,0,1,0\n'; } | bad ten_mb_line '2:'
printf 'sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,2,P100\nn2,64000,262144,abc,P100\n' | bad node_non_numeric '3:4:' nodes
printf 'sn,cpu_milli,memory_mib,gpu\nn1,64000,262144,2\n' | bad node_missing_model_column '1:' nodes

# Accepted oddities: CRLF, BOM and quoted fields give the same results as the plain files.
ok_same() { # ok_same NAME  (pods content on stdin)
    cat >"$tmp/$1.csv"
    "$bin" simulate --nodes "$nodes" --pods "$tmp/$1.csv" --seeds 3 --policy fgd --no-plot \
        --out "$tmp/$1.out" >/dev/null 2>"$tmp/stderr" || { echo "FAIL: $1 rejected"; cat "$tmp/stderr"; fail=1; return; }
    # Compare every column but the workload name.
    if ! diff <(cut -d, -f2- "$tmp/plain.out/allocation.csv") <(cut -d, -f2- "$tmp/$1.out/allocation.csv") >/dev/null; then
        echo "FAIL: $1 gives different results from the plain file"; fail=1
    else
        echo "ok: $1 read like the plain file"
    fi
}
"$bin" simulate --nodes "$nodes" --pods "$pods" --seeds 3 --policy fgd --no-plot --out "$tmp/plain.out" >/dev/null
sed 's/$/\r/' "$pods" | ok_same crlf
{ printf '\xef\xbb\xbf'; cat "$pods"; } | ok_same bom
awk -F, 'BEGIN{OFS=","} NR>1{$1="\"" $1 "\""; $6="\"" $6 "\""} {print}' "$pods" | ok_same quoted
[ $fail = 0 ] && echo "bad_input: all checks passed"
exit $fail
