#!/bin/sh
# The demo's guest side (run by integration/tools/demo.sh inside the VM).
# SPEAKER=gobgp (default) or frr: router A's BGP speaker. Router A's keys
# are in a real Vault dev server (the `vault` binary demo.sh puts in PATH)
# in A's namespace; its root token is only in a mode-0600 file that aokeyd
# reads (key_source.vault.auth.token_file) and in the environment of the
# vault commands here, never on a command line or in the output.
set -eu
SPEAKER=${SPEAKER:-gobgp}
D=/tmp/demo
mkdir -p $D/state
say() { printf '\n==> %s\n' "$*"; }
hexof() { base64 -d | od -An -tx1 | tr -d ' \n'; }
cleanup() { kill $(jobs -p) ${vpid:-} 2>/dev/null || true; ip netns del demo-a 2>/dev/null || true; ip netns del demo-b 2>/dev/null || true; }
trap cleanup EXIT

say "two routers: A 192.0.2.1 (AS 65001) and B 192.0.2.2 (AS 65002), in network namespaces joined by veth"
ip netns add demo-a; ip netns add demo-b
ip -n demo-a link set lo up; ip -n demo-b link set lo up
ip -n demo-a link add veth-a type veth peer name veth-b netns demo-b
ip -n demo-a addr add 192.0.2.1/24 dev veth-a; ip -n demo-b addr add 192.0.2.2/24 dev veth-b
ip -n demo-a link set veth-a up; ip -n demo-b link set veth-b up

wait_for() { # $1 seconds, $2 description, rest: command
	n=$1; what=$2; shift 2
	while ! "$@" >/dev/null 2>&1; do
		n=$((n - 1)); [ $n -gt 0 ] || { echo "demo: timed out waiting for $what"; aoctl status 192.0.2.2 || true; tail -20 $D/aokeyd.log 2>/dev/null || true; exit 1; }
		sleep 1
	done
}

