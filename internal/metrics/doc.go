// Package metrics holds every Prometheus metric aokeyd exports, with their
// names in one place (names.go), and a Metrics value that the daemon updates.
//
// Per-peer series carry the labels peer (the neighbor address or prefix) and
// vrf ("" for the default VRF); DeletePeer removes every series of a peer
// when it goes away, so no stale series outlive a deleted neighbor.
//
// The kernel's TCP-AO counters (per key pkt_good/pkt_bad from
// TCP_AO_GET_KEYS, per socket pkt_key_not_found/pkt_ao_required from
// TCP_AO_INFO) are mirrored as counters: ObserveKeys and ObserveSocket store
// the values last read and a scrape reports them; SetCountersReadAt says
// when they were read, and a scrape serves their age (aokeyd serves the
// reads its rotation machines made, and reads the kernel on a scrape only
// when they are stale). A counter that goes down (a re-created socket) is a
// counter reset to Prometheus, which rate() handles.
//
// The per-peer series (tens of thousands on a large PE) are not
// client_golang collectors but a store (peers.go) that builds each series'
// labels once; Handler serves a text scrape straight from it and any other
// format through promhttp from Gatherer, which also serves the registry's
// metrics. The setters are cheap (a lock and a map lookup per call), and a
// scrape's cost is the series' text, not a per-series protobuf, label
// check and sort.
//
// At route-server size (thousands of peers) a scrape's cost and aokeyd's
// memory go with the series per peer, so the per-key counters and the
// per-peer detail no shipped alert reads are off unless Options.PerKey
// (aokeyd.yaml's metrics.per_key): by default a peer has at most
// MaxDefaultPerPeer series, one in each family the alerts read, its
// rotation state and its Current_key. A family that is off never gets a
// series: its setters return first.
//
// No metric carries key material: keys are named by chain, name and IDs.
// Label values with unbounded cardinality (error texts) are never used:
// abort reasons must be short fixed words.
package metrics
