// Package config is aokeyd's daemon configuration: one YAML file that names
// the key source (a YAML key file or HashiCorp Vault), the rotation policy
// file, the BGP speaker whose sockets aokeyd manages (gobgpd through its gRPC
// address, or FRR's bgpd through its vty socket, and how to find its process), the control socket, the metrics listener,
// logging and kernel knobs.
//
// Decoding is strict: unknown fields, duplicate keys, wrong types and more
// than one YAML document are errors. Every problem names the file, line and
// field ("aokeyd.yaml:7: control.group: ...") and never the value there (a
// token pasted into the wrong field would be printed and logged), nor an
// unknown field's name; Parse reports all of them at
// once as a keystore.FieldErrors, the positioned-error list the key sources
// and the policy use too, wrapping keystore's shared sentinels (ErrSyntax,
// ErrUnknownField, ErrDuplicate, ErrMissingField, ErrInvalid). Relative
// paths in the file are resolved against the directory of the config file.
//
// # Schema
//
//	key_source:
//	  type: file                       file | vault (required)
//	  refresh: 30s                     how often the source is polled (default 30s)
//	  stale_after: 10m                 status warns when the last good read is older (default 10m)
//	  file:                            with type file
//	    path: /etc/aokeyd/keys.yaml    required
//	    allow_group_readable: false    accept a key file with group/other access
//	  vault:                           with type vault
//	    address: https://vault:8200    default: VAULT_ADDR
//	    mount: secret                  KV v2 mount (default "secret")
//	    prefix: aokeyd                 chains live at <prefix>/chains/<chain> (default "aokeyd")
//	    namespace: ""                  Vault Enterprise namespace
//	    ca_cert: /etc/ssl/vault-ca.pem optional CA bundle
//	    auth:
//	      method: token                token | approle (default token)
//	      token_file: /run/vault/token token sink (default: VAULT_TOKEN)
//	      role_id_file: ...            approle: required
//	      secret_id_file: ...          approle: required
//	      mount: approle               approle auth mount (default "approle")
//	policy:
//	  path: /etc/aokeyd/policy.yaml    required
//	  jitter_seed: ""                  seed of the per-peer rotation jitter (policy.WithJitterSeed)
//	speaker:
//	  type: gobgp                      gobgp (default) | frr
//	  frr:                             with type frr
//	    vty_socket: ""                 directory of bgpd.vty, FRR's --vty_socket (default /run/frr)
//	    pathspace: ""                  FRR's -N, for an FRR started with -N
//	    pid_file: /run/frr/bgpd.pid    how to find bgpd (default; /run/frr/NAME/bgpd.pid with
//	                                   a pathspace); when the file does not exist,
//	    process_name: bgpd             the one process of this name (default)
//	    poll_interval: 1s              neighbor listing interval: session event latency
//	                                   (default 1s, 100ms..1m)
//	gobgp:                             with speaker type gobgp
//	  address: 127.0.0.1:50051         gobgpd gRPC API (default)
//	  pid_file: /run/gobgpd.pid        how to find gobgpd: a pid file, or
//	  process_name: gobgpd             a process name (default when neither is set)
//	control:
//	  socket: /run/aokeyd/control.sock (default)
//	  group: ""                        read group (status, plan): the socket file's group
//	  admin_group: ""                  admin group (also rotate, revoke); root and aokeyd's uid always
//	  mode: "0660"                     socket mode; must not grant access to others
//	  read_timeout: 10s                reading one request (default)
//	  idle_timeout: 30s                a connection between requests (default)
//	  write_timeout: 2m                handling and answering one request (default)
//	  max_connections: 32              served at once, 1..1024 (default); one more gets 503
//	  admin_connections: 4             served at once beyond max_connections, for admins
//	                                   only (root, aokeyd's uid, admin_group), 1..1024 (default)
//	metrics:
//	  listen: 127.0.0.1:9179           host:port (default, localhost only); "off" disables
//	log:
//	  format: text                     text | json
//	  level: info                      debug | info | warn | error
//	kernel:
//	  raise_optmem: false              raise net.core.optmem_max in the speaker's network
//	                                   namespace to what the listener's keys need, with
//	                                   headroom (needs root, or CAP_SYS_ADMIN across namespaces)
//
// Default returns an embedded configuration for first runs and demos: a key
// file (seeded with keystore.DefaultKeyFile, public demo keys) and a policy
// (DemoPolicy) under /etc/aokeyd.
package config
