package peerconfig

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestYANGLint validates every --for yang rendering of yangCases (with
// secrets: a placeholder is not a hex-string, on purpose) with Debian's
// yanglint against RFC 8177's ietf-key-chain, as FRR's Debian package
// ships it, with every feature on. No Debian package ships RFC 9648's
// ietf-tcp, so the document yanglint reads is the rendering without the
// nodes of that module (the authentication augment, and the keys whose
// crypto-algorithm is its aes-128 identity); TestYANGSchemaPaths checks
// those against RFC 9648's tree. A document the model refuses is refused
// here too (the validator is live). AOKEYD_YANGLINT names yanglint and
// AOKEYD_YANG_DIR the directory holding ietf-key-chain.yang; `make renderings`
// sets both, and without them the test is skipped.
func TestYANGLint(t *testing.T) {
	run := yangLinter(t)
	if run == nil {
		t.Skip("AOKEYD_YANGLINT and AOKEYD_YANG_DIR not set (make renderings sets them)")
	}
	for name, l := range yangCases(t) {
		var out bytes.Buffer
		if refused, err := Render(&out, YANG, l, Options{At: at, WithSecrets: true}); err != nil || len(refused) > 0 {
			t.Fatalf("%s: refused %v, err %v", name, refused, err)
		}
		doc, dropped := withoutModule(t, out.Bytes(), "ietf-tcp")
		if err := run(name, doc); err != nil {
			t.Errorf("%s: yanglint refuses the rendering: %v\n%s", name, err, doc)
			continue
		}
		t.Logf("yang: %s: valid against ietf-key-chain (%d keys of ietf-tcp's aes-128 left to TestYANGSchemaPaths)", name, dropped)
	}
	// A send-id where the old renderings put it: refused.
	bad := []byte(`{"ietf-key-chain:key-chains":{"key-chain":[{"name":"c","key":[{"key-id":"1","crypto-algorithm":"ietf-key-chain:hmac-sha-256","key-string":{"keystring":"k"},"send-id":1}]}]}}`)
	if err := run("bad", bad); err == nil {
		t.Errorf("yanglint accepts a key with a node the model does not have: the validator is not live")
	}
}

// yangLinter returns a function that has yanglint (AOKEYD_YANGLINT) read
// doc as configuration data of RFC 8177's ietf-key-chain (from
// AOKEYD_YANG_DIR) with every feature on: nil when it is valid. It is nil
// when either variable is not set (`make renderings` sets both).
func yangLinter(t *testing.T) func(name string, doc []byte) error {
	lint, dir := os.Getenv("AOKEYD_YANGLINT"), os.Getenv("AOKEYD_YANG_DIR")
	if lint == "" || dir == "" {
		return nil
	}
	return func(name string, doc []byte) error {
		f := filepath.Join(t.TempDir(), name+".json")
		if err := os.WriteFile(f, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(lint, "-p", dir, "-F", "ietf-key-chain:*", "-t", "config",
			filepath.Join(dir, "ietf-key-chain.yang"), f).CombinedOutput()
		if err != nil {
			return &lintError{string(out)}
		}
		return nil
	}
}

type lintError struct{ out string }

func (e *lintError) Error() string { return strings.TrimSpace(e.out) }

// withoutModule returns doc without the nodes of module mod: members named
// "mod:..." and keys whose crypto-algorithm is one of its identities
// (their number is returned).
func withoutModule(t *testing.T, doc []byte, mod string) ([]byte, int) {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	dropped := 0
	for _, c := range v["ietf-key-chain:key-chains"].(map[string]any)["key-chain"].([]any) {
		chain := c.(map[string]any)
		var keep []any
		for _, k := range chain["key"].([]any) {
			key := k.(map[string]any)
			for name := range key {
				if strings.HasPrefix(name, mod+":") {
					delete(key, name)
				}
			}
			if alg, _ := key["crypto-algorithm"].(string); strings.HasPrefix(alg, mod+":") {
				dropped++
				continue
			}
			keep = append(keep, key)
		}
		chain["key"] = keep
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out, dropped
}
