package e2e

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
)

// key is round i's MKT. A sends with SendID i and receives RecvID 100+i;
// BIRD holds the mirror image.
type key struct {
	i              int
	sendStart      time.Time // zero: since ever
	sendEnd        time.Time // zero: for ever
	acceptStart    time.Time
	acceptEnd      time.Time
	birdPreferred  bool
	birdDeprecated bool
	// excludeOpts sets tcp_options: exclude on A's side only (BIRD's keys
	// always include TCP options).
	excludeOpts bool
	// edited gives A's key file another secret under the same IDs (an
	// edit in place); BIRD keeps round i's.
	edited bool
	// alg is the key's algorithm in the key source's spelling ("":
	// hmac(sha256)).
	alg string
}

func (k key) algorithm() string { return cmp.Or(k.alg, "hmac(sha256)") }

func secretOf(i int) []byte {
	s := sha256.Sum256([]byte("aokeyd e2e round " + strconv.Itoa(i)))
	return s[:20]
}

// secretA is the secret A's key file holds for k.
func (k key) secretA() []byte {
	s := secretOf(k.i)
	if k.edited {
		s = secretOf(1000 + k.i)
	}
	if k.algorithm() == "cmac(aes128)" {
		return s[:16] // AES-128's key
	}
	return s
}

func (k key) sendID() uint8 { return uint8(k.i) }
func (k key) recvID() uint8 { return uint8(100 + k.i) }
func (k key) name() string  { return fmt.Sprintf("k%d", k.i) }

func (l *testbed) writeKeys(keys []key) {
	l.t.Helper()
	l.keys = keys
	if l.vwrite != nil {
		l.writeVault(keys)
		return
	}
	// JSON is YAML: the key file gets the same chain document Vault does.
	chain := chainDocFor(keys, l.neighbor())
	if l.md5 != "" {
		var m map[string]any
		if err := json.Unmarshal(chain, &m); err != nil {
			l.t.Fatal(err)
		}
		m["md5"] = map[string]string{"secret_b64": base64.StdEncoding.EncodeToString([]byte(l.md5))}
		var err error
		if chain, err = json.Marshal(m); err != nil {
			l.t.Fatal(err)
		}
	}
	doc, err := json.Marshal(map[string]any{"chains": map[string]json.RawMessage{"core": chain}})
	if err != nil {
		l.t.Fatal(err)
	}
	p := filepath.Join(l.dir, "keys.yaml")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, doc, 0o600); err != nil {
		l.t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		l.t.Fatal(err)
	}
}

// chainDoc is A's chain "core" as a key-source document (docs/keys.md).
func chainDoc(keys []key) json.RawMessage { return chainDocFor(keys, addrB.String()) }

// chainDocFor is chainDoc for the peers given (an address or a prefix).
func chainDocFor(keys []key, peers string) json.RawMessage {
	var ks []map[string]any
	for _, k := range keys {
		m := map[string]any{"name": k.name(), "send_id": k.sendID(), "recv_id": k.recvID(), "algorithm": k.algorithm(),
			"secret_hex": hex.EncodeToString(k.secretA()), "send_lifetime": lab.KeyLifetime(k.sendStart, k.sendEnd),
			"accept_lifetime": lab.KeyLifetime(k.acceptStart, k.acceptEnd)}
		if k.excludeOpts {
			m["tcp_options"] = "exclude"
		}
		ks = append(ks, m)
	}
	doc, err := json.Marshal(map[string]any{"peers": []string{peers}, "keys": ks})
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return doc
}

// writeVault puts A's chain into Vault, as the operator's automation would.
func (l *testbed) writeVault(keys []key) {
	l.t.Helper()
	if _, err := l.vwrite.WriteChain(context.Background(), "core", chainDocFor(keys, l.neighbor()), -1); err != nil {
		l.t.Fatalf("writing chain core to Vault: %v", err)
	}
}

func (l *testbed) birdConfig(keys []key) bird.Config {
	_, rb := l.routes()
	cfg := bird.Config{
		RouterID: addrB.String(), LocalAddr: l.ipB().String(), LocalAS: asB,
		Neighbor: l.ipA().String(), PeerAS: asA, Routes: rb, HoldTime: l.holdTime(), IPv6: l.v6,
	}
	for _, k := range keys {
		cfg.Keys = append(cfg.Keys, bird.Key{SendID: k.recvID(), RecvID: k.sendID(), Secret: secretOf(k.i),
			Algorithm: "hmac sha256", Preferred: k.birdPreferred, Deprecated: k.birdDeprecated})
	}
	return cfg
}