# vlt: the vault CLI against router A's Vault, with the root token.
vlt() { ip netns exec demo-a env VAULT_ADDR=http://127.0.0.1:8200 VAULT_TOKEN="$(cat $D/vault-token)" vault "$@"; }
say "router A's key source: HashiCorp $(vault version | cut -d, -f1) in dev mode (in memory, unsealed, KV v2 at secret/), on 127.0.0.1:8200 in A's namespace"
(umask 077; printf 'aokeyd-demo-%s\n' "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" >$D/vault-token)
mkdir -p $D/vault-home
VAULT_DEV_ROOT_TOKEN_ID=$(cat $D/vault-token) HOME=$D/vault-home ip netns exec demo-a \
	vault server -dev -dev-listen-address=127.0.0.1:8200 -dev-no-store-token >$D/vault.log 2>&1 &
vpid=$!
wait_for 60 "Vault to answer, unsealed" vlt status
# putchain FILE [CAS]: FILE's chain document as the next version of
# secret/aokeyd/chains/demo (check-and-set on version CAS), then FILE is
# removed: the keys live in Vault only.
putchain() {
	out=$(vlt kv put -mount=secret ${2:+-cas=$2} aokeyd/chains/demo @"$1" 2>&1) || { rm -f "$1"; echo "demo: vault kv put failed: $out"; exit 1; }
	rm -f "$1"
	printf '%s\n' "$out" | sed -n 's/^version *\([0-9]*\)$/  chain demo: version \1 written to Vault/p'
}
(umask 077; cat >$D/demo.json <<'JSON'
{"peers": ["192.0.2.2", "2001:db8::2"],
 "keys": [
  {"name": "demo-1", "send_id": 1, "recv_id": 101, "algorithm": "hmac(sha256)",
   "secret_b64": "yKTkv7SD14h/eY1yYJVC5nU85Ww=", "maclen": 12, "tcp_options": "include",
   "send_lifetime": "always", "accept_lifetime": "always"},
  {"name": "demo-2", "send_id": 2, "recv_id": 102, "algorithm": "hmac(sha256)",
   "secret_b64": "Oo4qsCyks+2L+ZrdOxYhJnosSSI=",
   "send_lifetime": {"start": "2030-01-01T00:00:00Z", "duration": "365d"},
   "accept_lifetime": {"start": "2029-12-31T00:00:00Z", "duration": "366d"}}
 ]}
JSON
)
say "the demo chain (aokeyd init's demo keys) written to Vault: vault kv put -mount=secret aokeyd/chains/demo @demo.json"
putchain $D/demo.json

say "aokeyd init: the embedded first-run config and demo policy; its key source turned to the Vault"
aokeyd init -dir $D/etc
rm $D/etc/keys.yaml # the keys are in Vault
# Lab timing: a fast key-source poll and a short grace so the roll is seen live.
sed -i 's|^key_source:|key_source:\n  refresh: 1s|; s|/run/aokeyd/control.sock|'$D'/control.sock|; s|listen: 127.0.0.1:9179|listen: "off"|' $D/etc/aokeyd.yaml
sed -i 's|^  type: file$|  type: vault|; s|^  file:$|  vault:|; s|^    path: .*/keys\.yaml$|    address: http://127.0.0.1:8200\n    auth:\n      token_file: '$D'/vault-token|' $D/etc/aokeyd.yaml
sed -n '/^key_source:/,/^[a-z]/{/^key_source:/p;/^ /p}' $D/etc/aokeyd.yaml
export AOKEYD_SOCKET=$D/control.sock

if [ "$SPEAKER" = frr ]; then
	# aokeyd talks to bgpd's vty socket, polled every second.
	sed -i '/^gobgp:/,/^  process_name:/d' $D/etc/aokeyd.yaml
	printf 'speaker:\n  type: frr\n  frr:\n    vty_socket: %s\n    pid_file: %s/bgpd.pid\n' $D/frr $D >>$D/etc/aokeyd.yaml
	mkdir -p $D/frr
	cat >$D/bgpd.conf <<FRR
frr defaults traditional
router bgp 65001
 bgp router-id 192.0.2.1
 no bgp ebgp-requires-policy
 no bgp network import-check
 timers bgp 1 3
 neighbor 192.0.2.2 remote-as 65002
 neighbor 192.0.2.2 passive
 neighbor 192.0.2.2 update-source 192.0.2.1
 address-family ipv4 unicast
  network 198.51.100.0/24
 exit-address-family
exit
FRR
	say "router A: FRR $(sed "s/.*version //" /.frr-version 2>/dev/null) bgpd (passive AO neighbor 192.0.2.2; FRR has no TCP-AO), and aokeyd managing its sockets"
	ip netns exec demo-a /usr/lib/frr/bgpd -Z -S -f $D/bgpd.conf -i $D/bgpd.pid --vty_socket $D/frr -P 0 >$D/bgpd.log 2>&1 &
else
cat >$D/gobgpd.toml <<TOML
[global.config]
  as = 65001
  router-id = "192.0.2.1"
  local-address-list = ["192.0.2.1"]
[[neighbors]]
  [neighbors.config]
    neighbor-address = "192.0.2.2"
    peer-as = 65002
  [neighbors.transport.config]
    passive-mode = true
  [neighbors.timers.config]
    hold-time = 3
    keepalive-interval = 1
TOML
	say "router A: gobgpd v3.37 (passive AO neighbor 192.0.2.2), and aokeyd managing its sockets"
	ip netns exec demo-a gobgpd -f $D/gobgpd.toml -t toml --pprof-disable >$D/gobgpd.log 2>&1 &
fi
sleep 2
ip netns exec demo-a aokeyd -config $D/etc/aokeyd.yaml -state-dir $D/state -roll-grace 3s -roll-poll 250ms >$D/aokeyd.log 2>&1 &

# B holds the mirror image of A's demo-1: its send id is A's recv id.
k1=$(printf '%s' "yKTkv7SD14h/eY1yYJVC5nU85Ww=" | hexof)
birdconf() { # $1: extra keys
	cat >$D/bird.conf <<BIRD
router id 192.0.2.2;
timeformat protocol iso long;
protocol device {}
protocol static { ipv4; route 203.0.113.0/24 blackhole; }
protocol bgp peer_a {
	local 192.0.2.2 as 65002;
	neighbor 192.0.2.1 as 65001;
	hold time 3; keepalive time 1; connect delay time 1; connect retry time 2;
	authentication ao;
	keys {
$1
	};
	ipv4 { import all; export where source = RTS_STATIC; };
}
BIRD
}
key1="		key { send id 101; recv id 1; secret hex:$k1; algorithm hmac sha256; preferred; };"
birdconf "$key1"
say "router B: BIRD 2.17 with 'authentication ao' and the mirrored key (send id 101, recv id 1)"
ip netns exec demo-b bird -c $D/bird.conf -s $D/bird.ctl
bc() { ip netns exec demo-b birdc -s $D/bird.ctl "$@"; }

established() { aoctl status --json 192.0.2.2 | grep -q '"session_state": *"established"'; }
wait_for 90 "the session" established
sleep 2
say "aoctl status, BEFORE the roll: the session is up and every segment is signed with demo-1"
aoctl status 192.0.2.2
bc show protocols all peer_a | sed -n '/TCP-AO/,/Bad packets/p'

say "rotation: a new key is generated (20 random bytes) and given to B first, as an operator's automation would"
new=$(head -c 20 /dev/urandom | base64)
newhex=$(printf '%s' "$new" | hexof)
key3="		key { send id 103; recv id 3; secret hex:$newhex; algorithm hmac sha256; };"
birdconf "$key1
$key3"
bc configure >/dev/null
now=$(date -u +%s)
ts() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }
# demo: demo-1 retires, demo-3 (generated just now) takes over: the
# chain's next version in Vault, written with check-and-set on version 1.
(umask 077; cat >$D/demo.json <<JSON
{"peers": ["192.0.2.2", "2001:db8::2"],
 "keys": [
  {"name": "demo-1", "send_id": 1, "recv_id": 101, "algorithm": "hmac(sha256)",
   "secret_b64": "yKTkv7SD14h/eY1yYJVC5nU85Ww=",
   "send_lifetime": {"end": "$(ts $((now + 5)))"}, "accept_lifetime": {"end": "$(ts $((now + 12)))"}},
  {"name": "demo-3", "send_id": 3, "recv_id": 103, "algorithm": "hmac(sha256)",
   "secret_b64": "$new",
   "send_lifetime": {"start": "$(ts $((now - 1)))"}, "accept_lifetime": {"start": "$(ts $((now - 60)))"}}
 ]}
JSON
)
putchain $D/demo.json 1
has3() { aoctl status --json 192.0.2.2 | grep -q '"send_id": *3'; }
wait_for 30 "aokeyd to install demo-3" has3
sleep 3
say "aoctl status, DURING the roll: demo-3 installed and announced with RNext, demo-1 still there"
aoctl status 192.0.2.2

