package config

import (
	"fmt"
	"reflect"
	"time"

	"github.com/aokeyd/aokeyd/internal/refdoc"
	"github.com/aokeyd/aokeyd/keystore"
)

// Reference is aokeyd.yaml's reference page, aokeyd.yaml(5): every field
// of Config (found by refdoc.Fields, so a new field without an entry in
// settingDocs fails the reference test), with the defaults parse applies.
func Reference() refdoc.Page {
	t := reflect.TypeFor[Config]()
	return refdoc.Page{
		Name:     "aokeyd.yaml",
		Summary:  "the configuration of aokeyd, the TCP-AO key rotation daemon",
		Intro:    referenceIntro,
		Settings: refdoc.WithTypes(refdoc.MustBuild(refdoc.Fields(t), settingDocs()), refdoc.Types(t)),
		Example:  referenceExample,
		SeeAlso:  []string{"aokeyd(8)", "aoctl(8)", "aoctl-validate(8)", "aokeyd-policy.yaml(5)", "aokeyd-keys.yaml(5)"},
	}
}

const referenceIntro = `aokeyd reads one YAML file, by default ` + DefaultPath + ` (aokeyd -config FILE). It names the key source (a key file or HashiCorp Vault), the rotation policy, the BGP speaker whose sockets aokeyd keys, the control socket aoctl talks to, the metrics listener, logging and kernel knobs. aokeyd init writes a first one; the package installs it.

Decoding is strict: an unknown field, a field given twice, a value of the wrong type and a second YAML document are problems. aoctl validate FILE lists every problem as FILE:LINE:COL: FIELD: PROBLEM, and aokeyd refuses to start on any of them. No problem shows a value of this file (a token pasted into the wrong field would be printed and logged), nor an unknown field's name.

Relative paths are relative to the directory of this file. Durations are a number with a unit, combinable: 30s, 10m, 1h30m, 1d (units w, d, h, m, s). No secret is ever written here: Vault credentials are named by their files.

SIGHUP (systemctl reload aokeyd) checks this file, the policy and the keys again, refusing a reload on any problem aokeyd's start refuses (named in the log and in aoctl status), and then applies a changed policy; the keys are read either way. The other settings of this file take effect when aokeyd restarts.`

const referenceExample = `# /etc/aokeyd/aokeyd.yaml: a router with gobgpd, keys in Vault.
key_source:
  type: vault
  refresh: 30s
  vault:
    address: https://vault.example:8200
    prefix: aokeyd/router-a
    ca_cert: /etc/ssl/vault-ca.pem
    auth:
      method: approle
      role_id_file: /etc/aokeyd/vault-role-id
      secret_id_file: /run/vault-agent/secret-id
policy:
  path: policy.yaml
speaker:
  type: gobgp
gobgp:
  address: 127.0.0.1:50051
control:
  group: aokeyd
  admin_group: netops
metrics:
  listen: 127.0.0.1:9179
log:
  format: json
  level: info`

