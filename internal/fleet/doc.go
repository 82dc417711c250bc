// Package fleet is aokeyd's fleet view through Vault: every aokeyd
// publishes a small status document (Document) to a KV v2 path, and reads
// the fleet's revocation record (RevocationList) from it; `aoctl fleet
// status` joins the documents into links (Join) and flags what is wrong
// with each link; `aoctl fleet revoke` appends to the record with
// check-and-set.
//
// Layout under the configured path (a KV v2 mount and a prefix, e.g.
// secret/aokeyd/fleet):
//
//	<mount>/data/<prefix>/routers/<router_id>   one Document per router
//	<mount>/data/<prefix>/revocations           the RevocationList
//
// A Document names keys (chain and name), their send and receive IDs,
// algorithm, TCP-options setting, lifetimes, which is Current_key and
// RNext_key, and counters. It has no field for key material, nor for any
// hash or fingerprint of it: a status document is readable by every
// operator of the fleet, a key is not.
//
// Publishing never holds up reconciliation: the Publisher runs on its own
// goroutine (a supervised piece), the daemon only wakes it through a
// one-slot mailbox that never blocks, and a failed Vault request is a log
// line and a metric, never an error that stops aokeyd.
package fleet