say "B prefers demo-3 and deprecates demo-1 (BIRD's way of rolling)"
key1dep="		key { send id 101; recv id 1; secret hex:$k1; algorithm hmac sha256; deprecated; };"
key3pref="		key { send id 103; recv id 3; secret hex:$newhex; algorithm hmac sha256; preferred; };"
birdconf "$key1dep
$key3pref"
bc configure >/dev/null
# The session's keys (the listener's keys for the peer, listener.keys, are
# left out: the listener keeps the new key; so are the keys in use,
# sending and peer_sending, which name session keys again).
ids() { aoctl status --json 192.0.2.2 | tr -d ' \n' | sed -E 's/"listener":\{"keys":\[[^]]*\]//; s/"(sending|peer_sending|peer_asked)":\{[^}]*\}//g' | grep -o '"send_id":[0-9]*' | tr '\n' ' '; }
only3() { [ "$(ids)" = '"send_id":3 ' ]; }
wait_for 60 "the roll to finish (demo-1 gone)" only3
birdconf "$key3pref"
bc configure >/dev/null
sleep 2
say "aoctl status, AFTER the roll: only demo-3, current on both sides, no bad packets, the session never dropped"
aoctl status 192.0.2.2
bc show protocols all peer_a | sed -n '/BGP state/p;/TCP-AO/,/Bad packets/p'
say "routes B announced, as A sees them (a dropped session would have lost them)"
if [ "$SPEAKER" = frr ]; then
	ip netns exec demo-a vtysh --vty_socket $D/frr -c 'show bgp ipv4 unicast'
else
	ip netns exec demo-a gobgp global rib
fi
say "aoctl plan: nothing left to do"
aoctl plan
say "the chain in Vault (its metadata only): version 2, the roll's, is current"
vlt kv metadata get -mount=secret aokeyd/chains/demo | sed -n '/^current_version/p;/^oldest_version/p'
say "demo finished: $SPEAKER and BIRD rolled from demo-1 to a freshly generated key, written to Vault, with TCP-AO, hitless"