// settingDocs documents every setting of aokeyd.yaml, by its path.
func settingDocs() map[string]refdoc.Doc {
	d := func(v time.Duration) string { return Duration(v).String() }
	return map[string]refdoc.Doc{
		"key_source": {Required: "yes", Text: "Where the keys (Master Key Tuples) come from: a key file or Vault."},
		"key_source.type": {Type: SourceFile + " | " + SourceVault, Required: "yes",
			Text: "The kind of key source; its settings are under key_source.file or key_source.vault."},
		"key_source.refresh": {Default: d(DefaultRefresh), Text: "How often the key source is read. A read that finds nothing new costs nothing else.", Example: "refresh: 1m"},
		"key_source.stale_after": {Default: d(DefaultStaleAfter),
			Text: "aoctl status warns when the last good read is older than this (Vault down, the file unreadable); the last good keys stay in force. At least refresh."},
		"key_source.file":      {Required: "with type file", Text: "A YAML key file, see aokeyd-keys.yaml(5)."},
		"key_source.file.path": {Required: "with type file", Text: "The key file.", Example: "path: /etc/aokeyd/keys.yaml"},
		"key_source.file.allow_group_readable": {Default: "false",
			Text: "Accept a key file that its group or others may read or write. By default such a file is refused (chmod 600 it)."},
		"key_source.vault": {Required: "with type vault",
			Text: "HashiCorp Vault's KV version 2: one secret per chain at MOUNT/PREFIX/chains/CHAIN, see aokeyd-keys.yaml(5). TLS and client settings also come from the standard VAULT_* variables."},
		"key_source.vault.address":   {Default: "$VAULT_ADDR", Text: "Vault's URL. A token never goes here.", Example: "address: https://vault.example:8200"},
		"key_source.vault.mount":     {Default: keystore.DefaultVaultMount, Text: "The KV version 2 mount."},
		"key_source.vault.prefix":    {Default: keystore.DefaultVaultPrefix, Text: "The path under the mount; the chains are at PREFIX/chains/CHAIN. One prefix per router, since each router's keys are the mirror image of its peers'.", Example: "prefix: aokeyd/router-a"},
		"key_source.vault.namespace": {Default: "$VAULT_NAMESPACE", Text: "The Vault Enterprise namespace."},
		"key_source.vault.ca_cert":   {Default: "$VAULT_CACERT", Text: "A CA bundle (PEM) to verify Vault's certificate with."},
		"key_source.vault.auth":      {Text: "How aokeyd logs in to Vault. Only files are named here, never a credential."},
		"key_source.vault.auth.method": {Type: AuthToken + " | " + AuthAppRole, Default: AuthToken,
			Text: "token: a token from token_file, or from VAULT_TOKEN in aokeyd's environment (/etc/default/aokeyd); approle: a login with role_id_file and secret_id_file, renewed and repeated as the token's TTL requires."},
		"key_source.vault.auth.token_file": {Default: "$VAULT_TOKEN",
			Text: "A file holding the token (Vault Agent's token sink), re-read when it changes and after a 403. Method token only.", Example: "token_file: /run/vault-agent/token"},
		"key_source.vault.auth.role_id_file":   {Required: "with method approle", Text: "A file holding the AppRole role ID."},
		"key_source.vault.auth.secret_id_file": {Required: "with method approle", Text: "A file holding the AppRole secret ID."},
		"key_source.vault.auth.mount":          {Default: keystore.DefaultAppRoleMount, Text: "The AppRole auth method's mount."},
		"policy":                               {Required: "yes", Text: "The rotation policy."},
		"policy.path":                          {Required: "yes", Text: "The policy file, see aokeyd-policy.yaml(5).", Example: "path: /etc/aokeyd/policy.yaml"},
		"policy.jitter_seed":                   {Text: "The seed of the per-peer jitter of generated rotations. Routers that must agree on a plan (both ends of a session) use the same seed."},
		"speaker":                              {Text: "The BGP speaker whose sessions aokeyd keys."},
		"speaker.type": {Type: speakerKindList("|"), Default: defaultSpeakerKind.Name,
			Text: "gobgp: gobgpd, through its gRPC API (settings under gobgp); frr: FRR's bgpd, through its vty socket; bird: BIRD, driven through its own configuration (aokeyd writes an include file per neighbor and reconfigures BIRD)."},
		"speaker.api": {Type: GoBGPAPIAuto + " | " + GoBGPAPIv3 + " | " + GoBGPAPIv4, Default: GoBGPAPIAuto,
			Text: "gobgpd's API line; auto detects it at the first call that reaches gobgpd. Type gobgp only."},
		"speaker.frr":              {Required: "with type frr (its settings have defaults)", Text: "FRR's bgpd."},
		"speaker.frr.vty_socket":   {Default: "/run/frr", Text: "The directory of FRR's vty sockets (FRR's --vty_socket)."},
		"speaker.frr.pathspace":    {Text: "FRR's -N, for an FRR started with -N: its pid file is then /run/frr/NAME/bgpd.pid."},
		"speaker.frr.pid_file":     {Default: DefaultFRRPIDFile, Text: "How aokeyd finds bgpd's process; when the file does not exist, by process_name."},
		"speaker.frr.process_name": {Default: DefaultFRRProcessName, Text: "bgpd's process name (comm), when its pid file does not exist."},
		"speaker.frr.poll_interval": {Default: d(DefaultFRRPollInterval),
			Text: fmt.Sprintf("How often bgpd's neighbors are listed: the latency of session events (%s..%s).", Duration(MinFRRPollInterval), Duration(MaxFRRPollInterval))},
		"speaker.bird":                {Required: "with type bird (its settings have defaults)", Text: "BIRD, driven natively."},
		"speaker.bird.control_socket": {Default: DefaultBirdControlSocket, Text: "BIRD's control socket (birdc -s)."},
		"speaker.bird.keys_dir": {Default: DefaultBirdKeysDir,
			Text: "One include file per neighbor, NEIGHBOR.conf, that the neighbor's protocol bgp includes; aokeyd alone writes them."},
		"speaker.bird.group": {Default: DefaultBirdGroup + " (when that group exists; else none)",
			Text: "The group BIRD runs as (bird -g): it reads the include files (0640) and searches keys_dir (0750), since BIRD reads its includes after dropping privileges. root: the files stay root's alone (0600)."},
		"speaker.bird.binary":        {Default: DefaultBirdBinary, Text: "The bird executable, run as bird -p to check each file before BIRD reads it."},
		"speaker.bird.pid_file":      {Text: "BIRD's pid file; aokeyd reads BIRD's sockets to verify, never writes them. Unset: BIRD is the process listening on control_socket (Debian's unit writes no pid file)."},
		"speaker.bird.process_name":  {Default: DefaultBirdProcessName, Text: "BIRD's process name, when pid_file is not set and no process listens on control_socket."},
		"speaker.bird.poll_interval": {Default: d(DefaultFRRPollInterval), Text: "How often BIRD's protocols are listed for session changes, for 30 s after aokeyd changed or checked BIRD's keys; ten times less often otherwise."},
		"gobgp":                      {Text: "gobgpd (speaker type gobgp)."},
		"gobgp.address":              {Default: DefaultGoBGPAddress, Text: "gobgpd's gRPC API, host:port."},
		"gobgp.pid_file":             {Text: "How aokeyd finds gobgpd's process; set pid_file or process_name, not both."},
		"gobgp.process_name":         {Default: DefaultProcessName, Text: "gobgpd's process name (comm), not a path; the default when pid_file is not set."},
		"control":                    {Text: "The control socket aoctl talks to."},
		"control.socket":             {Default: DefaultControlSocket, Text: "The socket's path."},
		"control.group": {Text: "The read group, a group name or gid: its members may read (aoctl status, plan). It is the socket file's group. Empty: root and aokeyd's own uid only, unless admin_group is set.",
			Example: "group: aokeyd"},
		"control.admin_group": {Text: "The admin group: its members may also change state (rotate, revoke, replace, adopt, migrate). Root and aokeyd's uid always may. With group set, admins must be members of it too."},
		"control.mode": {Type: "octal mode", Default: fmt.Sprintf("%04o", uint32(DefaultControlMode)),
			Text: "The socket file's mode; it must not grant access to others, and the owner needs read and write."},
		"control.read_timeout":  {Default: d(DefaultControlReadTimeout), Text: "The longest time to read one request (at least 1s)."},
		"control.idle_timeout":  {Default: d(DefaultControlIdleTimeout), Text: "The longest time a connection may wait between requests (at least 1s)."},
		"control.write_timeout": {Default: d(DefaultControlWriteTimeout), Text: "The longest time to handle and answer one request (at least 1s)."},
		"control.max_connections": {Default: fmt.Sprint(DefaultControlMaxConns),
			Text: fmt.Sprintf("Connections served at once, 1..%d; one more is answered 503.", MaxControlMaxConns)},
		"control.admin_connections": {Default: fmt.Sprint(DefaultControlAdminConns),
			Text: fmt.Sprintf("Connections served beyond max_connections for admins only (root, aokeyd's uid, admin_group), 1..%d: other users never keep an admin out.", MaxControlMaxConns)},
		"metrics":        {Text: "The Prometheus listener."},
		"metrics.listen": {Default: DefaultMetricsListen, Text: "host:port of /metrics; " + MetricsOff + " turns it off. The default listens on localhost only."},
		"metrics.per_key": {Type: "true | false", Default: "false",
			Text: "Export the per-key series too. By default a peer has at most 8 series: the ones the shipped alert rules read (aokeyd_rotation_failed_attempts, aokeyd_peer_send_coverage_end_timestamp_seconds, aokeyd_peer_verify_failing, aokeyd_peer_key_not_found, and its established socket's aokeyd_socket_pkt_bad_total and aokeyd_socket_pkt_key_not_found_total), aokeyd_rotation_state and aokeyd_peer_current_key_id; aokeyd_keys_kept adds one while the never-strand rule keeps a key, which its alerts report at once. true adds two series per key (aokeyd_key_pkt_good_total, aokeyd_key_pkt_bad_total) and the per-peer detail: aokeyd_peer_rnext_key_id, aokeyd_peer_keys_installed, aokeyd_peer_counters_age_seconds, aokeyd_socket_pkt_good_total, aokeyd_socket_pkt_ao_required_total and aokeyd_rotations_started_total, _completed_total and _aborted_total: 23 series a peer with 4 keys after a roll, 94,216 series and a 7 MB scrape at 4,096 peers. Takes effect on restart."},
		"log":        {Text: "aokeyd's log (standard error; the journal under systemd)."},
		"log.format": {Type: "text | json", Default: DefaultLogFormat},
		"log.level":  {Type: "debug | info | warn | error", Default: DefaultLogLevel},
		"kernel":     {Text: "Kernel knobs."},
		"kernel.raise_optmem": {Default: "false",
			Text: "Raise net.core.optmem_max in the speaker's network namespace to what the listener's keys need, with headroom (needs root, or CAP_SYS_ADMIN across namespaces). aoctl status warns when it is too low."},
		"kernel.expedite_rcu": {Default: "false",
			Text: "Expedite the kernel's RCU grace periods (/sys/kernel/rcu_expedited at 1) while many keys leave established sockets at once: a revoke's deletes, and BIRD's configure (speaker type bird), which deletes a key from each of its sessions one after another. Each such delete waits for a grace period (about 12 ms, more on a busy host): 1,000 sessions wait over 12 s without it, past BIRD's answer and the peers' hold timers. The knob is system-wide and costs every CPU an interrupt a grace period while set, so aokeyd sets it for the batch only and puts back what it found (after a crash, at its next start: the value is recorded in the state directory); a knob found at 1 is left alone. Needs root. For route servers and other routers with hundreds of sessions a speaker keys itself."},
		"kernel.keepalive_probe": {Type: "true | false", Default: "true",
			Text: "While a roll waits for the peer's next segment (its switch to the announced key, then its segment with the new key after the grace period), ask the kernel to send the peer one TCP keepalive probe: the peer's kernel answers at once, signed with the key the probe's RNextKeyID just made it switch to, so a roll does not wait for the peer's next BGP keepalive (a minute apart by default). aokeyd turns SO_KEEPALIVE on the speaker's session socket on for a few seconds (TCP_KEEPIDLE 1 s, TCP_KEEPINTVL 32767 s, TCP_KEEPCNT 127: one probe, never a close) and puts back what it found; where the speaker turned keepalive on itself (gobgpd: Go turns it on for every connection), only TCP_KEEPIDLE changes, and comes back. false: the waits last until the peer sends."},
		"fleet":            {Text: "Publish this router's keys (names and IDs, never material), roll state and counters to Vault every refresh, and apply the fleet's revocations (aoctl fleet status, aoctl fleet revoke). Needs key_source type vault: it uses the key source's Vault and login."},
		"fleet.vault_path": {Required: "with fleet", Text: "The KV version 2 mount and prefix of the fleet's documents.", Example: "vault_path: secret/aokeyd/fleet"},
		"fleet.router_id":  {Required: "with fleet", Text: "This router's name in the fleet: letters, digits, '.', '-' and '_', at most 128."},
		"fleet.addresses":  {Type: "list of addresses", Text: "The router's own addresses, by which other routers name it as their peer; the local addresses of its sessions are added."},
	}
}
