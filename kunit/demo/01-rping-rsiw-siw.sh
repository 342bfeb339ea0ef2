# timeout: 120
# demo: rping between rsiw and the C siw, both ways, data verified
# rsiw and the C siw on the wire (one kernel, two devices each: provider_pairs): rping -V with
# an rsiw client and a C siw server, then a C siw client and an rsiw server, 20 rounds of
# 4 KiB each way; each round is a Send, an RDMA Read and an RDMA Write, checked byte for byte.
# rsiw's own counters (rdma statistic) show that the rsiw device carried the traffic. The four
# devices stay for the next step (02-perftest), which deletes them.
. /tests/lib.sh
provider_pairs
count=20

# fpdus DEV: the FPDUs and bytes the rsiw device DEV sent.
fpdus() {
  rdma statistic show link $1/1 | tr -s ' \n' '\n\n' |
    awk '$0 == "fpdus_sent" { getline; f = $0 } $0 == "fpdu_bytes_sent" { getline; b = $0 }
         END { print f + 0, b + 0 }'
}

# rping_way NAME SERVER_ADDR CLIENT_ADDR RSIW_DEV PORT: rping -V, $count rounds of 4 KiB;
# RSIW_DEV is the rsiw device of the two, whose sent FPDUs must move. (Each run has a port of
# its own: a listener goes some time after its process.)
rping_way() {
  local before after start port=$5
  before=$(fpdus $4)
  timeout 60 rping -s -a $2 -p $port -C $count -S 4096 -V >/tmp/rping-server.log 2>&1 &
  local server=$!
  wait_port $port $2 || fail "$1: rping server did not listen"
  start=$(date +%s)
  timeout 60 rping -c -a $2 -p $port -I $3 -C $count -S 4096 -V -v >/tmp/rping-client.log 2>&1 || {
    cat /tmp/rping-client.log /tmp/rping-server.log; fail "$1: rping client failed"; }
  wait $server || { cat /tmp/rping-server.log; fail "$1: rping server failed"; }
  n=$(grep -c 'ping data' /tmp/rping-client.log)
  [ "$n" = "$count" ] || fail "$1: rping: expected $count pings, saw $n"
  after=$(fpdus $4)
  set -- "$1" $before $after
  [ $(($4 - $2)) -ge $count ] && [ $(($5 - $3)) -ge $((count * 4096)) ] ||
    fail "$1: $4 sent $(($4 - $2)) FPDUs ($(($5 - $3)) bytes) for $count rounds"
  echo "$1: rping $n rounds of 4096 bytes, data verified ($(( $(date +%s) - start ))s); rsiw sent $(($4 - $2)) FPDUs, $(($5 - $3)) bytes"
}

rping_way "rsiw client (rsiw0) -> C siw server (siw1)" $(server_of siw) $ADDR2 rsiw0 7174
rping_way "C siw client (siw0) -> rsiw server (rsiw1)" $(server_of rsiw) $ADDR0 rsiw1 7175
